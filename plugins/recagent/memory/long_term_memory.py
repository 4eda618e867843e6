"""RecAgent's long-term memory (Wang et al., "Memory Module", long-term memory, memory
reading and memory reflection): slot ``memory.long_term``, component ``long_term_memory``.

- Writing: records arriving from short-term memory (a record enhanced K times and its
  insights) or, with short-term memory ablated ("w/o short"), straight from sensory memory.
  After each write one forgetting pass runs (:mod:`.forgetting`: g(M) with the power on
  recency, and our choices for the values the paper leaves open). Forgotten records are
  removed and counted.
- Reading: the top-N records for the query (the current observation). The paper: the
  importance score "is leveraged in the memory reading process, and more important memories
  are more likely to be recalled", so a record's score is its embedding relevance (cosine)
  plus ``recall_importance`` times its normalised importance (importance / 10), plus
  ``recall_recency`` times its recency (0 by default: the paper names relevance and importance
  for reading; the reference code's retriever adds recency too, weight 1). When the
  ``memory.retrieval`` slot is filled, its scorer ranks instead. ``recall`` returns
  ``min(k, top_n)`` records and marks them read (``last_access``), which keeps them recent.
  The short-term tier adds all its records (see ``townsquare.api.MemoryChain``). The records
  read re-enter short-term memory, where they may enhance the records they resemble (the
  reference code's retrieval route; ``retrieval_enhances`` of ``short_term_memory``); a record
  that this promotes is written here with its insights, as after any enhancement.
- Reflection (:meth:`LongTermMemory.reflect`, driven by the ``recagent_reflection`` reflector):
  after enough importance has accumulated, the LLM writes insights about recent records
  (after Park et al., as the paper says); insights and memories more similar than
  ``merge_threshold`` are merged (the paper's difference from Park).

Values the paper does not give are our choices and settings: N = 5, the forgetting mode's
beta and delta (:data:`.forgetting.MODE_DEFAULTS`), recency half-life ``recency_hours`` = 24
simulated hours, one forgotten record per pass on average, no forgetting below
``min_records`` = 20 records.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Literal, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, MemoryRecord, MemorySpec, StepContext, hookimpl, retrieval_of

from ..prompts import fill, load_answers, load_prompts
from . import forgetting
from .record_store import RecordStore
from .short_term_memory import ask_insights

log = structlog.get_logger("townsquare.plugins.recagent.long_term_memory")


class LongTermMemoryConfig(BaseModel):
    """``[plugins.long_term_memory]`` settings (values are our choices; the paper gives none)."""

    model_config = ConfigDict(extra="forbid")

    top_n: int = Field(5, ge=1, description="N: long-term records read for an observation")
    mode: Literal["power", "reference", "none"] = Field(
        "power", description="forgetting: g(M) with power-law recency, with the reference code's recency and values, or none")
    beta: float | None = Field(None, gt=1, description="beta > 1: shape of the power function (default: power 3, reference 1.5)")
    delta: float | None = Field(None, gt=0, lt=1, description="delta in (0, 1): floor of the power function (default: power 0.1, reference 0.01)")
    recency_hours: float = Field(24.0, gt=0, description="power mode: recency = 1 / (1 + hours / recency_hours)")
    decay_rate: float = Field(0.01, gt=0, lt=1, description="reference mode: recency = (1 - decay_rate) ** hours")
    spare_hours: float = Field(24.0, ge=0, description="reference mode: records read this recently are kept")
    recall_importance: float = Field(1.0, ge=0, description="reading: weight of importance / 10 beside relevance")
    recall_recency: float = Field(0.0, ge=0, description="reading: weight of recency beside relevance (the reference code: 1)")
    forget_per_pass: float = Field(1.0, ge=0, description="records forgotten per write on average")
    min_records: int = Field(20, ge=0, description="no forgetting while the memory holds this many records or fewer")
    reflect_importance: float = Field(60.0, gt=0, description="summed importance of new records that triggers a reflection")
    reflect_recent: int = Field(20, ge=1, description="recent records a reflection reads")
    reflect_insights: int = Field(2, ge=1, le=10, description="insights a reflection writes")
    merge_threshold: float = Field(0.9, ge=-1, le=1, description="records more similar than this are merged on reflection")
    prompts_file: str | None = None


def hours_between(now: datetime, then: datetime | None) -> float:
    return max(0.0, (now - then).total_seconds() / 3600.0) if then is not None else 0.0


class LongTermMemory:
    def __init__(self, config: LongTermMemoryConfig | None = None, base_dir: str = "."):
        self.config = config or LongTermMemoryConfig()
        self.prompt = load_prompts("memory", {"reflection": frozenset({"name", "memories", "count"})},
                                   self.config.prompts_file, base_dir)["reflection"]
        self.answer = load_answers("memory", self.config.prompts_file, base_dir)["reflection"]
        self.store = RecordStore("lt")
        self.forgotten = 0
        self.merged = 0
        self.reflections = 0
        self.pending_importance = 0.0

    @property
    def records(self) -> list[MemoryRecord]:
        return self.store.records

    # ------------------------------------------------------------------ writing and forgetting

    async def remember(self, ctx: StepContext, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        for record in records:
            stored = replace(record, id=self.store.new_id(), created=record.created or ctx.now,
                             last_access=record.last_access or ctx.now,
                             meta={**record.meta, "from": record.id} if record.id else record.meta)
            await self.store.add(ctx, stored)
            self.pending_importance += stored.importance
        self.forget(ctx.now, ctx.rng)
        return []

    @property
    def beta_delta(self) -> tuple[float, float]:
        """beta and delta: the settings, or the forgetting mode's defaults."""
        beta, delta = forgetting.MODE_DEFAULTS["reference" if self.config.mode == "reference" else "power"]
        return (self.config.beta if self.config.beta is not None else beta,
                self.config.delta if self.config.delta is not None else delta)

    def hours(self, now: datetime) -> np.ndarray:
        return np.array([hours_between(now, r.last_access or r.created) for r in self.store.records])

    def recency(self, now: datetime) -> np.ndarray:
        """Each record's normalised recency in (0, 1) (see :mod:`.forgetting`)."""
        if self.config.mode == "reference":
            return forgetting.exponential_recency(self.hours(now), self.config.decay_rate)
        return forgetting.power_recency(self.hours(now), self.config.recency_hours)

    def forget_values(self, now: datetime) -> np.ndarray:
        """g of every record at ``now`` (see :mod:`.forgetting`)."""
        importance = forgetting.normalised_importance(np.array([rec.importance for rec in self.store.records]))
        return forgetting.g_value(importance, self.recency(now), *self.beta_delta)

    def forget(self, now: datetime, rng: np.random.Generator) -> list[MemoryRecord]:
        c = self.config
        if c.mode == "none" or len(self.store) <= c.min_records or c.forget_per_pass == 0:
            return []
        probabilities = forgetting.forget_probabilities(self.forget_values(now), c.forget_per_pass)
        if c.mode == "reference":
            probabilities[self.hours(now) <= c.spare_hours] = 0.0
        draws = rng.random(len(probabilities))
        gone = self.store.remove([r.id for r, p, u in zip(self.store.records, probabilities, draws) if u < p])
        self.forgotten += len(gone)
        if gone:
            log.debug("long_term.forgot", records=[r.id for r in gone])
        return gone

    # ------------------------------------------------------------------ reading

    async def recall(self, ctx: StepContext, query: str, k: int) -> list[MemoryRecord]:
        if not self.store.records or k <= 0:
            return []
        matrix = await self.store.vectors(ctx)
        relevance = matrix @ await ctx.embedder.embed_one(query)
        scorer = retrieval_of(ctx.agent)
        scores = np.asarray(scorer.score(self.store.records, relevance, ctx.now)) if scorer is not None else self.reading_scores(relevance, ctx.now)
        top = np.argsort(-scores, kind="stable")[: min(k, self.config.top_n)]
        found = []
        for i in top:
            record = self.store.records[int(i)] = replace(self.store.records[int(i)], last_access=ctx.now)
            found.append(record)
        await self.reenter(ctx, found)
        return found

    async def reenter(self, ctx: StepContext, found: Sequence[MemoryRecord]) -> None:
        """The records just read re-enter short-term memory, where they may enhance records
        (:meth:`.short_term_memory.ShortTermMemory.reenter`); what that promotes is written here."""
        short_term = ctx.agent.components.get("memory.short_term")
        if found and short_term is not None and hasattr(short_term, "reenter"):
            moving = await short_term.reenter(ctx, found)
            if moving:
                await self.remember(ctx, moving)

    def reading_scores(self, relevance: np.ndarray, now: datetime) -> np.ndarray:
        """relevance + recall_importance * importance / 10 + recall_recency * recency."""
        c = self.config
        scores = np.asarray(relevance, dtype=float) + c.recall_importance * np.array(
            [r.importance / forgetting.IMPORTANCE_SCALE for r in self.store.records])
        if c.recall_recency:
            scores = scores + c.recall_recency * self.recency(now)
        return np.round(scores, 9)  # equal scores tie exactly, so the order is the records' order

    def since(self, when: Any) -> list[MemoryRecord]:
        return self.store.since(when)

    # ------------------------------------------------------------------ reflection

    async def reflect(self, ctx: StepContext) -> list[MemoryRecord]:
        """Insights from recent records once ``reflect_importance`` has accumulated, then the
        merge of near-duplicates. Returns the insights added."""
        if self.pending_importance < self.config.reflect_importance or not self.store.records:
            return []
        self.pending_importance = 0.0
        recent = sorted(self.store.records, key=lambda r: (r.created or datetime.min, r.id))[-self.config.reflect_recent:]
        llm = ctx.require_llm("recagent_reflection")
        memories = "\n".join(f"- {r.text}" for r in recent)
        lines = await ask_insights(llm, fill(self.prompt, name=ctx.agent.persona.name, memories=memories, count=self.config.reflect_insights),
                                   self.answer, self.config.reflect_insights, "recagent.reflection")
        evidence = tuple(r.id for r in recent)
        importance = max(r.importance for r in recent)
        added = []
        for text in lines:
            record = MemoryRecord(text, kind="reflection", created=ctx.now, last_access=ctx.now, importance=importance,
                                  evidence=evidence, id=self.store.new_id())
            added.append(await self.store.add(ctx, record))
        self.reflections += 1
        ctx.record_reflection("long_term_memory", "reflection", "\n".join(lines), [r.id for r in added])
        await self.merge_similar(ctx)
        return [r for r in added if r.id in {x.id for x in self.store.records}]

    async def merge_similar(self, ctx: StepContext) -> int:
        """Merge records more similar than ``merge_threshold``: the older record stays, taking
        the higher importance, the later access and both evidence lists."""
        matrix = await self.store.vectors(ctx)
        if len(matrix) < 2:
            return 0
        similarity = matrix @ matrix.T
        absorbed: set[int] = set()
        for i in range(len(self.store.records)):
            if i in absorbed:
                continue
            for j in range(i + 1, len(self.store.records)):
                if j in absorbed or similarity[i, j] <= self.config.merge_threshold:
                    continue
                keep, other = self.store.records[i], self.store.records[j]
                self.store.records[i] = replace(
                    keep, importance=max(keep.importance, other.importance),
                    last_access=max(x for x in (keep.last_access, other.last_access, keep.created) if x is not None),
                    evidence=tuple(dict.fromkeys((*keep.evidence, *other.evidence, other.id))),
                )
                absorbed.add(j)
        self.store.remove([self.store.records[j].id for j in absorbed])
        self.merged += len(absorbed)
        return len(absorbed)

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {**self.store.get_state(), "forgotten": self.forgotten, "merged": self.merged,
                "reflections": self.reflections, "pending_importance": self.pending_importance}

    def set_state(self, state: dict[str, Any]) -> None:
        self.store.set_state(state)
        self.forgotten = int(state.get("forgotten", 0))
        self.merged = int(state.get("merged", 0))
        self.reflections = int(state.get("reflections", 0))
        self.pending_importance = float(state.get("pending_importance", 0.0))


def build_long_term_memory(config: LongTermMemoryConfig | None, ctx: BuildContext) -> LongTermMemory:
    return LongTermMemory(config, ctx.base_dir)


@hookimpl
def townsquare_register_memory():
    return [MemorySpec(
        "long_term_memory", build_long_term_memory, config_model=LongTermMemoryConfig, memory_kind="long_term", stand_in=False,
        description="RecAgent: top-N reading by relevance and importance, forgetting by g(M) = 1 - (s+r)/2 * max(r^beta, delta) (r: recency), reflection with merging",
    )]
