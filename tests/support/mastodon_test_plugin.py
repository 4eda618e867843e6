"""Test plugin for the Mastodon platform tests (loaded with ``-p mastodon_test_plugin``).

- Policy ``mastodon_chatty`` (no LLM): reads its feed and, by its agent's generator, likes,
  reblogs, comments, follows and unfollows, and posts; every kind of write the adapter sends.
- A kill switch inside the adapter's apply phase: ``MASTODON_KILL=ROUND:N:WHEN`` SIGKILLs the
  run at the N-th answered write of round ROUND, either ``after`` its journal row is committed
  or ``lost``: after the server answered but before the journal heard of it (the worst case
  for exactly-once). Inactive without the variable.
"""

from __future__ import annotations

import os
import signal

from townsquare import hookimpl
from townsquare.actions import Action
from townsquare.specs import PolicySpec


class Chatty:
    def __init__(self, config, ctx):
        self.followed: list[str] = []

    async def step(self, ctx) -> list[Action]:
        me, rng = ctx.agent.id, ctx.rng
        feed = await ctx.home_timeline(5)
        actions = [Action(me, "browse", post_ids=tuple(p.id for p in feed))] if feed else []
        for post in feed:
            if rng.random() < 0.5:
                actions.append(Action(me, "like", target_post=post.id))
            if rng.random() < 0.2:
                actions.append(Action(me, "reblog", target_post=post.id))
            if rng.random() < 0.25:
                actions.append(Action(me, "comment", target_post=post.id, text=f"{me} answers {post.id} in round {ctx.round}"))
            if post.author_id not in self.followed and rng.random() < 0.3:
                self.followed.append(post.author_id)
                actions.append(Action(me, "follow", target_agent=post.author_id))
        if self.followed and rng.random() < 0.1:
            actions.append(Action(me, "unfollow", target_agent=self.followed.pop(0)))
        if rng.random() < 0.6:
            sentence = ctx.agent.persona.sentences[int(rng.integers(len(ctx.agent.persona.sentences)))]
            actions.append(Action(me, "post", text=f"{sentence} (round {ctx.round})"))
        return actions

    def get_state(self):
        return {"followed": list(self.followed)}

    def set_state(self, state):
        self.followed = list(state["followed"])


@hookimpl
def townsquare_register_policies():
    return [PolicySpec("mastodon_chatty", Chatty, description="TEST ONLY: every kind of write, no LLM")]


def _install_kill_switch() -> None:
    spec = os.environ.get("MASTODON_KILL")
    if not spec:
        return
    kill_round, kill_at, when = spec.split(":")
    from townsquare.platforms.mastodon import journal as mastodon_journal

    original = mastodon_journal.Journal.done
    seen = {"n": 0}

    def done(self, round, position, *args, **kwargs):
        hit = False
        if round == int(kill_round):
            seen["n"] += 1
            hit = seen["n"] == int(kill_at)
        if hit and when == "lost":
            os.kill(os.getpid(), signal.SIGKILL)
        original(self, round, position, *args, **kwargs)
        if hit:
            os.kill(os.getpid(), signal.SIGKILL)

    mastodon_journal.Journal.done = done


@hookimpl
def townsquare_on_run_start(run):
    _install_kill_switch()
