"""The mastodon_digest recommender (Zhou §3.2.2, eq. 1) alone and on the in-memory platform."""

from __future__ import annotations

import asyncio
import math

import pytest

from townsquare.actions import Action
from townsquare.platform import PostView
from townsquare.platforms.in_memory import InMemoryPlatform
from townsquare.recommenders import mastodon_digest
from townsquare.recommenders.mastodon_digest import MastodonDigest, MastodonDigestConfig, digest_score


def view(i, likes=0, reblogs=0, replies=0, followers=0):
    return PostView(id=f"p{i}", author_id="x", text="t", round=i, created_at="", likes=likes, reblogs=reblogs,
                    replies=replies, author_followers=followers)


def test_eq1_with_numbers():
    assert digest_score(8, 1, 1, 4) == pytest.approx(1.0)  # cbrt(8) / sqrt(4) = 2 / 2
    assert digest_score(27, 1, 1, 9) == pytest.approx(1.0)
    assert digest_score(2, 4, 1, 1) == pytest.approx(2.0)
    assert digest_score(0, 5, 5, 1) == 0.0  # any zero count zeroes eq. 1
    assert digest_score(8, 1, 1, 0) == 0.0  # zero followers: 0, as Mastodon Digest does


def test_smoothed_variant_with_numbers():
    assert digest_score(8, 1, 1, 4, smoothing=True) == pytest.approx(math.cbrt(36) / math.sqrt(5))  # 1.4767
    assert round(digest_score(8, 1, 1, 4, smoothing=True), 4) == 1.4767
    assert digest_score(0, 0, 0, 0, smoothing=True) == pytest.approx(1.0)
    assert digest_score(7, 0, 0, 3, smoothing=True) == pytest.approx(1.0)  # cbrt(8) / sqrt(4)


def ids(posts):
    return [p.id for p in posts]


def test_ranking_with_recency_tie_break():
    # newest first, as platforms hand candidates over
    candidates = [view(6), view(5, 8, 1, 1, 4), view(4, 1, 1, 1, 1), view(3), view(2, 27, 1, 1, 1), view(1, 5, 5, 0, 1)]
    rec = MastodonDigest()
    # scores: p5 1.0, p4 1.0, p2 3.0; p6, p3, p1 score 0 and keep newest-first order
    assert ids(rec.rank("v", candidates, 10, None)) == ["p2", "p5", "p4", "p6", "p3", "p1"]
    assert ids(rec.rank("v", candidates, 2, None)) == ["p2", "p5"]
    assert rec.rank("v", candidates, 0, None) == [] and rec.rank("v", [], 5, None) == []
    smoothed = MastodonDigest(MastodonDigestConfig(smoothing=True))
    # smoothed: p1 = cbrt(6*6*1)/sqrt(2) = 2.3245 > p5 1.4767 > p4 = cbrt(8)/sqrt(2) = 1.4142 > zero-count posts
    assert ids(smoothed.rank("v", candidates, 10, None)) == ["p2", "p1", "p5", "p4", "p6", "p3"]
    assert ids(rec.rank("v", [view(i) for i in range(9, 0, -1)], 3, None)) == ["p9", "p8", "p7"]  # no engagement: chronological


def test_on_the_in_memory_platform():
    async def scenario():
        platform = InMemoryPlatform(recommender=MastodonDigest())
        for agent in ("viewer", "a", "b", "c", "d"):
            await platform.register_account(agent, agent, "")
        for i in range(6):
            await platform.apply(Action("a" if i % 2 else "b", "post", text=f"post {i}"), 0, "t")
        # p2 by a: 2 likes, 1 reblog, 1 comment; author a has 1 follower
        for who in ("c", "d"):
            await platform.apply(Action(who, "like", target_post="p2"), 1, "t")
        await platform.apply(Action("c", "reblog", target_post="p2"), 1, "t")
        await platform.apply(Action("d", "comment", target_post="p2", text="nice"), 1, "t")
        await platform.apply(Action("c", "follow", target_agent="a"), 1, "t")
        first = ids(await platform.home_timeline("viewer", 4))
        await platform.apply(Action("viewer", "browse", post_ids=tuple(first)), 2, "t")
        second = ids(await platform.home_timeline("viewer", 4))
        return first, second

    first, second = asyncio.run(scenario())
    # p2 scores cbrt(2*1*1)/1; the rest tie at 0 and come newest first (p7 is d's comment)
    assert first == ["p2", "p7", "p6", "p5"]
    assert second == ["p4", "p3", "p1"]  # read posts are gone


def test_registration_and_state():
    (spec,) = mastodon_digest.townsquare_register_recommenders()
    assert (spec.name, spec.slot, spec.config_model) == ("mastodon_digest", "recommender", MastodonDigestConfig)
    rec = spec.factory(MastodonDigestConfig(smoothing=True), None)
    assert rec.config.smoothing and rec.get_state() == {}
    rec.set_state({})
