"""A sample third-party plugin, as a plugin author would write one.

It registers a policy, ``loudmouth``, that posts its persona's sentences in capitals and likes
every post with an exclamation mark, and a metric, ``post_count``, that counts the round's
actions of some kinds. The two have different config models, so each reads its own table:
``[plugins.loudmouth.loudmouth]`` and ``[plugins.loudmouth.post_count]``. Install it with
``pip install .`` and it appears in ``townsquare plugins``.
"""

from pydantic import BaseModel, ConfigDict

from townsquare.api import Action, MetricSpec, PolicySpec, hookimpl


class LoudConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    feed_size: int = 5


class Loudmouth:
    def __init__(self, config, ctx):
        self.config = config or LoudConfig()
        self.shouted = 0

    async def step(self, ctx):
        me = ctx.agent
        # ctx.home_timeline applies the agent's generator and its population's feed stage
        feed = await ctx.home_timeline(self.config.feed_size)
        actions = [Action(me.id, "like", target_post=p.id) for p in feed if "!" in p.text]
        sentence = me.persona.sentences[self.shouted % len(me.persona.sentences)]
        self.shouted += 1
        return actions + [Action(me.id, "post", text=sentence.upper().rstrip(".") + "!")]

    def get_state(self):
        return {"shouted": self.shouted}

    def set_state(self, state):
        self.shouted = state["shouted"]


class CountConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kinds: list[str] = ["post"]


class PostCount:
    """Stored as ``post_count.posts``: the engine prefixes a metric's keys with its name."""

    def __init__(self, config, ctx):
        self.kinds = set((config or CountConfig()).kinds)

    async def measure(self, view):
        return {"posts": sum(1 for a in view.actions if a["kind"] in self.kinds)}

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


@hookimpl
def townsquare_register_policies():
    return [PolicySpec("loudmouth", Loudmouth, config_model=LoudConfig)]


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("post_count", PostCount, config_model=CountConfig)]
