"""The offline default embedder: feature hashing, no model, no download.

Weinberger et al.'s signed hashing trick over word n-grams: lowercase, split on ``\\w+``, drop
common English function words (without that, "I", "my", "the" make every persona look alike),
add adjacent-word bigrams, hash each feature with BLAKE2b (stable across processes and
platforms, unlike Python's salted ``hash()``), take the bucket from the digest modulo ``dim``
and the sign from its top bit, weight by sublinear term frequency ``1 + log(tf)`` and scale
each row to unit length. Similar vocabulary gives a high cosine; meaning does not.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import EmbedderSpec, hookimpl, normalize_rows

_TOKEN = re.compile(r"\w+")

# Function words and persona boilerplate; content words carry the topic.
STOP_WORDS: frozenset[str] = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing don down during each even ever every few
for from further get got had has have having he her here hers herself him himself his how i if
in into is it its itself just like love lot lots me more most much my myself no nor not now of
off on once only or other our ours ourselves out over own really same she should so some such
than that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you
your yours yourself yourselves s t d ll m re ve
""".split())

# Token hashes are memoised; the cap keeps a long run's memory bounded.
_MEMO_LIMIT = 200_000


class HashEmbedderConfig(BaseModel):
    """``[embedder]`` settings for ``name = "hash"``."""

    model_config = ConfigDict(extra="forbid")

    dim: int = Field(256, gt=0)
    ngram: int = Field(2, ge=1, le=3, description="longest word n-gram hashed (2: unigrams and bigrams)")
    stop_words: bool = Field(True, description="drop common English function words")


class HashEmbedder:
    """Deterministic bag-of-n-grams vectors; float32 rows of unit length."""

    name = "hash"

    def __init__(self, config: HashEmbedderConfig | None = None):
        self.config = config or HashEmbedderConfig()
        self.dim = self.config.dim
        self._memo: dict[str, tuple[int, float]] = {}

    def _bucket(self, feature: str) -> tuple[int, float]:
        slot = self._memo.get(feature)
        if slot is None:
            value = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
            # Bucket from the low bits, sign from the top bit: independent for any dim < 2**63.
            slot = (value % self.dim, -1.0 if value >> 63 else 1.0)
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[feature] = slot
        return slot

    def features(self, text: str) -> Counter:
        """The n-gram counts hashed for ``text`` (bigrams are joined by a space)."""
        words = _TOKEN.findall(text.lower())
        if self.config.stop_words:
            words = [w for w in words if w not in STOP_WORDS]
        counts = Counter(words)
        for n in range(2, self.config.ngram + 1):
            counts.update(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))
        return counts

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        rows, cols, values = [], [], []
        for row, text in enumerate(texts):
            for feature, count in self.features(text).items():
                col, sign = self._bucket(feature)
                rows.append(row)
                cols.append(col)
                values.append(sign * (1.0 + math.log(count)))
        matrix = np.zeros((len(texts), self.dim), dtype=np.float64)
        # add.at sums features that collide in one bucket.
        np.add.at(matrix, (np.asarray(rows, dtype=np.intp), np.asarray(cols, dtype=np.intp)), values)
        return normalize_rows(matrix)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_sync(texts)

    def get_state(self) -> dict[str, Any]:
        return {}  # the memo is a pure function of the config

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_hash_embedder(config: HashEmbedderConfig | None, ctx: Any) -> HashEmbedder:
    return HashEmbedder(config)


@hookimpl
def townsquare_register_embedders():
    return [
        EmbedderSpec(
            "hash", build_hash_embedder, config_model=HashEmbedderConfig, priority=100,
            description="feature hashing of word n-grams; offline, no model",
        )
    ]
