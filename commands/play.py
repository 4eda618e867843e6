"""``townsquare run SCENARIO --play AGENT``: a person takes one agent's turns in the terminal.

The agent's policy is replaced, after the run is built, by :class:`HumanPolicy`: on each of the
agent's active turns it shows what the agent sees (its persona, the simulated time and its
home timeline as the recommender ranks it) and offers exactly the action kinds the platform
accepts of a social-media agent; the person's actions are applied like any policy's, in agent
order, and stored with ``detail.played = true``. The agent's other slots (planner, memory,
reflection) keep working as they would; the replaced policy's state is carried through, so the
run's checkpoints stay compatible. End of input (Ctrl-D, or the end of a script) ends each
remaining turn with ``done``.

A policy that makes its own decisions playable offers ``play(read, write)``, returning the
policy a person drives (RecAgent's policy hands each of its choices to the person: the activity,
the recommender's pages, watching, rating, chatting, broadcasting, on the ``recsys`` platform).
Any other policy is replaced by :class:`HumanPolicy`, which needs a social platform (one with a
home timeline) and offers its social actions.
"""

from __future__ import annotations

import sys

import click
from typing import Any, Callable

from townsquare.actions import Action
from townsquare.errors import UsageError
from townsquare.platform import platform_actions

#: what a person can do on a turn, in menu order, with its syntax
COMMANDS = {
    "like": "like N", "reblog": "reblog N", "comment": "comment N TEXT", "post": "post TEXT",
    "follow": "follow AGENT", "unfollow": "unfollow AGENT",
}


class HumanPolicy:
    """A policy answered by a person. ``read()`` returns a line or None at end of input;
    ``write(text)`` shows text."""

    def __init__(self, inner: Any, kinds: frozenset[str], read: Callable[[], str | None], write: Callable[[str], None],
                 feed_size: int = 10):
        self.inner = inner
        self.kinds = [k for k in COMMANDS if k in kinds]
        self.browse = "browse" in kinds
        self.read, self.write, self.feed_size = read, write, feed_size
        self.finished = False

    async def step(self, ctx: Any) -> list[Action]:
        agent = ctx.agent
        feed = await ctx.home_timeline(self.feed_size)
        self.write(f"\n=== round {ctx.round}, {ctx.now:%A %H:%M} — you are {agent.persona.name} ({agent.id}) ===")
        self.write(f"persona: {agent.persona.text}")
        for i, post in enumerate(feed, 1):
            reply = f" (reply to {post.reply_to})" if post.reply_to else ""
            self.write(f"[{i}] @{post.author_id}{reply}: {post.text}   ♥{post.likes} ⟲{post.reblogs} 💬{post.replies}")
        if not feed:
            self.write("(your feed is empty)")
        self.write("actions: " + " | ".join(COMMANDS[k] for k in self.kinds) + " | done")
        actions = [Action(agent.id, "browse", post_ids=tuple(p.id for p in feed), detail={"played": True})] if feed and self.browse else []
        while not self.finished:
            # read on the event loop's thread: the other agents wait for the person (their LLM
            # calls pause), and Ctrl-C at the prompt stops the run cleanly like anywhere else
            line = self.read()
            if line is None:
                self.finished = True  # end of input: the remaining turns end at once
                break
            line = line.strip()
            if not line:
                continue
            if line == "done":
                break
            action, problem = self.parse(agent.id, line, feed)
            if problem:
                self.write(f"  ? {problem}")
            else:
                actions.append(action)
                self.write(f"  ok: {action.kind}")
        return actions

    def parse(self, agent_id: str, line: str, feed: list[Any]) -> tuple[Action | None, str]:
        kind, _, rest = line.partition(" ")
        if kind not in self.kinds:
            return None, f"unknown action {kind!r}; choose: {', '.join(self.kinds)}, done"
        detail = {"played": True}
        if kind == "post":
            return (Action(agent_id, "post", text=rest.strip(), detail=detail), "") if rest.strip() else (None, "post TEXT")
        if kind in ("follow", "unfollow"):
            return (Action(agent_id, kind, target_agent=rest.strip(), detail=detail), "") if rest.strip() else (None, f"{kind} AGENT")
        number, _, text = rest.strip().partition(" ")
        if not number.isdigit() or not 1 <= int(number) <= len(feed):
            return None, f"{COMMANDS[kind]}: N is a post number from 1 to {len(feed)}"
        post = feed[int(number) - 1]
        if kind == "comment":
            if not text.strip():
                return None, COMMANDS[kind]
            return Action(agent_id, "comment", target_post=post.id, text=text.strip(), detail=detail), ""
        return Action(agent_id, kind, target_post=post.id, detail=detail), ""

    def get_state(self) -> dict[str, Any]:
        return self.inner.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.inner.set_state(state)


class PlayerSeat:
    """Seats a person in agent ``agent_id``'s policy once the world is built (the round loop's
    ``seat``): the run plays in this process, and the manifest says who played."""

    def __init__(self, agent_id: str, read: Callable[[], str | None] | None = None, write: Callable[[str], None] | None = None):
        self.agent_id = agent_id
        self.read = read or _read_stdin
        self.write = write or click.echo  # the terminal is the interface here

    def __call__(self, world: Any) -> None:
        agents = world.by_id
        if self.agent_id not in agents:
            raise UsageError(f"--play {self.agent_id}: no such agent (agents: {', '.join(list(agents)[:5])}...)")
        agent = agents[self.agent_id]
        policy = agent.components["policy"]
        seat = getattr(policy, "play", None)
        platform_name = world.scenario.platform.spec.name
        if callable(seat):
            played = seat(self.read, self.write)
        else:
            if not hasattr(world.platform, "home_timeline"):
                raise UsageError(f"--play: platform {platform_name!r} has no home timeline to show")
            played = HumanPolicy(policy, platform_actions(world.platform), self.read, self.write)
            if not played.kinds:
                raise UsageError(f"--play: the policy of {agent.id} cannot be played on platform {platform_name!r} "
                                 "(it offers no choices to a person and the platform takes none of the social actions)")
        world.run_dir.update_manifest(played_by=agent.id)  # a person's turns: not reproducible from the seed
        agent.components["policy"] = played


def _read_stdin() -> str | None:
    line = sys.stdin.readline()
    return line if line else None
