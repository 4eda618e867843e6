"""The similarity rule's thresholds: fixed (the embedding baseline's) or calibrated per agent
from the score distribution of its own persona-post pairs."""

from __future__ import annotations

import asyncio
import types

import numpy as np
import pytest

from townsquare.lib.similarity_rule import SimilarityRule, SimilarityRuleConfig


class Embedder:
    """Unit vectors at the given cosines to the persona (the persona is the first axis)."""

    def __init__(self, cosines: dict[str, float]):
        self.cosines = cosines

    async def embed_one(self, text):
        return np.array([1.0, 0.0])

    async def embed(self, texts):
        return np.array([[c, np.sqrt(1 - c * c)] for c in (self.cosines[t] for t in texts)])


def seen_by(rule: SimilarityRule, cosines: dict[str, float]) -> np.ndarray:
    ctx = types.SimpleNamespace(embedder=Embedder(cosines), agent=types.SimpleNamespace(persona=types.SimpleNamespace(text="me")))
    return asyncio.run(rule.similarities(ctx, list(cosines)))


def test_calibrated_thresholds_take_the_share_of_posts_closest_to_the_persona():
    rule = SimilarityRule(SimilarityRuleConfig(thresholds="calibrated"))
    cosines = {f"post {i}": i / 100 for i in range(100)}  # 0.00 .. 0.99: a fixed 0.10 threshold would like 90
    sims = seen_by(rule, cosines)
    liked = [s for s in sims if rule.decides("like", float(s))]
    assert len(liked) == 30 and min(liked) >= 0.69  # like_share 0.3 of the posts seen, the closest ones
    assert sum(rule.decides("like", float(s), share=0.05) for s in sims) == 5  # the caller's share (a plan's)
    assert not any(rule.decides("reblog", float(s), share=0.0) for s in sims)
    assert rule.decides("follow", 0.25) and not rule.decides("follow", 0.15)  # follows stay fixed (0.20)
    # the distribution is kept in the state, and an older state (the vector alone) still reads
    state = rule.get_state()
    again = SimilarityRule(SimilarityRuleConfig(thresholds="calibrated"))
    again.set_state(state)
    assert again.threshold("like") == rule.threshold("like")
    again.set_state([1.0, 0.0])
    assert again.seen == [] and again.threshold("like") == float("inf")


def test_fixed_thresholds_are_the_baselines_and_it_refuses_calibrated_ones():
    from townsquare.plugins.baselines.embedding_baseline import EmbeddingBaselineConfig

    rule = SimilarityRule(SimilarityRuleConfig())
    seen_by(rule, {"a": 0.12, "b": 0.05})
    assert rule.decides("like", 0.12) and not rule.decides("like", 0.05) and rule.seen == []
    with pytest.raises(ValueError, match="the baseline decides by fixed thresholds"):
        EmbeddingBaselineConfig(thresholds="calibrated")
