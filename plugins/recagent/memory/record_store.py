"""The records of one memory tier with their embeddings, kept as a numpy matrix.

Not a plugin. Embeddings are not checkpointed: after ``set_state`` they are recomputed on first
use from the record texts (the run's embedding cache makes that cheap), so a checkpoint holds
only ``MemoryRecord.to_dict()`` rows.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Iterable

import numpy as np

from townsquare.api import MemoryRecord, StepContext


class RecordStore:
    def __init__(self, prefix: str):
        self.prefix = prefix
        self.records: list[MemoryRecord] = []
        self.counter = 0
        self._vectors: np.ndarray | None = None  # rows follow self.records; None: recompute

    def __len__(self) -> int:
        return len(self.records)

    def new_id(self) -> str:
        self.counter += 1
        return f"{self.prefix}{self.counter}"

    async def vectors(self, ctx: StepContext) -> np.ndarray:
        if self._vectors is None or len(self._vectors) != len(self.records):
            self._vectors = await ctx.embedder.embed([r.text for r in self.records])
        return self._vectors

    async def add(self, ctx: StepContext, record: MemoryRecord) -> MemoryRecord:
        """Store ``record`` (a copy without its embedding) and return the stored copy."""
        stored = replace(record, embedding=None)
        vector = await ctx.embedder.embed_one(stored.text)
        matrix = await self.vectors(ctx)
        self.records.append(stored)
        self._vectors = np.vstack([matrix.reshape(len(matrix), -1) if len(matrix) else np.zeros((0, len(vector)), np.float32), vector[None, :]])
        return stored

    def remove(self, ids: Iterable[str]) -> list[MemoryRecord]:
        drop = set(ids)
        keep = [i for i, r in enumerate(self.records) if r.id not in drop]
        gone = [r for r in self.records if r.id in drop]
        if self._vectors is not None and len(self._vectors) == len(self.records):
            self._vectors = self._vectors[keep]
        self.records = [self.records[i] for i in keep]
        return gone

    def since(self, when: Any) -> list[MemoryRecord]:
        found = [r for r in self.records if when is None or (r.created is not None and r.created > when)]
        return sorted(found, key=lambda r: (r.created or datetime.min, r.id))

    def get_state(self) -> dict[str, Any]:
        return {"records": [r.to_dict() for r in self.records], "counter": self.counter}

    def set_state(self, state: dict[str, Any]) -> None:
        self.records = [MemoryRecord.from_dict(d) for d in state.get("records", [])]
        self.counter = int(state.get("counter", len(self.records)))
        self._vectors = None
