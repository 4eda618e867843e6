"""Random item recommender: a uniform sample of the catalogue (Wang et al., "Recommendation
Algorithm": random recommendations give uniform data for unbiased-recommendation studies).
For the recommender-system platform ``recsys``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from townsquare.api import BuildContext, RecommenderSpec, hookimpl
from townsquare.lib.items import Item, ItemInteractions, ItemRecommender


class ItemRandom:
    """Samples ``limit`` candidates without replacement with the viewer's generator."""

    def rank_items(self, viewer: str, candidates: Sequence[Item], limit: int, rng: Any,
                   interactions: ItemInteractions) -> list[Item]:
        size = min(limit, len(candidates))
        if size <= 0:
            return []
        rng = rng if rng is not None else np.random.default_rng(0)
        return [candidates[int(i)] for i in rng.choice(len(candidates), size=size, replace=False)]

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_item_random(config: None, ctx: BuildContext) -> ItemRandom:
    return ItemRandom()


@hookimpl
def townsquare_register_recommenders():
    return [RecommenderSpec("item_random", build_item_random, protocol=ItemRecommender, priority=-10,
                            description="recsys items: a uniform random sample of the catalogue")]
