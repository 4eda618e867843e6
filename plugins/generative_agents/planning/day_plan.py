"""Park et al.'s planning and reacting (§4.3): slot ``planner``, component ``day_plan``.

Each simulated day, the first time the engine asks about the agent:

1. the agent's summary description is read (:func:`.agent_summary.summary_description`: the
   ``persona.context`` component, Park's ``agent_summary``, writes it from memory and revises
   the agent's status each new day from what it remembers; with the slot empty, the seed alone);
2. the model writes the day in broad strokes, 5 to 8 items (``fewest_strokes``,
   ``most_strokes``), from the summary and yesterday's plan (§4.3: "the agent's summary
   description ... and a summary of their previous day"), as JSON of
   :func:`.schedule.plan_schema`. Too few items get one repair request (the JSON client's);
   too many are cut to ``most_strokes``; still too few, the agent gets :data:`FALLBACK_DAY`.
3. the strokes are decomposed into an hourly schedule (one call, :data:`.schedule.SCHEDULE_SCHEMA`),
   and each hour chunk, when the clock reaches it, into actions of 5 to 15 minutes
   (``shortest_action``, ``longest_action``; :func:`.schedule.actions_schema`) whose durations
   sum to the chunk's length (:func:`.schedule.fit_durations` repairs the model's durations).

Plans are remembered as memory records of kind ``plan`` (the day's strokes and every
reaction) through :func:`townsquare.api.agent_memory`, so any memory design stores them and the
planner works, unremembered, with none. Every answer that had to be repaired or replaced is
recorded as a ``parse_failure`` in ``llm_calls``.

Activity. :meth:`DayPlanner.is_active` answers from the plan: with ``active_when = "online"``
(default) the agent is active in a round when an action planned in the round's span
``[now, now + minutes_per_round)``, or the hour chunk it belongs to, mentions being online
(``online_words``: social media, phone, browsing...); with ``"awake"`` when any action is planned
in it (the hours outside the schedule are sleep). To make online time part of the day at all,
the day-plan prompt says that the agent has an account on a social network (``platform_note``;
our addition, the paper's agents live in a town; set it to "" to leave it out).
:meth:`current_action` and :meth:`status` expose what the agent is doing.

Reacting (§4.3.1). A policy calls ``await planner.react(ctx, observation)`` for each
observation: the memory is asked about the observation (and, with ``about``, about the agent's
relationship with that person, the paper's two queries), the model condenses it into a context
summary, and one labelled yes/no decision says whether the agent reacts. If it does, the model
says how, and the rest of the day is re-planned from now with the reaction first.

Conversations (§4.3.2; the reference code's ``_create_react``, done for both speakers): a
finished conversation enters each side's schedule through :meth:`DayPlanner.insert`, an action
from now that lasts as long as the conversation took (the steps it overlaps are cut short). When
the conversation left the agent a note for planning (its conversation memory's planning thought,
:mod:`..dialogue.conversation_memory`: something settled, such as a party today at 5 pm), the
model writes the rest of the day again from the end of the conversation, given that note and the
schedule so far (:meth:`DayPlanner.after_conversation`, prompt ``conversation``; one call). The
reference code rewrites the hours around every chat (``generate_new_decomp_schedule``); we rewrite
only after a conversation that settled something, and to the end of the day, so that news heard
after the morning's planning can still change the evening (``replan_after_conversation``).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, model_validator

from townsquare.api import MemoryRecord, Message, PlannerSpec, StepContext, hookimpl

from ..prompt_files import fill, load_prompts
from .agent_summary import long_date as _long_date
from .agent_summary import memory_of, statements, summary_description
from .schedule import (MINUTES_PER_DAY, SCHEDULE_SCHEMA, Chunk, Step, Stroke, actions_schema, chunks_from_strokes,
                       chunks_from_times, chunks_text, clock_text, fit_durations, minutes_of, plan_schema, read_actions,
                       read_schedule, read_strokes, read_timed, steps_for, strokes_text)

log = structlog.get_logger("townsquare.plugins.generative_agents.day_plan")

#: prompt name -> placeholders the code fills in it
REQUIRED: dict[str, frozenset[str]] = {
    "day_plan": frozenset({"summary", "today", "fewest", "most"}),
    "hourly": frozenset({"summary", "strokes"}),
    "replan": frozenset({"summary", "now", "reaction"}),
    "conversation": frozenset({"summary", "now", "schedule", "other", "notes"}),
    "actions": frozenset({"chunk", "minutes", "lo", "hi"}),
    "context": frozenset({"statements", "observation"}),
    "react": frozenset({"summary", "observation", "context"}),
    "reaction": frozenset({"summary", "observation", "context"}),
}

#: The day an agent gets when the model's plan cannot be read even after a repair (our choice:
#: the paper has no fallback).
FALLBACK_DAY: tuple[str, ...] = (
    "wake up and get ready for the day at 7:00 am", "do the morning's work at 9:00 am", "have lunch at 12:00 pm",
    "do the afternoon's work at 1:00 pm", "have dinner at 6:00 pm", "read the news and social media online at 8:00 pm",
    "go to bed at 11:00 pm",
)

DEFAULT_ONLINE_WORDS: tuple[str, ...] = (
    "online", "internet", "social media", "social network", "phone", "computer", "laptop", "e-mail", "email",
    "browse", "browsing", "feed", "scroll", "post", "message", "chat", "blog", "forum", "news",
)


class DayPlanConfig(BaseModel):
    """``[plugins.day_plan]`` settings. The 5-8 strokes and 5-15 minute actions are §4.3's."""

    model_config = ConfigDict(extra="forbid")

    fewest_strokes: int = Field(5, ge=1)
    most_strokes: int = Field(8, ge=1)
    chunk_minutes: int = Field(60, ge=5, le=240)
    shortest_action: int = Field(5, ge=1)
    longest_action: int = Field(15, ge=1)
    active_when: Literal["online", "awake"] = "online"
    online_words: list[str] = Field(default_factory=lambda: list(DEFAULT_ONLINE_WORDS))
    platform_note: str = "{name} has an account on a social network and looks at it now and then."
    #: memories recalled per question (the observation's context); our choice
    recall_k: int = Field(10, gt=0)
    #: characters of memory text one prompt may hold, however long the run
    memory_chars: int = Field(1200, ge=100)
    #: condense the recalled context with one call, as the paper does; False lists the memories
    summarize_context: bool = True
    #: after a conversation that left a note for planning, write the rest of the day again
    #: (the reference code's _create_react rewrites the hours around every chat); False: the
    #: conversation only takes its time in the schedule
    replan_after_conversation: bool = True
    max_tokens: int = Field(400, gt=0)
    prompts_file: str | None = None

    @model_validator(mode="after")
    def _ranges(self) -> "DayPlanConfig":
        if self.fewest_strokes > self.most_strokes:
            raise ValueError(f"fewest_strokes ({self.fewest_strokes}) is more than most_strokes ({self.most_strokes})")
        if self.shortest_action > self.longest_action:
            raise ValueError(f"shortest_action ({self.shortest_action}) is longer than longest_action ({self.longest_action})")
        if self.chunk_minutes < self.shortest_action:
            raise ValueError(f"chunk_minutes ({self.chunk_minutes}) is shorter than shortest_action ({self.shortest_action})")
        return self


