"""Random feed: a uniform sample of the candidates, a baseline against ranked feeds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from townsquare.api import PostView, RecommenderSpec, hookimpl


class RandomFeed:
    """Samples ``limit`` candidates without replacement, in sampled order.

    The draw uses the viewer's generator, so a seed fixes every feed whatever order agents
    read in.
    """

    def rank(self, viewer: str, candidates: Sequence[PostView], limit: int, rng: Any) -> list[PostView]:
        count = len(candidates)
        size = min(limit, count)
        if size <= 0:
            return []
        if rng is None:
            rng = np.random.default_rng(0)
        picks = rng.choice(count, size=size, replace=False)
        return [candidates[int(i)] for i in picks]

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_random_feed(config: None, ctx: Any) -> RandomFeed:
    return RandomFeed()


@hookimpl
def townsquare_register_recommenders():
    return [RecommenderSpec("random", build_random_feed, description="uniform random sample of the candidates")]
