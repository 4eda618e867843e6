"""validate's distances against a trace drawn from known distributions: a simulation drawn from
the same distributions lands within the trace's own split-half floor on every dimension, one
drawn from different distributions lands far above it on every dimension."""

from __future__ import annotations


import pytest

from validation_support import Population, draw
from townsquare.plugin_manager import make_plugin_manager
from townsquare.plugins.validation.scoring import score
from townsquare.plugins.validation.validate import dimensions_of

pytest.importorskip("powerlaw")

SAME = Population()
OTHER = Population(alpha=8.0, x_min=20.0, hours=tuple(1.0 + 4.0 * (h in (7, 8, 9)) for h in range(24)), weekdays=(1, 1, 1, 1, 1, 0.05, 0.05),
                   sessions=0.9, ratings=(0.02, 0.03, 0.1, 0.25, 0.6), zipf=0.0, offspring=1.6)


@pytest.fixture(scope="module")
def real():
    return draw("real", SAME, users=600, seed=1, cascades=300)


@pytest.fixture(scope="module")
def dimensions():
    return dimensions_of(make_plugin_manager(autoload=False))


def _score(real, dimensions, population, seeds):
    sims = [draw(f"sim{s}", population, users=150, seed=s, cascades=75) for s in seeds]
    return {r.name: r for r in score(real, sims, dimensions, splits=20, seed=3)}


@pytest.fixture(scope="module")
def same(real, dimensions):
    return _score(real, dimensions, SAME, seeds=(11, 12, 13))


def test_a_simulation_from_the_same_distributions_is_within_the_floor(same):
    results = same
    scored = {n: r for n, r in results.items() if r.skipped is None}
    # follows are not drawn: the two follow degrees are the only ones not shared
    assert set(results) - set(scored) == {"follower_degree", "following_degree"}
    beyond = {n: (round(r.distance, 4), [round(v, 4) for v in r.floor_range]) for n, r in scored.items() if not r.within_floor}
    assert beyond == {}
    for name in ("activity_per_user", "genre_entropy", "rating_distribution"):
        assert 0.5 < scored[name].variance_ratio < 2.0, name  # people and agents alike vary alike


def test_a_simulation_from_other_distributions_is_far_above_the_floor(real, dimensions):
    results = _score(real, dimensions, OTHER, seeds=(21, 22, 23))
    scored = {n: r for n, r in results.items() if r.skipped is None}
    near = {n: (round(r.distance, 4), round(r.floor_range[1], 4)) for n, r in scored.items() if not r.distance > 2 * r.floor_range[1]}
    assert near == {}
    assert scored["activity_per_user"].simulated > scored["activity_per_user"].real + 2  # drawn with alpha 8 against 1.2


def test_the_real_values_are_the_drawn_distributions(same):
    results = same
    assert results["activity_per_user"].real == pytest.approx(1.2, abs=0.15)  # Pareto alpha recovered by powerlaw
    assert results["rating_distribution"].real == pytest.approx(sum((k + 1) * p for k, p in enumerate(SAME.ratings)), abs=0.05)
    assert results["cascade_size"].real == pytest.approx(1 / (1 - SAME.offspring), rel=0.3)  # Galton-Watson mean size
