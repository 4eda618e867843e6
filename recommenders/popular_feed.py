"""Popularity feed for the social platform: the most engaged-with posts first.

score = likes + reblogs + replies (counts taken when the platform builds the candidate
views); ties keep the platform's newest-first order. Every candidate in the platform's
window is scored; the top ``limit`` are kept.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from townsquare.api import PostView, RecommenderSpec, hookimpl


class PopularFeed:
    def rank(self, viewer: str, candidates: Sequence[PostView], limit: int, rng: Any) -> list[PostView]:
        if limit <= 0:
            return []
        scored = ((-(p.likes + p.reblogs + p.replies), k, p) for k, p in enumerate(candidates))
        return [p for _, _, p in heapq.nsmallest(limit, scored, key=lambda t: (t[0], t[1]))]

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


@hookimpl
def townsquare_register_recommenders():
    return [RecommenderSpec("popular_feed", lambda config, ctx: PopularFeed(),
                            description="most likes + reblogs + replies first, then newest")]
