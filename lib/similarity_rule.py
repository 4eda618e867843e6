"""The similarity rule: decide by the cosine between an agent's persona and a post.

The embedding baseline's whole policy (``plugins/baselines/embedding_baseline.py``: Zhou et
al.'s no-LLM baseline), and the cheap decider other policies route decisions to (the social
agent's ``similarity_decides``); in the API because two plugin packages use it.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class SimilarityRuleConfig(BaseModel):
    """The thresholds of the similarity rule (see :mod:`townsquare.plugins.baselines.embedding_baseline`)."""

    model_config = ConfigDict(extra="forbid")

    like_threshold: float = Field(0.10, ge=-1.0, le=1.0)
    reblog_threshold: float = Field(0.15, ge=-1.0, le=1.0)
    follow_threshold: float = Field(0.20, ge=-1.0, le=1.0)
    #: "fixed": like / reblog when the cosine reaches its threshold above. "calibrated": per agent,
    #: from the score distribution of its own persona-post pairs: when the cosine is at or above
    #: the (1 - share) quantile of the cosines of every post the agent has browsed (this one
    #: included), so it takes about that share of what it sees, the posts closest to its persona,
    #: whatever the embedder's scale. The share is the caller's (the social agent's plan: its
    #: probability of liking / forwarding), else ``like_share`` / ``reblog_share``.
    thresholds: Literal["fixed", "calibrated"] = "fixed"
    like_share: float = Field(0.3, ge=0.0, le=1.0, description="calibrated: the share of browsed posts liked without a plan (our choice)")
    reblog_share: float = Field(0.1, ge=0.0, le=1.0, description="calibrated: the share reblogged without a plan (our choice)")
    #: calibrated: the most recent cosines an agent keeps as its distribution
    history: int = Field(500, ge=1)


class SimilarityRule:
    """The baseline's decision rule for one agent: cosine between its persona and a post
    against a threshold per decision kind (``like``, ``reblog``, ``follow``), fixed or calibrated
    from the agent's own score distribution (:class:`SimilarityRuleConfig`). Also the cheap
    decider other policies route decisions to (the social agent's ``similarity_decides``)."""

    KINDS = ("like", "reblog", "follow")

    def __init__(self, config: SimilarityRuleConfig):
        self.config = config
        self._persona_vector: np.ndarray | None = None
        self.seen: list[float] = []

    def threshold(self, kind: str, share: float | None = None) -> float:
        """The cosine a post needs for ``kind``: fixed, or (calibrated, like and reblog) the
        ``1 - share`` quantile of the cosines seen so far (``share``: the caller's, else the
        config's); ``inf`` when the share is 0 or nothing was seen. Early on, with few cosines
        seen, the quantile lets through more than the share (the first post seen is at its own
        quantile): the social agent's plan quotas cap the actions anyway."""
        if self.config.thresholds == "fixed" or kind == "follow":
            return float(getattr(self.config, f"{kind}_threshold"))
        share = float(getattr(self.config, f"{kind}_share") if share is None else share)
        if share <= 0 or not self.seen:
            return float("inf")
        return float(np.quantile(np.asarray(self.seen), 1.0 - min(1.0, share)))

    async def similarities(self, ctx: Any, texts: list[str]) -> np.ndarray:
        """Cosine of each text with the agent's persona (embedded once, then kept); with
        calibrated thresholds, the cosines join the agent's distribution."""
        if self._persona_vector is None:
            self._persona_vector = np.asarray(await ctx.embedder.embed_one(ctx.agent.persona.text), dtype=np.float32)
        found = (await ctx.embedder.embed(texts)) @ self._persona_vector
        if self.config.thresholds == "calibrated":
            self.seen = [*self.seen, *(float(x) for x in found)][-self.config.history:]
        return found

    def decides(self, kind: str, similarity: float, share: float | None = None) -> bool:
        return similarity >= self.threshold(kind, share)

    def get_state(self) -> dict[str, Any] | None:
        if self._persona_vector is None and not self.seen:
            return None
        return {"persona_vector": None if self._persona_vector is None else self._persona_vector.tolist(), "seen": list(self.seen)}

    def set_state(self, state: dict[str, Any] | list[float] | None) -> None:
        if isinstance(state, list):  # a checkpoint written before the calibrated thresholds: the vector alone
            state = {"persona_vector": state}
        state = state or {}
        vector = state.get("persona_vector")
        self._persona_vector = None if vector is None else np.asarray(vector, dtype=np.float32)
        self.seen = [float(x) for x in state.get("seen", [])]
