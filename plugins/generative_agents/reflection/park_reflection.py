"""Park et al.'s reflection (§4.2): slot ``reflector``, component ``park_reflection``.

Asked every round (active or not). When the summed importance of the records created since
the last reflection is greater than ``threshold`` (the paper: 150; the reference code's n25
base simulation files use 250), the agent reflects:

1. its ``recent`` (100) most recent records go into one prompt that asks for the
   ``questions`` (3) most salient high-level questions they can answer (JSON of
   :func:`questions_schema`); the character budget ``statements_chars`` (12,000, our choice: 100
   records of up to 120 characters) skips a record that does not fit and goes on, so one long
   record never hides the others;
2. per question, the memory recalls the ``evidence_k`` best records for it (the agent's own
   memory chain, so Park's retrieval score ranks them when the slot is filled);
3. one prompt per question asks for ``insights`` (5) high-level insights, each citing the
   numbers of the statements it rests on (the paper's "(because of 1, 5, 3)", as JSON of
   :func:`insights_schema`);
4. each insight becomes a ``reflection`` record whose ``evidence`` holds the cited records'
   ids, remembered through the chain (the stream rates its importance like any record).
   Reflections can cite reflections, so they form a tree whose leaves are observations.

An insight that cites no statement the prompt showed is dropped (the tree needs its links); a
"question" that ends with a colon is a heading ("Here are the 3 questions:"), not a question, and
is dropped; an answer with no usable question or insight is recorded as a parse failure. The paper gives
no value for how many records are retrieved per question: ``evidence_k`` = 15 (setting).
Works with any memory design that implements the protocol; without memory or without an LLM
it does nothing.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import MemoryRecord, ReflectorSpec, agent_memory, hookimpl

from ..memory.memory_text import bounded, memory_lines, newest_bounded
from ..prompt_files import fill, load_prompts, prompts_for

log = structlog.get_logger("townsquare.plugins.generative_agents.park_reflection")

REQUIRED = {
    "questions": frozenset({"name", "statements", "count"}),
    "insights": frozenset({"name", "question", "statements", "count"}),
}
_NUMBERING = re.compile(r"^\s*(?:[-*•]\s*)?(?:\(?\d+[.):]\s+)?")


def questions_schema(count: int) -> dict[str, Any]:
    """``{"questions": [...]}``, at most ``count`` of them."""
    return {"type": "object", "properties": {"questions": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                                           "maxItems": count}}, "required": ["questions"]}


def insights_schema(count: int) -> dict[str, Any]:
    """``{"insights": [{"insight": "...", "because": [1, 5]}, ...]}``, at most ``count``."""
    item = {"type": "object", "properties": {"insight": {"type": "string"},
                                             "because": {"type": "array", "items": {"type": "integer", "minimum": 1},
                                                         "minItems": 1}},
            "required": ["insight", "because"]}
    return {"type": "object", "properties": {"insights": {"type": "array", "items": item, "minItems": 1, "maxItems": count}},
            "required": ["insights"]}


class ParkReflectionConfig(BaseModel):
    """``[plugins.park_reflection]`` settings."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(150.0, gt=0, description="summed importance that triggers a reflection (Park §4.2: 150)")
    recent: int = Field(100, gt=0, description="most recent records the questions come from (Park §4.2: 100)")
    questions: int = Field(3, gt=0, description="salient questions per reflection (Park §4.2: 3)")
    insights: int = Field(5, gt=0, description="insights per question (Park §4.2: 5)")
    evidence_k: int = Field(15, gt=0, description="records recalled per question (not given in the paper)")
    statements_chars: int = Field(12000, gt=0, description="character budget of the recent statements (our choice)")
    evidence_chars: int = Field(2000, gt=0, description="character budget of the statements per question")
    max_tokens: int = Field(400, gt=0)
    prompts_file: str | None = None


def _list(value: Any, key: str) -> list[Any]:
    items = value.get(key) if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ValueError(f'expected {{"{key}": [...]}}')
    return items


def read_questions(value: Any, count: int) -> list[str]:
    """The first ``count`` questions of a ``{"questions": [...]}`` answer (numbering stripped;
    headings that end with a colon and empty items dropped); ValueError when none is left."""
    questions = []
    for item in _list(value, "questions"):
        text = _NUMBERING.sub("", " ".join(str(item).split())).strip() if isinstance(item, (str, int, float)) else ""
        if text and not text.endswith(":"):
            questions.append(text)
    if not questions:
        raise ValueError("no question")
    return questions[:count]


