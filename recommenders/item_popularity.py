"""Popularity item recommender for the recommender-system platform ``recsys``.

An item's score is its watches in the simulation plus ``prior_weight`` times how often it was
rated in the source data (``Item.prior_count``, e.g. MovieLens ratings); ties go to the lower
catalogue position, so the ranking is deterministic. Items the viewer has already been shown
``max_shown`` times drop to the end, so repeated visits see new items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, RecommenderSpec, hookimpl
from townsquare.lib.items import Item, ItemInteractions, ItemRecommender


class ItemPopularityConfig(BaseModel):
    """``[plugins.item_popularity]`` settings."""

    model_config = ConfigDict(extra="forbid")

    prior_weight: float = Field(1.0, ge=0, description="weight of the source data's rating counts")
    max_shown: int = Field(3, ge=1, description="after this many showings an item goes to the end for that viewer")


class ItemPopularity:
    def __init__(self, config: ItemPopularityConfig | None = None):
        self.config = config or ItemPopularityConfig()

    def score(self, item: Item, interactions: ItemInteractions) -> float:
        return interactions.watch_counts.get(item.id, 0) + self.config.prior_weight * item.prior_count

    def rank_items(self, viewer: str, candidates: Sequence[Item], limit: int, rng: Any,
                   interactions: ItemInteractions) -> list[Item]:
        shown = interactions.shown.get(viewer, {})
        order = sorted(range(len(candidates)), key=lambda i: (
            shown.get(candidates[i].id, 0) >= self.config.max_shown, -self.score(candidates[i], interactions), i))
        return [candidates[i] for i in order[:max(0, limit)]]

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_item_popularity(config: ItemPopularityConfig | None, ctx: BuildContext) -> ItemPopularity:
    return ItemPopularity(config)


@hookimpl
def townsquare_register_recommenders():
    return [RecommenderSpec("item_popularity", build_item_popularity, config_model=ItemPopularityConfig, priority=-10,
                            protocol=ItemRecommender,
                            description="recsys items: most watched (plus the data's rating counts) first")]
