"""A bounded cache of text vectors keyed by the SHA-1 of the text, for embedders.

The run's :class:`townsquare.embedding.EmbeddingCache` already remembers every text embedded
through it; an embedder's own cache also serves callers that hold the embedder directly (a
knowledge base indexing its documents, a benchmark) and keeps only a 20-byte digest per text
instead of the text itself.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Awaitable, Callable, Sequence

import numpy as np


class VectorCache:
    """A bounded LRU map from a text's SHA-1 to its vector."""

    def __init__(self, max_items: int):
        self.max_items = max_items
        self._vectors: OrderedDict[bytes, np.ndarray] = OrderedDict()

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha1(text.encode("utf-8")).digest()

    def get(self, text: str) -> np.ndarray | None:
        key = self.key(text)
        vector = self._vectors.get(key)
        if vector is not None:
            self._vectors.move_to_end(key)
        return vector

    def put(self, text: str, vector: np.ndarray) -> None:
        if self.max_items <= 0:
            return
        key = self.key(text)
        self._vectors[key] = vector
        self._vectors.move_to_end(key)
        while len(self._vectors) > self.max_items:
            self._vectors.popitem(last=False)

    def __len__(self) -> int:
        return len(self._vectors)


async def embed_with_cache(texts: Sequence[str], cache: VectorCache, dim: int,
                           encode: Callable[[list[str]], Awaitable[np.ndarray]]) -> np.ndarray:
    """Rows for ``texts`` from ``cache``; the missing texts (each once) go to ``await
    encode(list_of_texts)``, which returns one unit row per text."""
    rows: list[np.ndarray | None] = [cache.get(text) for text in texts]
    missing = list(dict.fromkeys(text for text, row in zip(texts, rows) if row is None))
    if missing:
        fresh = dict(zip(missing, await encode(missing)))
        for text in missing:
            cache.put(text, fresh[text])
        rows = [fresh[text] if row is None else row for text, row in zip(texts, rows)]
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    return np.stack(rows).astype(np.float32, copy=False)
