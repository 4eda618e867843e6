"""Dialogue on the social platform: a conversation as a reply thread between two agents.

On a social platform two agents do not act at the same moment, and a policy may only return
its own agent's actions, so a conversation crosses rounds: each agent speaks in its own step,
from its own memories, with :class:`.conversation.Dialogue`'s prompts and end rules. The
in-memory platform has no direct messages (it offers posts, comments, likes, reblogs,
follows), so the turns are comments, each replying to the partner's previous one; a platform
with direct messages could carry the same turns unchanged.

A policy keeps one :class:`ReplyThreads` per agent (in its state) and calls:

* ``await threads.start(ctx, post)`` for a post by someone else: the labelled initiation
  decision, and if yes the first turn as a comment on the post;
* ``await threads.answer(ctx, posts)`` with the posts it read (its feed): every comment that
  answers one of the agent's turns, or that comments on one of its posts (someone starting a
  conversation with it), gets the next turn as a reply;
* ``await threads.on_applied(ctx, applied)`` from its own ``on_applied``: the platform's ids
  of the turns it wrote, so the partner's replies can be recognised.

A conversation ends as in :class:`.conversation.Conversation` (the speaker says so, a
repeated line, ``max_turns`` turns in all), and also when the partner has not answered for
``idle_rounds`` rounds: the platform carries no "over" flag, so a partner who said goodbye
simply stops. Each side then remembers the conversation as a ``chat`` record. Late replies to a
finished conversation are ignored.
"""

from __future__ import annotations

from typing import Any, Sequence

import structlog

from townsquare.api import Action, ActionResult, PostView, StepContext

from .conversation import ConversationConfig, Dialogue, Transcript, Turn, is_repeat, take_turn

log = structlog.get_logger("townsquare.plugins.generative_agents.reply_threads")

#: how many comment ids of finished conversations are kept to ignore late replies
KEEP_CLOSED = 500


