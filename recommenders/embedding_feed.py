"""Content-embedding feed for the social platform: posts like the viewer's own first.

A viewer's profile is the normalised mean embedding (the run's embedder) of the posts it wrote;
candidates are ranked by cosine to it. Ranking is synchronous and embedding is not, so at the
start of each round the newest ``window`` public posts are embedded (a text is embedded once:
the run's embedding cache); a post written since, or a viewer with no post yet, scores 0 and
keeps the platform's newest-first order among equals.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, PostView, RecommenderSpec, hookimpl, normalize_rows


class EmbeddingFeedConfig(BaseModel):
    """``[plugins.embedding_feed]`` settings."""

    model_config = ConfigDict(extra="forbid")

    window: int = Field(2000, gt=0, description="newest public posts embedded each round")


class EmbeddingFeed:
    def __init__(self, config: EmbeddingFeedConfig | None, services: Any):
        self.config = config or EmbeddingFeedConfig()
        self.services = services
        self.vectors: dict[str, np.ndarray] = {}
        self.profiles: dict[str, np.ndarray] = {}

    async def on_round_start(self, round: int, now: datetime) -> None:
        platform = getattr(self.services, "platform", None)
        embedder = getattr(self.services, "embedder", None)
        if platform is None or embedder is None:
            return
        posts = await platform.public_timeline(self.config.window)
        fresh = [p for p in posts if p.id not in self.vectors]
        if fresh:
            self.vectors.update(zip((p.id for p in fresh), await embedder.embed([p.text for p in fresh])))
        own: dict[str, list[np.ndarray]] = {}
        for post in posts:
            own.setdefault(post.author_id, []).append(self.vectors[post.id])
        self.profiles = {a: normalize_rows(np.mean(v, axis=0, keepdims=True))[0] for a, v in own.items()}

    def rank(self, viewer: str, candidates: Sequence[PostView], limit: int, rng: Any) -> list[PostView]:
        if limit <= 0:
            return []
        posts = list(candidates)
        profile = self.profiles.get(viewer)
        score = np.zeros(len(posts))
        if profile is not None:
            for k, post in enumerate(posts):
                vector = self.vectors.get(post.id)
                if vector is not None:
                    score[k] = round(float(vector @ profile), 6)
        order = np.lexsort((np.arange(len(posts)), -score))
        return [posts[int(i)] for i in order[:limit]]

    def get_state(self) -> dict[str, Any]:
        return {}  # rebuilt from the platform's posts at the next round start

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_embedding_feed(config: EmbeddingFeedConfig | None, ctx: BuildContext) -> EmbeddingFeed:
    return EmbeddingFeed(config, ctx.services)


@hookimpl
def townsquare_register_recommenders():
    return [RecommenderSpec("embedding_feed", build_embedding_feed, config_model=EmbeddingFeedConfig,
                            description="posts closest to what the viewer wrote (text embedding), then newest")]
