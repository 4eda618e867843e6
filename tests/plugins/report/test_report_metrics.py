"""The report's numbers, each checked by hand: distinct-n, follower replay, persona similarity."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from townsquare.plugins.report import tables
from townsquare.plugins.report.similarity import compare
from townsquare.plugins.report.text_metrics import distinct_n, distinct_percent, tokenize
from townsquare.store import EventStore

# --------------------------------------------------------------------------- distinct-n


def test_tokenize_lowercases_and_splits_punctuation():
    assert tokenize("Hiking, hiking!  Don't") == ["hiking", ",", "hiking", "!", "don", "'", "t"]


def test_distinct_n_one_text():
    # a b a b: 4 tokens; unigrams a,b -> 2 distinct; bigrams ab,ba,ab -> 2 distinct of 3
    assert distinct_n(["a b a b"], 1) == pytest.approx(2 / 4)
    assert distinct_n(["a b a b"], 2) == pytest.approx(2 / 4)  # Li et al.: per token
    assert distinct_n(["a b a b"], 2, per="ngram") == pytest.approx(2 / 3)


def test_distinct_n_does_not_cross_texts():
    # "a b" | "b a": bigrams (a,b) and (b,a) only; crossing would add (b,b) and make 3 of 3
    assert distinct_n(["a b", "b a"], 2, per="ngram") == pytest.approx(2 / 2)
    assert distinct_n(["a b", "b a"], 2) == pytest.approx(2 / 4)
    assert distinct_n(["a b", "b a"], 1) == pytest.approx(2 / 4)


def test_distinct_percent_like_the_paper():
    # i like cats . | i like dogs .  -> 8 tokens, 5 distinct unigrams; 6 bigrams, 5 distinct
    assert distinct_percent(["I like cats.", "I like dogs."]) == {"distinct-1": 62.5, "distinct-2": 62.5}
    assert distinct_percent(["I like cats.", "I like dogs."], per="ngram") == {"distinct-1": 62.5, "distinct-2": 83.33}


def test_distinct_n_empty_and_short():
    assert distinct_n([], 1) is None
    assert distinct_n(["one", "two"], 2) == 0.0 and distinct_n(["one", "two"], 2, per="ngram") is None
    assert distinct_percent([]) == {"distinct-1": None, "distinct-2": None}
    with pytest.raises(ValueError):
        distinct_n(["a"], 0)
    with pytest.raises(ValueError):
        distinct_n(["a"], 1, per="word")


# --------------------------------------------------------------------------- followers


def test_follower_counts_replay_follows_and_unfollows(tmp_path):
    store = EventStore(tmp_path / "events.sqlite")
    for row in [(0, "t", "a", "b", "follow"), (0, "t", "c", "b", "follow"), (1, "t", "a", "b", "unfollow"),
                (1, "t", "a", "c", "follow"), (2, "t", "b", "c", "follow"), (2, "t", "b", "c", "follow")]:
        store.buffer("follows", row)
    store.commit_round((0, "t", 0, 0, 0, 0.0))
    store.close()
    db = sqlite3.connect(tmp_path / "events.sqlite")
    # b: c (a unfollowed); c: a and b (b's second follow is the same edge); a: nobody; d: nobody
    assert tables.follower_counts(db, ["a", "b", "c", "d"]) == {"a": 0, "b": 1, "c": 2, "d": 0}


# --------------------------------------------------------------------------- persona similarity

VECTORS = {
    "P": (1.0, 0.0), "Q": (0.0, 1.0),  # personas of a1, a2
    "A": (1.0, 0.0), "B": (0.0, 1.0), "C": (0.6, 0.8),  # other agents' posts
    "mine": (0.8, 0.6),  # a1's own post
}


def fake_embed(texts):
    return np.asarray([VECTORS[t] for t in texts], dtype=np.float32)


def test_similarity_by_hand():
    posts = {"pa": ("x", "A"), "pb": ("x", "B"), "pc": ("y", "C"), "own": ("a1", "mine")}
    engagement = {
        # a1 (persona P) saw A, B, C and its own post; liked A, commented C
        "a1": {"browse": {"pa", "pb", "pc", "own"}, "like": {"pa"}, "reblog": set(), "comment": {"pc"}},
        # a2 (persona Q) saw A and B; liked and reblogged B
        "a2": {"browse": {"pa", "pb"}, "like": {"pb"}, "reblog": {"pb"}, "comment": set()},
    }
    result = compare({"a1": "P", "a2": "Q"}, engagement, posts, {"a1": ["mine"]}, fake_embed, "fake")
    rows = {r.action: r for r in result.rows}
    # like: a1 1.0, a2 1.0 | not like: a1 mean(B 0, C 0.6) = 0.3, a2 A 0 -> 0.15
    assert rows["like"].acted == pytest.approx(1.0) and rows["like"].not_acted == pytest.approx(0.15)
    assert rows["like"].delta == pytest.approx(0.85)
    assert (rows["like"].posts_acted, rows["like"].posts_not) == (2, 3)
    # reblog: only a2 (1.0) | not reblog: a1 mean(1, 0, 0.6) = 0.5333, a2 A 0 -> 0.2667
    assert rows["reblog"].acted == pytest.approx(1.0) and rows["reblog"].agents_acted == 1
    assert rows["reblog"].not_acted == pytest.approx((1.6 / 3) / 2)
    # comment: a1 C 0.6 | not comment: a1 mean(A 1, B 0) 0.5, a2 mean(A 0, B 1) 0.5
    assert rows["comment"].acted == pytest.approx(0.6) and rows["comment"].not_acted == pytest.approx(0.5)
    # engaged: a1 mean(A, C) 0.8, a2 B 1.0 -> 0.9 | browsed only: a1 B 0, a2 A 0 -> 0
    assert rows["engaged"].acted == pytest.approx(0.9) and rows["engaged"].not_acted == pytest.approx(0.0)
    assert rows["engaged"].delta == pytest.approx(0.9)
    # own post: a1's persona against "mine" = 0.8; its own post never counts as browsed
    assert result.post_mean == pytest.approx(0.8) and (result.post_agents, result.posts) == (1, 1)
    assert result.per_agent["a1"] == pytest.approx((0.8, 0.0))


def test_similarity_with_nothing_browsed():
    result = compare({"a1": "P"}, {}, {}, {}, fake_embed)
    assert all(r.acted is None and r.not_acted is None and r.delta is None for r in result.rows)
    assert result.post_mean is None
