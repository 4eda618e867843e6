"""A sample third-party plugin, as a plugin author would write one.

It registers a policy, ``loudmouth``, that posts its persona's sentences in capitals and likes
every post with an exclamation mark, and a metric, ``post_length``, the mean length of the
round's posts. Install it with ``pip install .`` and it appears in ``townsquare plugins``.
"""

from pydantic import BaseModel, ConfigDict

from townsquare import hookimpl
from townsquare.actions import Action
from townsquare.specs import MetricSpec, PolicySpec


class LoudConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    feed_size: int = 5


class Loudmouth:
    def __init__(self, config, ctx):
        self.config = config or LoudConfig()
        self.shouted = 0

    async def step(self, ctx):
        me = ctx.agent
        feed = await ctx.platform.home_timeline(me.id, limit=self.config.feed_size, rng=ctx.rng)
        actions = [Action(me.id, "like", target_post=p.id) for p in feed if "!" in p.text]
        sentence = me.persona.sentences[self.shouted % len(me.persona.sentences)]
        self.shouted += 1
        return actions + [Action(me.id, "post", text=sentence.upper().rstrip(".") + "!")]

    def get_state(self):
        return {"shouted": self.shouted}

    def set_state(self, state):
        self.shouted = state["shouted"]


class PostLength:
    def __init__(self, config, ctx):
        self.texts = 0

    async def measure(self, view):
        return {"posts": sum(1 for a in view.actions if a["kind"] == "post")}

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


@hookimpl
def townsquare_register_policies():
    return [PolicySpec("loudmouth", Loudmouth, config_model=LoudConfig)]


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("post_count", PostLength)]