def _minute_of(moment: datetime) -> int:
    return moment.hour * 60 + moment.minute


class DayPlanner:
    """The day plan of one agent (see the module docstring)."""

    def __init__(self, config: DayPlanConfig, prompts: dict[str, str]):
        self.config = config
        self.prompts = prompts
        self.day: date | None = None
        self.strokes: list[Stroke] = []
        self.chunks: list[Chunk] = []
        self.yesterday: tuple[str, str] | None = None  # (date, strokes text)
        self.source: str | None = None
        self.reactions: list[dict[str, str]] = []
        self.revisions: list[dict[str, str]] = []  # today's rewrites after conversations
        self.parse_failures = 0
        self._online = re.compile("|".join(rf"\b{re.escape(w)}" for w in config.online_words if w) or r"(?!)", re.I)

    # ------------------------------------------------------------------ the day

    async def describe(self, ctx: StepContext, query: str = "") -> str:
        """The agent's summary description (what the dialogue and policies put in their prompts)."""
        return await summary_description(ctx, query)

    async def ensure_day(self, ctx: StepContext) -> None:
        today = ctx.now.date()
        if self.day == today:
            return
        if self.day is not None and self.strokes:
            self.yesterday = (_long_date(self.day), strokes_text(self.strokes))
        name = ctx.agent.persona.name
        summary = await self.describe(ctx, f"{name}'s plan for {_long_date(today)}")
        self.strokes, self.source = await self._strokes(ctx, summary, today)
        self.chunks = await self._hourly(ctx, summary, today)
        self.day = today
        self.reactions = []
        self.revisions = []
        await self._remember(ctx, f"{name}'s plan for {_long_date(today)}: {strokes_text(self.strokes)}", "day")
        log.debug("plan.day", agent=ctx.agent.id, day=str(today), strokes=len(self.strokes), chunks=len(self.chunks), source=self.source)

    async def _strokes(self, ctx: StepContext, summary: str, today: date) -> tuple[list[Stroke], str]:
        cfg, llm, name = self.config, ctx.require_llm("day_plan"), ctx.agent.persona.name
        yesterday_date, yesterday = self.yesterday or (_long_date(today - timedelta(days=1)), "not recorded")
        note = fill(cfg.platform_note, name=name)
        prompt = fill(self.prompts["day_plan"], summary=f"{summary}\n{note}".strip(), name=name, today=_long_date(today),
                      yesterday_date=yesterday_date, yesterday=yesterday, fewest=cfg.fewest_strokes, most=cfg.most_strokes)

        def enough(value: Any) -> list[Stroke]:
            strokes = read_strokes(value)
            if len(strokes) < cfg.fewest_strokes:
                raise ValueError(f"{len(strokes)} items; write between {cfg.fewest_strokes} and {cfg.most_strokes}")
            return strokes

        strokes = await llm.json(prompt, plan_schema(cfg.fewest_strokes, cfg.most_strokes), purpose="plan.day", default=None,
                                 validate=enough, max_tokens=cfg.max_tokens)
        if strokes is None:
            self.parse_failures += 1
            return [Stroke(text, minutes_of(text)) for text in FALLBACK_DAY][: cfg.most_strokes], "fallback"
        if len(strokes) > cfg.most_strokes:
            self._failed(ctx, "plan.day", strokes_text(strokes), f"{len(strokes)} strokes cut to {cfg.most_strokes}")
            return strokes[: cfg.most_strokes], "cut"
        return strokes, "llm"

    def _wake(self) -> int:
        return next((s.minute for s in self.strokes if s.minute is not None), 7 * 60)

    async def _hourly(self, ctx: StepContext, summary: str, today: date) -> list[Chunk]:
        cfg, llm = self.config, ctx.require_llm("day_plan")
        prompt = fill(self.prompts["hourly"], summary=summary, name=ctx.agent.persona.name, today=_long_date(today),
                      strokes=strokes_text(self.strokes), start=clock_text(self._wake()))

        def readable(value: Any) -> list[Chunk]:
            chunks = read_schedule(value, cfg.chunk_minutes, cfg.shortest_action)
            if not chunks:
                raise ValueError("no entry with a time and an activity")
            return chunks

        chunks = await llm.json(prompt, SCHEDULE_SCHEMA, purpose="plan.hourly", default=None, validate=readable,
                                max_tokens=cfg.max_tokens)
        if chunks is None:
            self.parse_failures += 1
            chunks = chunks_from_strokes(self.strokes, cfg.chunk_minutes, self._wake(), MINUTES_PER_DAY)
        return chunks

    async def _decompose(self, ctx: StepContext, chunk: Chunk) -> None:
        """Chunk -> actions of ``shortest_action``..``longest_action`` minutes (§4.3)."""
        cfg, llm = self.config, ctx.require_llm("day_plan")
        summary = await self.describe(ctx, chunk.text)
        prompt = fill(self.prompts["actions"], summary=summary, name=ctx.agent.persona.name, today=_long_date(ctx.now.date()),
                      start=clock_text(chunk.start), end=clock_text(chunk.end), minutes=chunk.minutes, chunk=chunk.text,
                      lo=cfg.shortest_action, hi=cfg.longest_action)
        actions = await llm.json(prompt, actions_schema(cfg.shortest_action, cfg.longest_action), purpose="plan.actions",
                                 default=[], validate=read_actions, max_tokens=cfg.max_tokens)
        fit = fit_durations(actions, chunk.minutes, cfg.shortest_action, cfg.longest_action, chunk.text)
        if fit.changes:
            self._failed(ctx, "plan.actions", "; ".join(f"{a} ({m} minutes)" for a, m in actions), "; ".join(fit.changes))
        chunk.steps = steps_for(chunk, fit)

    def _failed(self, ctx: StepContext, purpose: str, answer: str, problem: str) -> None:
        self.parse_failures += 1
        if ctx.llm is not None:
            ctx.llm.report_parse_failure(purpose, answer)
        log.info("plan.repaired", agent=ctx.agent.id, purpose=purpose, problem=problem[:200])

    async def _remember(self, ctx: StepContext, text: str, level: str) -> None:
        memory = memory_of(ctx.agent)
        if memory:
            await memory.remember(ctx, [MemoryRecord(text=text, kind="plan", created=ctx.now, last_access=ctx.now,
                                                     meta={"day": str(ctx.now.date()), "level": level})])

    # ------------------------------------------------------------------ now

    async def steps_between(self, ctx: StepContext, start: int, end: int) -> list[Step]:
        """Today's actions overlapping ``[start, end)`` (minutes), decomposing chunks as needed."""
        await self.ensure_day(ctx)
        found = []
        for chunk in self.chunks:
            if chunk.start < end and start < chunk.end:
                if chunk.steps is None:
                    await self._decompose(ctx, chunk)
                found += [s for s in chunk.steps or [] if s.start < end and start < s.end]
        return found

    async def current_action(self, ctx: StepContext) -> Step | None:
        """What the agent is doing at ``ctx.now`` (None: nothing planned, asleep)."""
        minute = _minute_of(ctx.now)
        steps = await self.steps_between(ctx, minute, minute + 1)
        return steps[0] if steps else None

    async def status(self, ctx: StepContext) -> str:
        """What the agent is doing now, as the dialogue and reaction prompts show it: the action
        alone, as the reference code's prompts show ``act_description`` (the minutes it was planned
        for are the plan's bookkeeping, not something the agent has to say)."""
        step = await self.current_action(ctx)
        name = ctx.agent.persona.name
        if step is None:
            return f"{name} is asleep"
        return f"{name} is busy with: {step.text}"

    async def is_active(self, ctx: StepContext) -> bool:
        minute = _minute_of(ctx.now)
        end = min(minute + ctx.minutes_per_round, MINUTES_PER_DAY)
        steps = await self.steps_between(ctx, minute, end)
        if self.config.active_when == "awake":
            return bool(steps)
        chunks = [c.text for c in self.chunks if c.start < end and minute < c.end]
        return any(self._online.search(text) for text in chunks + [s.text for s in steps])

    async def insert(self, ctx: StepContext, text: str, minutes: int) -> None:
        """Put an action that starts now and lasts ``minutes`` (a conversation) into today's
        schedule: the step under way ends now, the steps it overlaps are cut short or dropped,
        the rest of the day stays (the reference code's ``_create_react``; :meth:`after_conversation`
        may then write it again). Outside the schedule it becomes a chunk of its own."""
        await self.ensure_day(ctx)
        now = _minute_of(ctx.now)
        end = min(now + max(1, minutes), MINUTES_PER_DAY)
        inserted = Step(now, end - now, " ".join(text.split())[:200])
        chunk = next((c for c in self.chunks if c.start <= now < c.end), None)
        if chunk is None:
            self.chunks = sorted(self.chunks + [Chunk(now, end, inserted.text, [inserted])], key=lambda c: c.start)
            return
        if chunk.steps is None:
            await self._decompose(ctx, chunk)
        end = min(end, chunk.end)
        inserted.minutes = end - now
        kept: list[Step] = []
        for step in chunk.steps or []:
            if step.end <= now or step.start >= end:
                kept.append(step)
            else:
                if step.start < now:
                    kept.append(Step(step.start, now - step.start, step.text))
                if step.end > end:
                    kept.append(Step(end, step.end - end, step.text))
        chunk.steps = sorted(kept + [inserted], key=lambda s: s.start)

    def asleep(self, moment: datetime) -> bool | None:
        """Whether the plan has the agent asleep at ``moment`` (no action planned then), without
        planning anything; None when no plan is made for that day yet."""
        if self.day != moment.date():
            return None
        minute = _minute_of(moment)
        return not any(c.start <= minute < c.end for c in self.chunks)

    # ------------------------------------------------------------------ reacting

    async def react(self, ctx: StepContext, observation: str, about: str | None = None) -> bool:
        """Should the agent react to ``observation``? If so, re-plan the rest of the day from now
        with the reaction first (§4.3.1). ``about`` names the person observed, if any."""
        llm, name = ctx.require_llm("day_plan"), ctx.agent.persona.name
        await self.ensure_day(ctx)
        summary, status = await self.describe(ctx, observation), await self.status(ctx)
        context = await self.context(ctx, observation, about)
        fields = dict(summary=summary, name=name, now=f"{_long_date(ctx.now.date())}, {clock_text(_minute_of(ctx.now))}",
                      status=status, observation=observation, context=context)
        decision = await llm.choose(fill(self.prompts["react"], **fields), ["yes", "no"], purpose="react", default="no")
        if decision != "yes":
            return False
        reaction = " ".join((await llm.text(fill(self.prompts["reaction"], **fields), purpose="react.reaction", max_tokens=80)).split())
        reaction = reaction[:300] or f"respond to: {observation[:100]}"
        await self.replan(ctx, reaction)
        self.reactions.append({"at": ctx.now.isoformat(), "observation": observation[:300], "reaction": reaction})
        await self._remember(ctx, f"{name} reacted to \"{observation[:200]}\": {reaction}", "reaction")
        return True

    async def context(self, ctx: StepContext, observation: str, about: str | None = None) -> str:
        """What the agent remembers that bears on ``observation`` (the paper's context summary)."""
        memory, cfg, name = memory_of(ctx.agent), self.config, ctx.agent.persona.name
        records = []
        if memory:
            queries = [observation] + ([f"What is {name}'s relationship with {about}?"] if about else [])
            for query in queries:
                records += await memory.recall(ctx, query, cfg.recall_k)
        listed = statements(records, [], cfg.recall_k * 2, cfg.memory_chars)
        if not records or not cfg.summarize_context:
            return listed
        prompt = fill(self.prompts["context"], name=name, statements=listed, observation=observation)
        answer = await ctx.require_llm("day_plan").text(prompt, purpose="react.context", max_tokens=120)
        return " ".join(answer.split())[: cfg.memory_chars] or listed

    async def replan(self, ctx: StepContext, reaction: str) -> None:
        """Replace today's schedule from now on: the actions already done stay, the rest is
        written again by the model starting with ``reaction``."""
        await self._rewrite_rest(ctx, _minute_of(ctx.now), "replan", "plan.replan", reaction,
                                 summary=await self.describe(ctx, reaction), reaction=reaction)

    async def after_conversation(self, ctx: StepContext, other: str, notes: str, minutes: int) -> bool:
        """The rest of today written again after a conversation with ``other`` (a name) that
        left ``notes`` for planning and took ``minutes`` from now (already in the schedule,
        :meth:`insert`). True when the schedule changed; an unusable answer leaves it as it was."""
        if not self.config.replan_after_conversation or not notes.strip():
            return False
        await self.ensure_day(ctx)
        until = min(_minute_of(ctx.now) + max(1, minutes), MINUTES_PER_DAY)
        changed = await self._rewrite_rest(ctx, until, "conversation", "plan.conversation", None,
                                           summary=await self.describe(ctx, notes), other=other, notes=notes)
        if changed:
            self.revisions.append({"at": ctx.now.isoformat(), "with": other, "notes": notes[:300]})
        return changed

    def _kept_until(self, moment: int) -> tuple[list[Chunk], int]:
        """The chunks done by ``moment`` (minutes; the one under way ends with the last action
        begun before it) and the minute the rest of the day starts."""
        kept: list[Chunk] = []
        for chunk in self.chunks:
            if chunk.end <= moment:
                kept.append(chunk)
            elif chunk.start < moment:
                steps = [s for s in chunk.steps or [] if s.start < moment]
                if steps:
                    kept.append(Chunk(chunk.start, steps[-1].end, chunk.text, steps))
        return kept, (kept[-1].end if kept else moment)

    async def _rewrite_rest(self, ctx: StepContext, moment: int, prompt_name: str, purpose: str, first: str | None,
                            **values: str) -> bool:
        """Today's schedule from ``moment`` on, written again by the model with prompt
        ``prompt_name``. ``first``: what fills the time before the model's first entry (and the
        next hour when the answer is unusable); None: the old schedule's, and an unusable answer
        changes nothing. True when the schedule changed."""
        cfg, llm, name = self.config, ctx.require_llm("day_plan"), ctx.agent.persona.name
        kept, resume = self._kept_until(moment)
        prompt = fill(self.prompts[prompt_name], name=name, today=_long_date(ctx.now.date()), now=clock_text(resume),
                      schedule=chunks_text(self.chunks), **values)
        timed = await llm.json(prompt, SCHEDULE_SCHEMA, purpose=purpose, default={}, validate=read_timed,
                               max_tokens=cfg.max_tokens)
        fresh = [c for c in chunks_from_times(timed, cfg.chunk_minutes, cfg.shortest_action) if c.start >= resume]
        old = next((c.text for c in self.chunks if c.start <= resume < c.end), None)
        if not fresh:
            self._failed(ctx, purpose, str(timed), "no timed entries from now on")
            if first is None:
                return False
            rest = [c for c in self.chunks if c.start >= resume + cfg.chunk_minutes]
            fresh = [Chunk(resume, min(resume + cfg.chunk_minutes, MINUTES_PER_DAY), first)] + [
                Chunk(c.start, c.end, c.text) for c in rest]
        elif fresh[0].start > resume and (first or old):  # the time up to the model's first entry
            gap = Chunk(resume, fresh[0].start, first or old or "")
            fresh = ([gap] if gap.minutes >= cfg.shortest_action else []) + fresh
        self.chunks = kept + [c for c in fresh if c.minutes >= cfg.shortest_action]
        log.debug("plan.rewritten", agent=ctx.agent.id, purpose=purpose, at=clock_text(resume), chunks=len(self.chunks))
        return True

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {
            "day": self.day.isoformat() if self.day else None,
            "strokes": [{"text": s.text, "minute": s.minute} for s in self.strokes],
            "chunks": [c.to_dict() for c in self.chunks],
            "yesterday": list(self.yesterday) if self.yesterday else None,
            "source": self.source,
            "reactions": [dict(r) for r in self.reactions],
            "revisions": [dict(r) for r in self.revisions],
            "parse_failures": self.parse_failures,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.day = date.fromisoformat(state["day"]) if state.get("day") else None
        self.strokes = [Stroke(str(s["text"]), s.get("minute")) for s in state.get("strokes", [])]
        self.chunks = [Chunk.from_dict(c) for c in state.get("chunks", [])]
        self.yesterday = tuple(state["yesterday"]) if state.get("yesterday") else None  # type: ignore[assignment]
        self.source = state.get("source")
        self.reactions = [dict(r) for r in state.get("reactions", [])]
        self.revisions = [dict(r) for r in state.get("revisions", [])]
        self.parse_failures = int(state.get("parse_failures", 0))


def build_day_plan(config: DayPlanConfig | None, ctx: Any) -> DayPlanner:
    config = config or DayPlanConfig()
    return DayPlanner(config, load_prompts("planning", REQUIRED, config.prompts_file, getattr(ctx, "base_dir", ".")))


@hookimpl
def townsquare_register_planners():
    return [
        PlannerSpec(
            "day_plan", build_day_plan, config_model=DayPlanConfig, priority=50, needs_llm=True,
            description="Park et al.: a day plan in broad strokes, decomposed to hours and 5-15 minute actions; reacts to observations",
        )
    ]