def read_insights(value: Any, statements: list[MemoryRecord], count: int) -> list[tuple[str, tuple[str, ...]]]:
    """``(insight, evidence ids)`` for each insight that cites at least one shown statement (1 is
    the first), at most ``count``; ValueError when none does."""
    found = []
    for item in _list(value, "insights"):
        if not isinstance(item, dict):
            continue
        text = _NUMBERING.sub("", " ".join(str(item.get("insight") or "").split())).strip()
        cited = item.get("because") if isinstance(item.get("because"), list) else [item.get("because")]
        numbers = [int(n) for n in cited if isinstance(n, int) or (isinstance(n, str) and n.strip().isdigit())]
        ids = tuple(dict.fromkeys(statements[n - 1].id for n in numbers if 1 <= n <= len(statements)))
        if ids and text:
            found.append((text, ids))
        if len(found) == count:
            break
    if not found:
        raise ValueError("no insight cites a statement shown (numbers 1 to %d)" % len(statements))
    return found


class ParkReflection:
    def __init__(self, config: ParkReflectionConfig | None = None, prompts: dict[str, str] | None = None):
        self.config = config or ParkReflectionConfig()
        self.prompts = prompts or load_prompts("reflection", REQUIRED)
        self.last: datetime | None = None
        self.reflections = 0

    def pending_importance(self, memory: Any) -> float:
        return float(sum(r.importance for r in memory.since(self.last)))

    async def reflect(self, ctx: Any) -> list:
        memory = agent_memory(ctx.agent)
        if ctx.llm is None or not memory:
            return []
        pending = self.pending_importance(memory)
        if pending <= self.config.threshold:  # "exceeds": strictly greater
            return []
        insights = await self.run(ctx, memory)
        self.last = ctx.now
        self.reflections += 1
        # the insights' text (the memory tiers store copies, with ids of their own)
        ctx.record_reflection("park_reflection", "reflection", "\n".join(r.text for r in insights))
        log.info("reflection.done", agent=ctx.agent.id, importance=pending, insights=len(insights))
        return []

    async def run(self, ctx: Any, memory: Any) -> list[MemoryRecord]:
        """One reflection: recent records -> questions -> recall per question -> insights."""
        cfg, llm, name = self.config, ctx.llm, ctx.agent.persona.name
        recent = newest_bounded(memory.since(None)[-cfg.recent:], cfg.recent, cfg.statements_chars)
        prompt = fill(self.prompts["questions"], name=name, count=cfg.questions,
                      statements=memory_lines(recent, cfg.recent, cfg.statements_chars))
        questions = await llm.json(prompt, questions_schema(cfg.questions), purpose="reflection.questions", default=[],
                                   validate=lambda value: read_questions(value, cfg.questions), max_tokens=cfg.max_tokens)
        if not questions:
            return []
        records: list[MemoryRecord] = []
        for question in questions:
            evidence = bounded(await memory.recall(ctx, question, cfg.evidence_k), cfg.evidence_k, cfg.evidence_chars)
            if not evidence:
                continue
            prompt = fill(self.prompts["insights"], name=name, question=question, count=cfg.insights,
                          statements=memory_lines(evidence, cfg.evidence_k, cfg.evidence_chars, numbered=True))
            parsed = await llm.json(prompt, insights_schema(cfg.insights), purpose="reflection.insights", default=[],
                                    validate=lambda value, shown=evidence: read_insights(value, shown, cfg.insights),
                                    max_tokens=cfg.max_tokens)
            records += [MemoryRecord(text, kind="reflection", evidence=ids, meta={"question": question})
                        for text, ids in parsed]
        if records:
            await memory.remember(ctx, records)
        return records

    def get_state(self) -> dict[str, Any]:
        return {"last": self.last.isoformat() if self.last else None, "reflections": self.reflections}

    def set_state(self, state: dict[str, Any]) -> None:
        self.last = datetime.fromisoformat(state["last"]) if state.get("last") else None
        self.reflections = int(state.get("reflections", 0))


def build_park_reflection(config: ParkReflectionConfig | None, ctx: Any) -> ParkReflection:
    config = config or ParkReflectionConfig()
    return ParkReflection(config, prompts_for("reflection", REQUIRED, config, ctx))


@hookimpl
def townsquare_register_reflectors():
    return [
        ReflectorSpec(
            "park_reflection", build_park_reflection, config_model=ParkReflectionConfig, priority=50, needs_llm=True,
            description="Park et al. §4.2: importance over 150 -> 3 questions from 100 recent records -> 5 cited insights each",
        )
    ]
