"""Zhou et al.'s reflection module (§3.1.5, appendix tables 12-14): slot ``reflector``,
component ``follow_reflection``.

"Every time the simulation time increases by two days, the agent reflects on the users to
follow based on its history action information including likes, reblogs, and comments."

* Cadence (``interval_hours``, 48): on the simulated clock (``ctx.now``). The first
  reflection comes ``interval_hours`` after the agent's first round (its presence starts
  then); each later one ``interval_hours`` after the previous one's due time. With one-hour
  rounds from round 0 that is rounds 48, 96, 144, ...
* History: the posts the agent liked, reblogged or commented on since the previous reflection
  (from ``memory.short_term``'s :meth:`engaged_posts`; actions of the reflection's own round
  are applied after it and count for the next one), the latest ``max_posts`` of them (the paper
  does not bound it; prompts must stay bounded).
* Summaries (table 14): each post is summarised in at most ``summary_words`` (50) words, once:
  the summary is kept per post id in the state. An answer over the limit is cut to it.
* Splicing (table 13): "Post k was written by user uid. What it says: summary. What you did:
  action." per post, in order.
* Decision (table 12): a label decision (declared in ``prompts/actions.toml``,
  ``[answers.follow]``) over the history's authors (never the agent itself, never an account
  it already follows) + ``do not follow``, asked through ``LLMClient.ask``: constrained where
  the backend can, else one repair request, then ``do not follow``. A chosen id becomes
  ``Action("follow", target_agent=id)`` (its detail records how it was decided: ``mode`` and,
  where the backend scored the labels, the probability ``p``). With no candidate there is no
  call.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import Action, AnswerFormat, ReflectorSpec, hookimpl

from ..actions.action_prompts import action_answers, action_prompts, fill
from ..memory.short_term_needs import EngagementLog
from ..persona.persona_access import persona_text

log = structlog.get_logger("townsquare.plugins.social_agent.reflection.follow_reflection")

DO_NOT_FOLLOW = "do not follow"
#: how each action reads in the history (table 13's "your action on this post")
ACTION_WORDS = {"like": "liked it", "reblog": "forwarded it", "comment": "commented"}


class FollowReflectionConfig(BaseModel):
    """``[plugins.follow_reflection]`` settings."""

    model_config = ConfigDict(extra="forbid")

    interval_hours: float = Field(48.0, gt=0, description="simulated hours between reflections (Zhou: two days)")
    max_posts: int = Field(20, gt=0, description="most recent engaged posts spliced into the prompt")
    summary_words: int = Field(50, gt=0, description="longest post summary in words (Zhou table 14: 50)")
    summary_max_tokens: int = Field(100, gt=0)
    prompts_file: str | None = None


def describe_actions(actions: list[tuple[str, str | None]]) -> str:
    parts = []
    for kind, comment in actions:
        if kind == "comment" and comment:
            parts.append(f'commented "{comment}"')
        else:
            parts.append(ACTION_WORDS.get(kind, kind))
    return ", ".join(dict.fromkeys(parts))


def cut_words(text: str, limit: int) -> str:
    words = text.split()
    return " ".join(words[:limit])


class FollowReflection:
    def __init__(self, config: FollowReflectionConfig, prompts: dict[str, str], answers: dict[str, AnswerFormat] | None = None):
        self.config = config
        self.prompts = prompts
        #: the structured purpose it asks (the slot table shows its mode)
        self.answers = {"follow": (answers or action_answers(None))["follow"]}
        self.next_due: datetime | None = None
        self.since_round: int = 0
        self.summaries: dict[str, str] = {}
        self.reflections = 0

    @property
    def interval(self) -> timedelta:
        return timedelta(hours=self.config.interval_hours)

    def due(self, ctx: Any) -> bool:
        """Start the clock on the first call; True once per interval after that."""
        if self.next_due is None:
            self.next_due = ctx.now + self.interval
            self.since_round = ctx.round
            return False
        if ctx.now < self.next_due:
            return False
        while self.next_due <= ctx.now:
            self.next_due += self.interval
        return True

    async def summary(self, llm: Any, post: dict[str, Any]) -> str:
        cached = self.summaries.get(post["post_id"])
        if cached is None:
            answer = await llm.text(fill(self.prompts["summary"], post=post["text"]), purpose="summary",
                                    max_tokens=self.config.summary_max_tokens)
            cached = cut_words(answer.strip(), self.config.summary_words) or cut_words(post["text"], self.config.summary_words)
            self.summaries[post["post_id"]] = cached
        return cached

    async def reflect(self, ctx: Any) -> list[Action]:
        if not self.due(ctx):
            return []
        since, self.since_round = self.since_round, ctx.round
        self.reflections += 1
        memory = ctx.agent.components.get("memory.short_term")
        if memory is None or not hasattr(memory, "engaged_posts"):
            log.debug("reflection.no_memory", agent=ctx.agent.id)
            return []
        history = memory.engaged_posts(since)[-self.config.max_posts:]
        me = ctx.agent.id
        followed = set(await ctx.platform.following(me))
        candidates = list(dict.fromkeys(p["author_id"] for p in history if p["author_id"] and p["author_id"] != me and p["author_id"] not in followed))
        if not candidates:
            ctx.record_reflection("follow_reflection", "follow")  # nobody to choose from: it produced nothing
            return []
        llm = ctx.require_llm("follow_reflection")
        summaries = await asyncio.gather(*(self.summary(llm, post) for post in history))
        lines = [
            fill(self.prompts["history_item"], k=k, uid=post["author_id"], summary=summary.rstrip(".") + ".",
                 action=describe_actions(post["actions"]))
            for k, (post, summary) in enumerate(zip(history, summaries), start=1)
        ]
        history_text = "\n".join(lines)
        persona = await persona_text(ctx, history_text)
        prompt = fill(self.prompts["follow"], persona=persona, history=history_text, candidates=", ".join(candidates))
        declared = self.answers["follow"]
        answer = await llm.ask(prompt, declared.with_labels(candidates), max_tokens=16)
        log.debug("reflection.done", agent=me, choice=answer.value, candidates=len(candidates), posts=len(history))
        chosen = answer.value in candidates
        ctx.record_reflection("follow_reflection", "follow", answer.value if chosen else "", [answer.value] if chosen else [])
        if not chosen:
            return []
        detail = {"reflection": self.reflections, "posts": len(history), "mode": answer.mode}
        if answer.probabilities:
            detail["p"] = answer.probabilities.get(answer.value)
        return [Action(me, "follow", target_agent=answer.value, detail=detail)]

    def get_state(self) -> dict[str, Any]:
        return {
            "next_due": None if self.next_due is None else self.next_due.isoformat(),
            "since_round": self.since_round, "summaries": dict(self.summaries), "reflections": self.reflections,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        due = state.get("next_due")
        self.next_due = None if due is None else datetime.fromisoformat(due)
        self.since_round = int(state.get("since_round", 0))
        self.summaries = dict(state.get("summaries", {}))
        self.reflections = int(state.get("reflections", 0))


def build_follow_reflection(config: FollowReflectionConfig | None, ctx: Any) -> FollowReflection:
    config = config or FollowReflectionConfig()
    base_dir = getattr(ctx, "base_dir", ".") or "."
    return FollowReflection(config, action_prompts(config.prompts_file, base_dir), action_answers(config.prompts_file, base_dir))


@hookimpl
def townsquare_register_reflectors():
    return [
        ReflectorSpec(
            "follow_reflection", build_follow_reflection, config_model=FollowReflectionConfig, priority=100, needs_llm=True,
            requires={"memory.short_term": (EngagementLog,)},
            description="Zhou et al.: every two simulated days, follow one author of the posts engaged with (or nobody)",
        )
    ]
