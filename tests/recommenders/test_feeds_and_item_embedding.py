"""Popularity and embedding feeds (social platform) and the content-embedding item recommender."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import numpy as np

from townsquare.api import EmbeddingCache, PostView
from townsquare.lib.items import ItemInteractions
from townsquare.platforms.recsys.catalogue import synthetic_catalogue
from townsquare.plugins.embedders.hash import HashEmbedder, HashEmbedderConfig
from townsquare.recommenders.embedding_feed import EmbeddingFeed
from townsquare.recommenders.item_embedding import ItemEmbedding
from townsquare.recommenders.popular_feed import PopularFeed


def post(i, author="x", text="t", likes=0, reblogs=0, replies=0):
    return PostView(id=f"p{i}", author_id=author, text=text, round=0, created_at="", likes=likes, reblogs=reblogs, replies=replies)


def test_popular_feed_ranks_by_engagement_then_recency():
    feed = [post(5), post(4, likes=2), post(3, likes=1, replies=3), post(2), post(1, reblogs=2)]
    assert [p.id for p in PopularFeed().rank("v", feed, 4, None)] == ["p3", "p4", "p1", "p5"]
    assert PopularFeed().rank("v", feed, 0, None) == []


class Timeline:
    def __init__(self, posts):
        self.posts = posts

    async def public_timeline(self, limit):
        return self.posts[:limit]


def test_embedding_feed_puts_posts_like_the_viewers_own_first():
    posts = [post(4, "bob", "football match tonight stadium"), post(3, "ann", "baking sourdough bread flour"),
             post(2, "bob", "football league goals"), post(1, "ann", "sourdough starter bread recipe")]
    services = SimpleNamespace(platform=Timeline(posts), embedder=EmbeddingCache(HashEmbedder(HashEmbedderConfig())))
    feed = EmbeddingFeed(None, services)
    asyncio.run(feed.on_round_start(0, None))
    candidates = [post(9, "cy", "new sourdough bread loaf"), post(8, "cy", "football goals again"), posts[0], posts[1]]
    assert [p.id for p in feed.rank("ann", candidates, 2, None)] == ["p3", "p9"]
    assert [p.id for p in feed.rank("bob", candidates, 1, None)] == ["p4"]
    # a viewer with no post of its own gets the platform's order
    assert [p.id for p in feed.rank("cy", candidates, 3, None)] == ["p9", "p8", "p4"]


def test_item_embedding_follows_watches_then_persona():
    catalogue = synthetic_catalogue(40)
    comedy = next(i for i in catalogue.items if i.genres == ("Comedy",))
    members = {"a": SimpleNamespace(persona=SimpleNamespace(text="I love documentary films about nature")), "b": SimpleNamespace(persona=SimpleNamespace(text="x"))}
    services = SimpleNamespace(platform=SimpleNamespace(catalogue=catalogue, members=members),
                               embedder=EmbeddingCache(HashEmbedder(HashEmbedderConfig())))
    rec = ItemEmbedding(None, services)
    asyncio.run(rec.on_round_start(0, None))
    log = ItemInteractions()
    top = rec.rank_items("a", catalogue.items, 5, np.random.default_rng(0), log)
    assert sum("Documentary" in i.genres for i in top) >= 4
    log.record_watch("a", comedy.id, 8)
    candidates = [i for i in catalogue.items if i.id != comedy.id]
    top = rec.rank_items("a", candidates, 3, np.random.default_rng(0), log)
    assert all("Comedy" in i.genres for i in top)


def test_feeds_run_on_the_social_platform(run_scenario):
    from pathlib import Path

    baseline = Path(__file__).resolve().parents[2] / "examples" / "baseline.toml"
    for name in ("popular_feed", "embedding_feed"):
        _, summary = run_scenario(baseline, overrides=[f"recommender.name={name}", "rounds=4", "populations.0.count=16"])
        assert summary.rounds_completed == 4 and summary.counts.get("browse", 0) > 0
