"""Chronological and random recommenders alone, and through the in-memory platform."""

from __future__ import annotations

import asyncio

import numpy as np

from townsquare.actions import Action
from townsquare.components import BuildContext
from townsquare.platform import PostView
from townsquare.platforms.in_memory import InMemoryPlatform
from townsquare.recommenders import chronological
from townsquare.recommenders import random as random
from townsquare.recommenders.chronological import Chronological
from townsquare.recommenders.random import RandomFeed


def posts(n: int) -> list[PostView]:
    # Newest first, as platforms hand them over.
    return [PostView(id=f"p{i}", author_id="x", text="t", round=0, created_at="") for i in range(n, 0, -1)]


def ids(views):
    return [v.id for v in views]


def test_chronological_keeps_order_and_cuts_to_limit():
    rec = Chronological()
    assert ids(rec.rank("v", posts(5), 3, None)) == ["p5", "p4", "p3"]
    assert ids(rec.rank("v", posts(2), 10, None)) == ["p2", "p1"]
    assert rec.rank("v", posts(5), 0, None) == []
    assert rec.rank("v", [], 5, None) == []


def test_random_feed_samples_without_replacement_deterministically():
    rec = RandomFeed()
    first = ids(rec.rank("v", posts(50), 10, np.random.default_rng(7)))
    again = ids(rec.rank("v", posts(50), 10, np.random.default_rng(7)))
    other = ids(rec.rank("v", posts(50), 10, np.random.default_rng(8)))
    assert first == again and first != other
    assert len(set(first)) == 10
    assert first == ["p" + str(50 - int(i)) for i in np.random.default_rng(7).choice(50, 10, replace=False)]
    assert sorted(ids(rec.rank("v", posts(3), 10, np.random.default_rng(0)))) == ["p1", "p2", "p3"]
    assert rec.rank("v", [], 10, np.random.default_rng(0)) == []


def test_random_feed_is_roughly_uniform():
    rec = RandomFeed()
    rng = np.random.default_rng(0)
    counts = {f"p{i}": 0 for i in range(1, 11)}
    for _ in range(2000):
        for view in rec.rank("v", posts(10), 2, rng):
            counts[view.id] += 1
    # 4000 picks over 10 posts: each near 400.
    assert all(330 < c < 470 for c in counts.values()), counts


def test_random_feed_on_lazy_platform_candidates():
    async def scenario():
        platform = InMemoryPlatform(recommender=RandomFeed())
        for agent in ("a", "b"):
            await platform.register_account(agent, agent, "")
        for i in range(40):
            await platform.apply(Action("b", "post", text=f"post {i}"), 0, "t")
        return [ids(await platform.home_timeline("a", limit=5, rng=np.random.default_rng(3))) for _ in range(2)]

    first, second = asyncio.run(scenario())
    assert first == second and len(set(first)) == 5
    expected = ["p" + str(40 - int(i)) for i in np.random.default_rng(3).choice(40, 5, replace=False)]
    assert first == expected


def test_state_round_trips_and_registration():
    for rec in (Chronological(), RandomFeed()):
        assert rec.get_state() == {}
        rec.set_state(rec.get_state())
    (chrono,) = chronological.townsquare_register_recommenders()
    (rand,) = random.townsquare_register_recommenders()
    assert (chrono.name, chrono.priority, rand.name, rand.priority) == ("chronological", 100, "random", 0)
    ctx = BuildContext(services=None, seed=0)
    assert isinstance(chrono.factory(None, ctx), Chronological)
    assert isinstance(rand.factory(None, ctx), RandomFeed)


def test_every_builtin_recommender_meets_the_protocol_it_declares(make_plugins):
    from townsquare.lib.items import ItemRecommender
    from townsquare.slots import SLOT_PROTOCOLS, missing_members

    registry = make_plugins().registry
    names = registry.names("recommender")
    assert {"chronological", "random", "mastodon_digest"} <= set(names)
    ctx = BuildContext(services=None, seed=0)
    for name in names:
        spec = registry.get("recommender", name)
        config = spec.config_model() if spec.config_model is not None else None
        built = spec.factory(config, ctx)
        assert missing_members(built, spec.protocol or SLOT_PROTOCOLS["recommender"]) == [], name
        assert (spec.protocol is ItemRecommender) == name.startswith("item_"), name
