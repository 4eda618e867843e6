"""The embedder protocol and the run-wide embedding cache.

Embedders return float32 arrays of shape ``(len(texts), dim)`` whose rows have unit length, so
a dot product is a cosine similarity. :class:`EmbeddingCache` wraps the run's embedder: every
component shares it, and a text is embedded once per run.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """Scale each row to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


class EmbeddingCache:
    """A bounded LRU cache in front of an embedder, keyed by text."""

    def __init__(self, embedder: Embedder, max_items: int = 200_000):
        self.embedder = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        self.max_items = max_items
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = 0
        self.misses = 0

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            self.misses += len(missing)
            fresh = await self.embedder.embed(missing)
            for text, vector in zip(missing, fresh):
                self._vectors[text] = vector
            while len(self._vectors) > self.max_items:
                self._vectors.popitem(last=False)
        self.hits += len(texts) - len(missing)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    async def embed_one(self, text: str) -> np.ndarray:
        vector = self._vectors.get(text)
        if vector is not None:
            self.hits += 1
            return vector
        return (await self.embed([text]))[0]