class ReplyThreads:
    """One agent's conversations on a social platform (see the module docstring)."""

    def __init__(self, config: ConversationConfig | None = None, dialogue: Dialogue | None = None):
        self.config = config or ConversationConfig()
        self.dialogue = dialogue or Dialogue(self.config)
        self.threads: dict[str, dict[str, Any]] = {}
        self.closed_ids: list[str] = []  # the comments of finished conversations (late replies are ignored)
        self._closed: set[str] = set()
        self.finished = 0

    # ------------------------------------------------------------------ opening

    async def start(self, ctx: StepContext, post: PostView, observation: str | None = None) -> list[Action]:
        """Maybe start a conversation with the author of ``post`` (one yes/no decision)."""
        me = ctx.agent.id
        if post.author_id == me or post.id in self.threads or any(t["partner"] == post.author_id for t in self.threads.values()):
            return []
        other = await self._name(ctx, post.author_id)
        if not await self.dialogue.should_initiate(ctx, other, observation or f"{other} posted: {post.text[:300]}"):
            return []
        thread = {"partner": post.author_id, "name": other, "mine": [], "theirs": [], "round": ctx.round,
                  "transcript": Transcript(me, post.author_id, post.text[:300])}
        return await self._speak(ctx, post.id, thread, post.id)

    # ------------------------------------------------------------------ answering

    async def answer(self, ctx: StepContext, posts: Sequence[PostView]) -> list[Action]:
        """Replies to the comments in ``posts`` that continue or open a conversation with this agent."""
        await self._close_idle(ctx)
        actions: list[Action] = []
        for post in posts:
            if post.reply_to is None or post.author_id == ctx.agent.id or {post.id, post.reply_to} & self._closed:
                continue
            key = next((k for k, t in self.threads.items() if post.reply_to in t["mine"]), None)
            if key is None:
                key = await self._opened_by_other(ctx, post)
                if key is None:
                    continue
            thread = self.threads[key]
            if post.id in thread["theirs"]:
                continue
            transcript: Transcript = thread["transcript"]
            thread["theirs"].append(post.id)
            if is_repeat(post.text, transcript.turns):
                await self._close(ctx, key, "repeat")
                continue
            transcript.turns.append(Turn(post.author_id, thread["name"], post.text))
            if len(transcript.turns) >= self.config.max_turns:
                await self._close(ctx, key, "cap")
                continue
            actions += await self._speak(ctx, key, thread, post.id)
        return actions

    async def _opened_by_other(self, ctx: StepContext, post: PostView) -> str | None:
        """A comment on one of this agent's own posts opens a conversation with its author."""
        if post.id in self.threads or any(t["partner"] == post.author_id for t in self.threads.values()):
            return None
        mine = await ctx.platform.get_post(post.reply_to) if post.reply_to else None
        if mine is None or mine.author_id != ctx.agent.id:
            return None
        self.threads[post.id] = {"partner": post.author_id, "name": await self._name(ctx, post.author_id), "mine": [],
                                 "theirs": [], "round": ctx.round, "transcript": Transcript(post.author_id, ctx.agent.id, mine.text[:300])}
        return post.id

    async def _speak(self, ctx: StepContext, key: str, thread: dict[str, Any], reply_to: str) -> list[Action]:
        transcript: Transcript = thread["transcript"]
        turn = await take_turn(self.dialogue, ctx, thread["name"], transcript, self.config.max_turns)
        self.threads[key] = thread
        if turn is None:
            await self._close(ctx, key, transcript.ended or "no_answer")
            return []
        thread["round"] = ctx.round
        action = Action(ctx.agent.id, "comment", target_post=reply_to, text=turn.text,
                        detail={"dialogue": key, "turn": len(transcript.turns), "with": thread["partner"]})
        if transcript.ended is not None:  # my last word: the conversation is over for me once it is sent
            thread["closing"] = True
        return [action]

    # ------------------------------------------------------------------ results and endings

    async def on_applied(self, ctx: StepContext, applied: Sequence[tuple[Action, ActionResult]]) -> None:
        """Learn the ids of the turns just written (call it from the policy's ``on_applied``)."""
        for action, result in applied:
            key = action.detail.get("dialogue") if action.kind == "comment" else None
            thread = self.threads.get(key) if key else None
            if thread is None:
                continue
            if result.ok and result.created_id:
                thread["mine"].append(result.created_id)
            if not result.ok:
                await self._close(ctx, key, "no_answer")
            elif thread.get("closing"):
                await self._close(ctx, key, thread["transcript"].ended)

    async def _close_idle(self, ctx: StepContext) -> None:
        for key, thread in list(self.threads.items()):
            if ctx.round - thread["round"] > self.config.idle_rounds:
                await self._close(ctx, key, "idle")

    async def _close(self, ctx: StepContext, key: str, reason: str | None) -> None:
        thread = self.threads.pop(key)
        transcript: Transcript = thread["transcript"]
        transcript.ended = transcript.ended or reason
        await self.dialogue.remember(ctx, thread["partner"], thread["name"], transcript)
        self.closed_ids = (self.closed_ids + thread["mine"] + thread["theirs"])[-KEEP_CLOSED:]
        self._closed = set(self.closed_ids)
        self.finished += 1
        log.debug("dialogue.thread_ended", agent=ctx.agent.id, partner=thread["partner"], turns=len(transcript.turns), ended=transcript.ended)

    async def _name(self, ctx: StepContext, agent_id: str) -> str:
        profile = await ctx.platform.profile(agent_id)
        return profile.display_name if profile is not None and profile.display_name else agent_id

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {
            "threads": {k: {**t, "transcript": t["transcript"].to_dict()} for k, t in self.threads.items()},
            "closed_ids": list(self.closed_ids), "finished": self.finished, "dialogue": self.dialogue.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.threads = {k: {**t, "mine": list(t["mine"]), "theirs": list(t["theirs"]), "transcript": Transcript.from_dict(t["transcript"])}
                        for k, t in state.get("threads", {}).items()}
        self.closed_ids = list(state.get("closed_ids", []))
        self._closed = set(self.closed_ids)
        self.finished = int(state.get("finished", 0))
        self.dialogue.set_state(state.get("dialogue", {}))
