"""Park et al.'s agent summary description (§4.3, appendix A): slot ``persona.context``,
component ``agent_summary``.

Park's prompts (planning, reacting, dialogue, where to go) begin with a short description of
the agent. This component writes it from what the agent remembers, once per simulated day:

* the seed's identity: name and age, innate traits, background (the reference code's
  "identity stable set": ``innate``, ``learned``, ``lifestyle``, ``daily_plan_req``);
* three paragraphs, each answering one question from the ``recall_k`` records the agent's memory
  ranks best for it (appendix A): its core characteristics, its current daily occupation, its
  feeling about its recent progress in life;
* today's **status**. On the first day it is the seed's ``currently``. On each later day it is
  revised from memory, as the reference code's ``revise_identity`` does before it plans a new
  day (the paper: the plan is made from "a summary of their recent experiences"): the memory is
  asked for "<name>'s plan for <today>" and "important recent events for <name>'s life" (the
  reference's two focal points), and from those statements, each with the time it was
  remembered, the model writes (1) what the agent should remember as it plans today, with the
  date, time and place of anything scheduled, (2) how the agent feels about its days, and (3)
  today's status from yesterday's status and those two notes.

This is the pathway by which what an agent heard yesterday reaches today's plan:
``-p no:agent_summary`` leaves the slot empty and every prompt describes the agent from its seed
alone (:func:`seed_description`), so nothing remembered reaches a plan.

Calls: three a day (the paragraphs), three more from the second day (the status). Every prompt
built from memory is bounded (``recall_k`` records, ``memory_chars`` characters for a paragraph;
``status_recall_k`` (30, the reference code's) per focal point and ``status_chars`` for the
status; a record that does not fit is skipped, the next ones still tried). Whether a memory
reaches the status is retrieval's decision (recency, importance, relevance to the focal point):
an invitation rated below the day's routine can still be missed, as in the paper's design. :func:`summary_description` is what the
planner, the dialogue and the town policy call: the slot's component when it is filled (any
``persona.context`` component serves), else the seed description.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import Agent, Memory, MemoryChain, PersonaComponentSpec, StepContext, agent_memory, hookimpl

from ..prompt_files import fill, prompts_for
from .schedule import clock_text

log = structlog.get_logger("townsquare.plugins.generative_agents.agent_summary")

#: (what is asked of the memory, the aspect named in the prompt); Park et al., appendix A
ASPECTS: tuple[tuple[str, str], ...] = (
    ("{name}'s core characteristics", "core characteristics"),
    ("{name}'s current daily occupation", "current daily occupation"),
    ("{name}'s feeling about their recent progress in life", "feeling about their recent progress in life"),
)
#: the reference code's focal points for a new day's status (``revise_identity``)
FOCAL_POINTS: tuple[str, ...] = ("{name}'s plan for {today}.", "Important recent events for {name}'s life.")

REQUIRED: dict[str, frozenset[str]] = {
    "aspect": frozenset({"name", "aspect", "statements"}),
    "plan_note": frozenset({"name", "statements", "today"}),
    "feelings": frozenset({"name", "statements"}),
    "status": frozenset({"name", "yesterday_status", "plan_note", "feelings", "today"}),
}
#: persona fields shown under their own heading, in this order (the identity stable set)
SEED_HEADINGS: tuple[tuple[str, str], ...] = (
    ("innate", "Innate traits"), ("learned", "Background"), ("currently", "Status"), ("lifestyle", "Lifestyle"),
    ("daily_plan_req", "Daily plan requirement"),
)


def long_date(day: date) -> str:
    """``Tuesday February 14, 2023`` (the date as every Park prompt writes it)."""
    return f"{day:%A %B} {day.day}, {day.year}"


def memory_of(agent: Agent) -> MemoryChain:
    """The agent's memory tiers that implement the whole :class:`townsquare.api.Memory`
    protocol (a component that fills a memory slot for another purpose, such as an older
    action log without ``recall``, is left out rather than failing mid-run)."""
    return MemoryChain([(slot, tier) for slot, tier in agent_memory(agent).tiers if isinstance(tier, Memory)])


def statements(records: list[Any], fallback: list[str], k: int, budget: int, dated: bool = False) -> str:
    """Numbered memory texts (at most ``k``, at most ``budget`` characters in all), or the
    ``fallback`` sentences when there are none: every prompt built from memory stays bounded.
    A text that does not fit what is left is skipped and the next ones still tried. ``dated``:
    each line starts with the time the record was made (``Monday February 13, 10:00 am: ...``)."""
    texts = [(_when(r) if dated else "") + r.text.strip() for r in records] or [str(s).strip() for s in fallback]
    lines, used = [], 0
    for text in texts:
        if len(lines) == k:
            break
        line = f"{len(lines) + 1}. {' '.join(text.split())}"
        if used + len(line) + 1 > budget:
            continue
        lines.append(line)
        used += len(line) + 1
    if not lines and texts:
        lines.append(f"1. {' '.join(texts[0].split())}"[:budget])
    return "\n".join(lines) if lines else "(nothing remembered)"


def _when(record: Any) -> str:
    created = getattr(record, "created", None)
    if not isinstance(created, datetime):
        return ""
    return f"{created:%A %B} {created.day}, {clock_text(created.hour * 60 + created.minute)}: "


def _head(persona: Any) -> str:
    age = persona.fields.get("age")
    return f"Name: {persona.name}" + (f" (age: {age})" if age not in (None, "") else "")


def seed_description(persona: Any, status: str | None = None) -> str:
    """The agent described from its seed alone: name and age, then each seed field under its
    heading (``status`` replacing ``currently``), then the persona's other sentences. A persona
    without those fields (a JSON Lines persona) shows its sentences."""
    fields = persona.fields
    lines, shown = [_head(persona)], set()
    for key, heading in SEED_HEADINGS:
        value = status if key == "currently" and status else fields.get(key)
        if isinstance(value, str) and value.strip():
            lines.append(f"{heading}: {' '.join(value.split())}")
            shown.add(" ".join(str(fields.get(key) or "").split()))
    for sentence in persona.sentences[1:] if "innate" in fields else persona.sentences:
        if " ".join(str(sentence).split()) not in shown:
            lines.append(" ".join(str(sentence).split()))
    return "\n".join(lines)


async def summary_description(ctx: StepContext, query: str = "") -> str:
    """The description a Park prompt starts with: the agent's ``persona.context`` component's
    (``agent_summary``, or any other) when the slot is filled, else :func:`seed_description`."""
    context = ctx.agent.components.get("persona.context")
    if context is not None:
        return await context.render(ctx, query)
    return seed_description(ctx.agent.persona)


class AgentSummaryConfig(BaseModel):
    """``[plugins.agent_summary]`` settings."""

    model_config = ConfigDict(extra="forbid")

    #: memories recalled per question (each paragraph, each focal point); our choice
    recall_k: int = Field(10, gt=0)
    #: characters of memory text one prompt may hold, however long the run
    memory_chars: int = Field(1200, ge=100)
    max_tokens: int = Field(150, gt=0)
    #: revise the status each new day from memory (the reference code's revise_identity)
    revise_status: bool = True
    #: memories recalled per focal point for the status (the reference code's new_retrieve: 30)
    status_recall_k: int = Field(30, gt=0)
    #: characters of the statements the status prompts show
    status_chars: int = Field(6000, ge=100)
    #: characters of the status kept
    status_kept_chars: int = Field(600, ge=50)
    prompts_file: str | None = None


class AgentSummary:
    """The summary description of one agent; refreshed on the first call of each simulated day."""

    def __init__(self, config: AgentSummaryConfig | None = None, prompts: dict[str, str] | None = None):
        self.config = config or AgentSummaryConfig()
        self.prompts = prompts or {}
        self.day: date | None = None
        self.parts: list[str] = []
        self.status: str | None = None
        self.plan_note: str = ""
        self.refreshes = 0

    async def render(self, ctx: StepContext, query: str = "") -> str:
        """The summary for ``ctx.now``'s day (the ``persona.context`` protocol; the summary is the
        same whatever the query)."""
        today = ctx.now.date()
        if self.day != today:
            await self._refresh(ctx, today)
        return self.text(ctx)

    describe = render

    def text(self, ctx: StepContext) -> str:
        persona = ctx.agent.persona
        seed = seed_description(persona, self.status).split("\n")
        identity = [line for line in seed if line.startswith(("Name:", "Innate traits:"))]
        rest = [line for line in seed if line not in identity]
        return "\n".join([*identity, *self.parts, *rest])

    async def _refresh(self, ctx: StepContext, today: date) -> None:
        cfg, llm = self.config, ctx.require_llm("agent_summary")
        memory, name = memory_of(ctx.agent), ctx.agent.persona.name
        seed_status = str(ctx.agent.persona.fields.get("currently") or "").strip()
        if self.status is None or not cfg.revise_status or not memory:
            self.status = self.status or seed_status
        else:
            await self._revise(ctx, llm, memory, today)
        parts = []
        for query, aspect in ASPECTS:
            question = fill(query, name=name)
            records = await memory.recall(ctx, question, cfg.recall_k) if memory else []
            prompt = fill(self.prompts["aspect"], name=name, aspect=aspect,
                          statements=statements(records, ctx.agent.persona.sentences, cfg.recall_k, cfg.memory_chars))
            answer = await llm.text(prompt, purpose="summary", max_tokens=cfg.max_tokens)
            parts.append(" ".join(answer.split())[: cfg.memory_chars // 2] or f"{name}'s {aspect} are not known.")
        self.parts = parts
        self.day = today
        self.refreshes += 1
        log.debug("summary.refreshed", agent=ctx.agent.id, day=str(today))

    async def _revise(self, ctx: StepContext, llm: Any, memory: Any, today: date) -> None:
        """Today's status from memory (the reference code's ``revise_identity``)."""
        cfg, name = self.config, ctx.agent.persona.name
        found: list[Any] = []
        for point in FOCAL_POINTS:
            for record in await memory.recall(ctx, fill(point, name=name, today=long_date(today)), cfg.status_recall_k):
                if all(record is not seen for seen in found):
                    found.append(record)
        listed = statements(found, [], len(found), cfg.status_chars, dated=True)
        values = dict(name=name, statements=listed, today=long_date(today))
        note = " ".join((await llm.text(fill(self.prompts["plan_note"], **values), purpose="summary.plan_note",
                                        max_tokens=cfg.max_tokens)).split())
        feelings = " ".join((await llm.text(fill(self.prompts["feelings"], **values), purpose="summary.feelings",
                                            max_tokens=cfg.max_tokens)).split())
        prompt = fill(self.prompts["status"], name=name, today=long_date(today), yesterday_status=self.status or "(none)",
                      plan_note=note or "(nothing)", feelings=feelings or "(nothing)")
        status = " ".join((await llm.text(prompt, purpose="summary.status", max_tokens=cfg.max_tokens)).split())
        self.plan_note = note[: cfg.status_kept_chars]
        self.status = (status.removeprefix("Status:").strip() or self.status or "")[: cfg.status_kept_chars]

    def get_state(self) -> dict[str, Any]:
        return {"day": self.day.isoformat() if self.day else None, "parts": list(self.parts), "status": self.status,
                "plan_note": self.plan_note, "refreshes": self.refreshes}

    def set_state(self, state: dict[str, Any]) -> None:
        self.day = date.fromisoformat(state["day"]) if state.get("day") else None
        self.parts = [str(p) for p in state.get("parts", [])]
        self.status = state.get("status")
        self.plan_note = str(state.get("plan_note") or "")
        self.refreshes = int(state.get("refreshes", 0))


def build_agent_summary(config: AgentSummaryConfig | None, ctx: Any) -> AgentSummary:
    config = config or AgentSummaryConfig()
    return AgentSummary(config, prompts_for("summary", REQUIRED, config, ctx))


@hookimpl
def townsquare_register_persona_components():
    return [
        PersonaComponentSpec(
            "agent_summary", build_agent_summary, config_model=AgentSummaryConfig, persona_kind="context", priority=0,
            needs_llm=True, stand_in=False,
            description="Park et al.: the agent's summary description from memory, with today's status revised from "
                        "what it remembers (the planning memory pathway)",
        )
    ]
