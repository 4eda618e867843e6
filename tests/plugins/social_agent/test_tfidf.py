"""TF-IDF cosine (Zhou et al. §3.1.1, §3.1.4) with numbers worked by hand."""

from __future__ import annotations

import math

import pytest

from townsquare.plugins.social_agent.tfidf import max_tfidf_cosine, tfidf_cosine, tfidf_vectors, tokenize


def test_tokenize_drops_single_characters():
    assert tokenize("I love a Dog, dogs & cats!") == ["love", "dog", "dogs", "cats"]


def test_pair_cosine_by_hand():
    # "cat dog" vs "cat fish": n = 2; idf(cat) = ln(3/3) + 1 = 1; idf(dog) = idf(fish) = ln(3/2) + 1
    w = math.log(1.5) + 1
    expected = 1 / (1 + w * w)  # (1*1) / (|(1,w)| * |(1,w)|)
    assert tfidf_cosine("cat dog", "cat fish") == pytest.approx(expected)
    assert expected == pytest.approx(0.3361, abs=1e-4)


def test_identical_and_disjoint():
    assert tfidf_cosine("the dog runs", "the dog runs") == pytest.approx(1.0)
    assert tfidf_cosine("mountain hiking", "tax returns") == 0.0
    assert tfidf_cosine("", "anything") == 0.0


def test_term_frequency_counts():
    a, b = tfidf_vectors(["dog dog cat", "cat"])
    w = math.log(3 / 2) + 1
    norm = math.sqrt((2 * w) ** 2 + 1)
    assert a["dog"] == pytest.approx(2 * w / norm) and a["cat"] == pytest.approx(1 / norm)
    assert b == {"cat": pytest.approx(1.0)}


def test_max_over_earlier_posts():
    earlier = ["Sunrise hike up the ridge today", "Baked sourdough bread this morning"]
    assert max_tfidf_cosine("Another sunrise hike up the ridge", earlier) > 0.6
    assert max_tfidf_cosine("Tax season is here", earlier) == 0.0
    assert max_tfidf_cosine("anything", []) == 0.0
