"""RecAgent's short-term memory (Wang et al., "Memory Module", short-term memory and memory
writing; Supplementary Note A.2): slot ``memory.short_term``, component ``short_term_memory``.

A short-term record M_i is *enhanced* by a record when their embeddings' cosine similarity is
**higher** than ``similarity_threshold`` (M_i is labelled as enhanced by it). Two kinds of
record enhance, both after the reference code's ``add_stm_memory``:

- a new record M_{n+1} arriving from sensory memory (the paper: "if an agent repeatedly
  encounters similar observations"); M_{n+1} is then stored, whether it enhanced anything or not;
- a long-term record read for an observation (:meth:`reenter`, called by the long-term tier's
  reading when ``retrieval_enhances`` is on): recalling a memory is encountering it again. It
  enhances, but is not stored (it is in long-term memory already). The reference code's
  docstring: short-term memories are "enhanced by other observations or retrieved memories".

A record enhances a given short-term record once (the paper's label is a relation between two
records); the reference code counts every retrieval again, so one memory read by several
prompts of one step could promote a record on its own. The similarity to the *latest*
short-term record gets ``recent_bonus`` (the reference code's +0.1; see :mod:`.enhancement`).

Once a record has been enhanced ``enhance_k`` (K) times, the LLM summarises it and the records
that enhanced it into ``insights`` high-level insights, and the record and the insights (kind
``insight``, ``evidence`` = the record and its enhancers) leave short-term memory:
:meth:`remember` (and :meth:`reenter`) return them, and they are written to long-term memory.
The enhancers stay, as records of their own. Without a long-term tier (``-p no:long_term_memory``,
the paper's "w/o long") nothing is promoted: there is nowhere to transform a record into, and
the agent reads from short-term memory only, as the paper's variant says.

Memory reading takes *all* short-term records (``recall`` ignores ``k``), oldest first.

The paper gives no values for the threshold, K or the capacity; ours are settings. K and the
capacity are the reference code's: ``enhance_k`` 3, ``capacity`` 10. ``similarity_threshold``
is ``"calibrated"`` by default: the cut calibrated to the run's embedder by the stated method of
:mod:`.enhancement` (paraphrases against unrelated records, Youden's J). The reference code's
cut, sigmoid(cosine) >= 0.7 (cosine 0.847, :data:`ENHANCE_COSINE`), was set for OpenAI's
embeddings; with the offline embedders no paraphrase pair reaches it (hashing: 0 %), so with it
short-term memory never promotes a record and long-term memory stays empty. Set 0.847 for the
reference code's plain cut (no draw). Beyond ``capacity`` the least important record is dropped, then among
equals the least enhanced, then the oldest (the reference code's order: importance, then
enhancements).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field, field_validator

from townsquare.api import AnswerFormat, BuildContext, MemoryRecord, MemorySpec, StepContext, hookimpl

from ..prompts import fill, load_answers, load_prompts
from . import enhancement
from .record_store import RecordStore

log = structlog.get_logger("townsquare.plugins.recagent.short_term_memory")

#: the reference code's enhancement cut, sigmoid(cosine) >= 0.7, as a cosine: ln(0.7 / 0.3)
ENHANCE_COSINE = enhancement.REFERENCE_COSINE


class ShortTermMemoryConfig(BaseModel):
    """``[plugins.short_term_memory]`` settings (values are our choices; the paper gives none)."""

    model_config = ConfigDict(extra="forbid")

    similarity_threshold: float | Literal["calibrated"] = Field(
        "calibrated", description='a record enhances those it is more similar to than this (the reference code: 0.847), '
                                    'or "calibrated": the cut calibrated to the embedder (Youden\'s J, see enhancement.py)')
    recent_bonus: float = Field(enhancement.REFERENCE_RECENT_BONUS, ge=0, le=1,
                                description="added to the similarity to the latest short-term record (the reference code's 0.1)")
    retrieval_enhances: bool = Field(True, description="long-term records read for an observation enhance short-term records")
    enhance_k: int = Field(3, ge=1, description="K: enhancements before a record moves to long-term memory")
    insights: int = Field(1, ge=1, le=5, description="insights written per promoted record")
    capacity: int = Field(10, ge=1, description="records kept; the least enhanced, then oldest, is dropped beyond it")
    prompts_file: str | None = None

    @field_validator("similarity_threshold")
    @classmethod
    def _a_cosine(cls, value: float | str) -> float | str:
        if value != "calibrated" and not -1 <= float(value) <= 1:
            raise ValueError('a cosine in [-1, 1], or "calibrated"')
        return value


async def ask_insights(llm: Any, prompt: str, answer: AnswerFormat, count: int, purpose: str) -> list[str]:
    """Up to ``count`` insights, asked as JSON of ``answer`` (``{"insights": [...]}``, at most
    ``count`` items) so that a backend that constrains decoding returns a list by construction;
    an answer that does not parse after its repair gives none (a ``parse_failure`` row)."""
    items = answer.schema["properties"]["insights"]
    result = await llm.ask(prompt, answer.with_schema(properties={"insights": {**items, "maxItems": count}}),
                           purpose=purpose, default=[], validate=_insight_list)
    return list(result.value)[:count]


def _insight_list(value: Any) -> list[str]:
    items = value.get("insights") if isinstance(value, dict) else None
    if not isinstance(items, list):
        raise ValueError('expected {"insights": [...]}')
    lines = [" ".join(item.split()) for item in items if isinstance(item, str) and item.strip()]
    if not lines:
        raise ValueError("no insight in the list")
    return lines


class ShortTermMemory:
    def __init__(self, config: ShortTermMemoryConfig | None = None, base_dir: str = "."):
        self.config = config or ShortTermMemoryConfig()
        self.prompt = load_prompts("memory", {"insights": frozenset({"name", "memories", "count"})},
                                   self.config.prompts_file, base_dir)["insights"]
        self.answer = load_answers("memory", self.config.prompts_file, base_dir)["insights"]
        self.store = RecordStore("st")
        self.enhancers: dict[str, list[str]] = {}  # record id -> ids of the records that enhanced it
        self.texts: dict[str, str] = {}  # enhancer id -> its text (an enhancer may be gone or in long-term memory)
        self.promoted = 0
        self.enhancements = {"observation": 0, "retrieval": 0}

    @property
    def records(self) -> list[MemoryRecord]:
        return self.store.records

    def count(self, record_id: str) -> int:
        return len(self.enhancers.get(record_id, ()))

    async def threshold(self, ctx: StepContext) -> float:
        """The cosine cut: the setting, or the embedder's calibrated cut (see :mod:`.enhancement`)."""
        if self.config.similarity_threshold != "calibrated":
            return float(self.config.similarity_threshold)
        found = await enhancement.calibrate(ctx.embedder)
        return found.threshold

    async def enhance(self, ctx: StepContext, record: MemoryRecord, route: str) -> int:
        """Label every stored record that ``record`` resembles as enhanced by it (once per pair);
        returns how many were."""
        if not self.store.records:
            return 0
        similarity = np.array(await self.store.vectors(ctx) @ await ctx.embedder.embed_one(record.text), dtype=float)
        similarity[-1] += self.config.recent_bonus
        done = 0
        for i in np.flatnonzero(similarity > await self.threshold(ctx)):
            target = self.store.records[int(i)].id
            if target != record.id and record.id not in self.enhancers.get(target, ()):
                self.enhancers.setdefault(target, []).append(record.id)
                self.texts[record.id] = record.text
                done += 1
        self.enhancements[route] += done
        return done

    async def remember(self, ctx: StepContext, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        moving: list[MemoryRecord] = []
        for record in records:
            record = replace(record, id=self.store.new_id(), created=record.created or ctx.now, last_access=record.last_access or ctx.now)
            await self.enhance(ctx, record, "observation")
            await self.store.add(ctx, record)
            moving += await self.promote_ready(ctx)
        self._trim()
        return moving

    async def reenter(self, ctx: StepContext, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """Long-term ``records`` read for an observation enhance the short-term records they
        resemble (they are not stored here); returns the records and insights that move on."""
        if not self.config.retrieval_enhances:
            return []
        moving: list[MemoryRecord] = []
        for record in records:
            if await self.enhance(ctx, record, "retrieval"):
                moving += await self.promote_ready(ctx)
        return moving

    async def promote_ready(self, ctx: StepContext) -> list[MemoryRecord]:
        """Records enhanced K times, with their insights, once there is a long-term tier to take
        them (without one, "w/o long", short-term memory keeps its records and writes no insight)."""
        moving: list[MemoryRecord] = []
        if ctx.agent.components.get("memory.long_term") is None:
            return moving
        for target in [r for r in self.store.records if self.count(r.id) >= self.config.enhance_k]:
            moving += await self._promote(ctx, target)
        return moving

    async def _promote(self, ctx: StepContext, target: MemoryRecord) -> list[MemoryRecord]:
        """Summarise ``target`` and its enhancers into insights; both leave short-term memory."""
        by_id = {r.id: r for r in self.store.records}
        group = [(i, by_id[i].text if i in by_id else self.texts.get(i, "")) for i in self.enhancers.get(target.id, [])]
        group = [(target.id, target.text)] + [(i, text) for i, text in group if text]
        memories = "\n".join(f"- {text}" for _, text in group)
        llm = ctx.require_llm("short_term_memory")
        lines = await ask_insights(llm, fill(self.prompt, name=ctx.agent.persona.name, memories=memories, count=self.config.insights),
                                   self.answer, self.config.insights, "recagent.insight")
        evidence = tuple(i for i, _ in group)
        importance = max([target.importance] + [by_id[i].importance for i, _ in group if i in by_id])
        insights = [MemoryRecord(text, kind="insight", created=ctx.now, last_access=ctx.now, importance=importance,
                                 evidence=evidence, id=self.store.new_id()) for text in lines]
        self._drop([target.id])
        self.promoted += 1
        ctx.record_reflection("short_term_memory", "insight", "\n".join(lines), [r.id for r in insights])
        log.debug("short_term.promoted", agent=ctx.agent.id, record=target.id, enhancers=len(group) - 1, insights=len(insights))
        return [target, *insights]

    def _drop(self, ids: Sequence[str]) -> None:
        self.store.remove(ids)
        for record_id in ids:
            self.enhancers.pop(record_id, None)
        kept = {i for enhancers in self.enhancers.values() for i in enhancers}
        self.texts = {i: t for i, t in self.texts.items() if i in kept}

    def _trim(self) -> None:
        excess = len(self.store.records) - self.config.capacity
        if excess <= 0:
            return
        records = self.store.records
        order = sorted(range(len(records)), key=lambda i: (records[i].importance, self.count(records[i].id), i))
        self._drop([records[i].id for i in order[:excess]])

    async def recall(self, ctx: StepContext, query: str, k: int) -> list[MemoryRecord]:
        """All short-term records, oldest first (the paper's memory reading)."""
        return list(self.store.records)

    def since(self, when: Any) -> list[MemoryRecord]:
        return self.store.since(when)

    def get_state(self) -> dict[str, Any]:
        return {**self.store.get_state(), "enhancers": {k: list(v) for k, v in self.enhancers.items()}, "texts": dict(self.texts),
                "promoted": self.promoted, "enhancements": dict(self.enhancements)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.store.set_state(state)
        self.enhancers = {k: list(v) for k, v in state.get("enhancers", {}).items()}
        self.texts = dict(state.get("texts", {}))
        self.promoted = int(state.get("promoted", 0))
        self.enhancements = {"observation": 0, "retrieval": 0, **state.get("enhancements", {})}


def build_short_term_memory(config: ShortTermMemoryConfig | None, ctx: BuildContext) -> ShortTermMemory:
    return ShortTermMemory(config, ctx.base_dir)


@hookimpl
def townsquare_register_memory():
    return [MemorySpec(
        "short_term_memory", build_short_term_memory, config_model=ShortTermMemoryConfig, memory_kind="short_term",
        needs_llm=True, stand_in=False,
        description="RecAgent: similar records enhance each other; after K enhancements, insights move to long-term memory",
    )]
