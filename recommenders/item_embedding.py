"""Content-embedding item recommender for ``recsys`` (DESIGN.md §4: "content embedding").

Each item's text (``Item.line()``: title, genres, description) is embedded with the run's
embedder; a viewer's profile is the normalised mean of the vectors of the items it watched
or, before its first watch, the embedding of its persona text; candidates are ranked by cosine
to the profile. Items shown to the viewer ``max_shown`` times go to the end, and ties (a viewer
with neither watches nor a persona) are broken at random with the viewer's generator.

Ranking is synchronous and embedding is not, so the vectors are computed at the start of each
round (``on_round_start``): the whole catalogue once, the personas of agents that joined since.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, RecommenderSpec, hookimpl, normalize_rows
from townsquare.lib.items import Item, ItemInteractions, ItemRecommender

from .item_ranking import order_items


class ItemEmbeddingConfig(BaseModel):
    """``[plugins.item_embedding]`` settings."""

    model_config = ConfigDict(extra="forbid")

    max_shown: int = Field(3, ge=1, description="after this many showings an item goes to the end for that viewer")


class ItemEmbedding:
    def __init__(self, config: ItemEmbeddingConfig | None, services: Any):
        self.config = config or ItemEmbeddingConfig()
        self.services = services
        self.index: dict[str, int] = {}
        self.vectors = np.zeros((0, 0), dtype=np.float32)
        self.personas: dict[str, np.ndarray] = {}

    async def on_round_start(self, round: int, now: datetime) -> None:
        platform = getattr(self.services, "platform", None)
        embedder = getattr(self.services, "embedder", None)
        if platform is None or embedder is None:
            return
        items = getattr(getattr(platform, "catalogue", None), "items", ())
        if len(self.index) != len(items):
            self.vectors = await embedder.embed([item.line() for item in items])
            self.index = {item.id: k for k, item in enumerate(items)}
        members = getattr(platform, "members", {})
        new = [a for a in members if a not in self.personas]
        if new:
            vectors = await embedder.embed([members[a].persona.text for a in new])
            self.personas.update(zip(new, vectors))

    def profile(self, viewer: str, interactions: ItemInteractions) -> np.ndarray | None:
        rows = [self.index[i] for i in interactions.watched.get(viewer, ()) if i in self.index]
        if rows:
            return normalize_rows(self.vectors[rows].mean(axis=0, keepdims=True))[0]
        return self.personas.get(viewer)

    def rank_items(self, viewer: str, candidates: Sequence[Item], limit: int, rng: Any,
                   interactions: ItemInteractions) -> list[Item]:
        if limit <= 0 or not candidates:
            return []
        profile = self.profile(viewer, interactions)
        rows = np.fromiter((self.index.get(item.id, -1) for item in candidates), dtype=np.int64, count=len(candidates))
        score = np.zeros(len(candidates))
        if profile is not None and len(self.index):
            known = rows >= 0
            score[known] = np.round(self.vectors[rows[known]] @ profile, 6)
        return order_items(viewer, candidates, score, limit, rng, interactions, self.config.max_shown)

    def get_state(self) -> dict[str, Any]:
        return {}  # vectors are recomputed from the catalogue and personas at the next round start

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_item_embedding(config: ItemEmbeddingConfig | None, ctx: BuildContext) -> ItemEmbedding:
    return ItemEmbedding(config, ctx.services)


@hookimpl
def townsquare_register_recommenders():
    return [RecommenderSpec("item_embedding", build_item_embedding, config_model=ItemEmbeddingConfig, priority=-10,
                            protocol=ItemRecommender,
                            description="recsys items: closest to what the viewer watched (or its persona), by text embedding")]
