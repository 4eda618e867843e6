"""The similarity rule: decide by the cosine between an agent's persona and a post.

The embedding baseline's whole policy (``plugins/baselines/embedding_baseline.py``: Zhou et
al.'s no-LLM baseline), and the cheap decider other policies route decisions to (the social
agent's ``similarity_decides``); in the API because two plugin packages use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class SimilarityRuleConfig(BaseModel):
    """The thresholds of the similarity rule (see :mod:`townsquare.plugins.baselines.embedding_baseline`)."""

    model_config = ConfigDict(extra="forbid")

    like_threshold: float = Field(0.10, ge=-1.0, le=1.0)
    reblog_threshold: float = Field(0.15, ge=-1.0, le=1.0)
    follow_threshold: float = Field(0.20, ge=-1.0, le=1.0)


class SimilarityRule:
    """The baseline's decision rule for one agent: cosine between its persona and a post
    against a threshold per decision kind (``like``, ``reblog``, ``follow``). Also the cheap
    decider other policies route decisions to (the social agent's ``similarity_decides``)."""

    KINDS = ("like", "reblog", "follow")

    def __init__(self, config: SimilarityRuleConfig):
        self.config = config
        self._persona_vector: np.ndarray | None = None

    def threshold(self, kind: str) -> float:
        return float(getattr(self.config, f"{kind}_threshold"))

    async def similarities(self, ctx: Any, texts: list[str]) -> np.ndarray:
        """Cosine of each text with the agent's persona (embedded once, then kept)."""
        if self._persona_vector is None:
            self._persona_vector = np.asarray(await ctx.embedder.embed_one(ctx.agent.persona.text), dtype=np.float32)
        return (await ctx.embedder.embed(texts)) @ self._persona_vector

    def decides(self, kind: str, similarity: float) -> bool:
        return similarity >= self.threshold(kind)

    def get_state(self) -> list[float] | None:
        return None if self._persona_vector is None else self._persona_vector.tolist()

    def set_state(self, vector: list[float] | None) -> None:
        self._persona_vector = None if vector is None else np.asarray(vector, dtype=np.float32)
