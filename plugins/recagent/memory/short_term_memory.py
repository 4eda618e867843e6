"""RecAgent's short-term memory (Wang et al., "Memory Module", short-term memory;
Supplementary Note A.2): slot ``memory.short_term``, component ``short_term_memory``.

For a new record M_{n+1}, the cosine similarity of its embedding to each stored record M_i is
computed; every M_i with a similarity **higher** than ``similarity_threshold`` is enhanced by
M_{n+1} (its count goes up by one and M_{n+1} joins its enhancers); then M_{n+1} is stored,
enhancing something or not. Once a record has been enhanced ``enhance_k`` (K) times, the LLM
summarises it and its enhancers into ``insights`` high-level insights, and the record and the
insights (kind ``insight``, ``evidence`` = the record and its enhancers) leave short-term
memory: :meth:`remember` returns them, so the memory chain passes them on to long-term memory.
The enhancers stay, as records of their own.

Memory reading takes *all* short-term records (``recall`` ignores ``k``), oldest first.

The paper gives no values for the threshold, K or the capacity; ours are settings taken from
the reference code: ``enhance_k`` 3, ``capacity`` 10 and ``similarity_threshold`` 0.847. The
reference code enhances a record when sigmoid(cosine) >= 0.7 (then with that probability); the
cut is at cosine ln(0.7 / 0.3) = 0.847, which we use as the paper's plain threshold (no draw).
Beyond ``capacity`` the least important record is dropped, then among equals the least
enhanced, then the oldest (the reference code's order: importance, then enhancements).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import AnswerFormat, BuildContext, MemoryRecord, MemorySpec, StepContext, hookimpl

from ..prompts import fill, load_answers, load_prompts
from .record_store import RecordStore

log = structlog.get_logger("townsquare.plugins.recagent.short_term_memory")

#: the reference code's enhancement cut, sigmoid(cosine) >= 0.7, as a cosine: ln(0.7 / 0.3)
ENHANCE_COSINE = round(math.log(0.7 / 0.3), 3)


class ShortTermMemoryConfig(BaseModel):
    """``[plugins.short_term_memory]`` settings (values are our choices; the paper gives none)."""

    model_config = ConfigDict(extra="forbid")

    similarity_threshold: float = Field(ENHANCE_COSINE, ge=-1, le=1, description="a new record enhances those it is more similar to than this")
    enhance_k: int = Field(3, ge=1, description="K: enhancements before a record moves to long-term memory")
    insights: int = Field(1, ge=1, le=5, description="insights written per promoted record")
    capacity: int = Field(10, ge=1, description="records kept; the least enhanced, then oldest, is dropped beyond it")
    prompts_file: str | None = None


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
        self.promoted = 0

    @property
    def records(self) -> list[MemoryRecord]:
        return self.store.records

    def count(self, record_id: str) -> int:
        return len(self.enhancers.get(record_id, ()))

    async def remember(self, ctx: StepContext, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        moving: list[MemoryRecord] = []
        for record in records:
            record = replace(record, id=self.store.new_id(), created=record.created or ctx.now, last_access=record.last_access or ctx.now)
            vector = await ctx.embedder.embed_one(record.text)
            matrix = await self.store.vectors(ctx)
            if len(matrix):
                similar = np.flatnonzero(matrix @ vector > self.config.similarity_threshold)
                for i in similar:
                    self.enhancers.setdefault(self.store.records[int(i)].id, []).append(record.id)
            await self.store.add(ctx, record)
            ready = [r for r in self.store.records if self.count(r.id) >= self.config.enhance_k]
            for target in ready:
                moving += await self._promote(ctx, target)
        self._trim()
        return moving

    async def _promote(self, ctx: StepContext, target: MemoryRecord) -> list[MemoryRecord]:
        """Summarise ``target`` and its enhancers into insights; both leave short-term memory."""
        by_id = {r.id: r for r in self.store.records}
        group = [target] + [by_id[i] for i in self.enhancers.get(target.id, []) if i in by_id]
        memories = "\n".join(f"- {r.text}" for r in group)
        llm = ctx.require_llm("short_term_memory")
        lines = await ask_insights(llm, fill(self.prompt, name=ctx.agent.persona.name, memories=memories, count=self.config.insights),
                                   self.answer, self.config.insights, "recagent.insight")
        evidence = tuple(r.id for r in group)
        importance = max(r.importance for r in group)
        insights = [MemoryRecord(text, kind="insight", created=ctx.now, last_access=ctx.now, importance=importance,
                                 evidence=evidence, id=self.store.new_id()) for text in lines]
        self.store.remove([target.id])
        self.enhancers.pop(target.id, None)
        self.promoted += 1
        ctx.record_reflection("short_term_memory", "insight", "\n".join(lines), [r.id for r in insights])
        log.debug("short_term.promoted", agent=ctx.agent.id, record=target.id, enhancers=len(group) - 1, insights=len(insights))
        return [target, *insights]

    def _trim(self) -> None:
        excess = len(self.store.records) - self.config.capacity
        if excess <= 0:
            return
        records = self.store.records
        order = sorted(range(len(records)), key=lambda i: (records[i].importance, self.count(records[i].id), i))
        dropped = [self.store.records[i].id for i in order[:excess]]
        self.store.remove(dropped)
        for record_id in dropped:
            self.enhancers.pop(record_id, None)

    async def recall(self, ctx: StepContext, query: str, k: int) -> list[MemoryRecord]:
        """All short-term records, oldest first (the paper's memory reading)."""
        return list(self.store.records)

    def since(self, when: Any) -> list[MemoryRecord]:
        return self.store.since(when)

    def get_state(self) -> dict[str, Any]:
        return {**self.store.get_state(), "enhancers": {k: list(v) for k, v in self.enhancers.items()}, "promoted": self.promoted}

    def set_state(self, state: dict[str, Any]) -> None:
        self.store.set_state(state)
        self.enhancers = {k: list(v) for k, v in state.get("enhancers", {}).items()}
        self.promoted = int(state.get("promoted", 0))


def build_short_term_memory(config: ShortTermMemoryConfig | None, ctx: BuildContext) -> ShortTermMemory:
    return ShortTermMemory(config, ctx.base_dir)


@hookimpl
def townsquare_register_memory():
    return [MemorySpec(
        "short_term_memory", build_short_term_memory, config_model=ShortTermMemoryConfig, memory_kind="short_term",
        needs_llm=True, stand_in=False,
        description="RecAgent: similar records enhance each other; after K enhancements, insights move to long-term memory",
    )]
