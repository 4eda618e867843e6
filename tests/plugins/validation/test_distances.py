"""The distances and per-dimension formulas, checked with numbers: KS and Jensen-Shannon against
scipy, normalised RMSE, relative error, the Gini coefficient, burstiness, structural virality,
the Pareto fit, rating scales and the spread of a run's events over its rounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from townsquare.lib.validation import Cascade, Measurement, Trace
from townsquare.plugins.validation.dimensions.activity_per_user import pareto_fit, shape_sample
from townsquare.plugins.validation.dimensions.inter_event_times import burstiness
from townsquare.plugins.validation.dimensions.popularity_concentration import gini
from townsquare.plugins.validation.dimensions.rating_distribution import on_scale
from townsquare.plugins.validation.dimensions.time_of_day import TimeOfDay
from townsquare.plugins.validation.distances import distance, js_divergence, ks_statistic, nrmse, relative_error

scipy_stats = pytest.importorskip("scipy.stats")


def test_ks_is_scipys_two_sample_statistic():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=300), rng.normal(0.3, 1.2, size=170)
    assert ks_statistic(a, b) == pytest.approx(scipy_stats.ks_2samp(a, b).statistic)
    ties = np.array([1, 1, 2, 2, 2, 5]), np.array([1, 2, 2, 3])
    assert ks_statistic(*ties) == pytest.approx(scipy_stats.ks_2samp(*ties).statistic)
    assert ks_statistic(a, a) == 0 and ks_statistic([0, 1], [5, 6]) == 1 and math.isnan(ks_statistic([], [1]))


def test_js_is_scipys_divergence_in_bits():
    from scipy.spatial.distance import jensenshannon

    p, q = np.array([10, 20, 30, 0]), np.array([5, 5, 5, 5])
    assert js_divergence(p, q) == pytest.approx(jensenshannon(p, q, base=2) ** 2)
    assert js_divergence(p, p * 3) == pytest.approx(0) and js_divergence([1, 0], [0, 1]) == pytest.approx(1)


def test_nrmse_relative_error_and_gini_by_hand():
    assert nrmse([0, 2, 4], [1, 2, 3]) == pytest.approx(math.sqrt(2 / 3) / 4)
    assert math.isnan(nrmse([3, 3], [1, 2])) and relative_error(4, 5) == 0.25 and math.isnan(relative_error(0, 1))
    assert gini([5, 5, 5, 5]) == 0 and gini([0, 0, 0, 8]) == pytest.approx(0.75)  # (n - 1) / n for one holder of all
    assert gini([1, 2, 3, 4]) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="unknown distance"):
        distance("emd", Measurement(1.0), Measurement(2.0))


def test_burstiness_is_minus_one_for_a_clock_and_near_zero_for_poisson():
    assert burstiness(np.full(50, 60.0)) == -1
    assert burstiness(np.random.default_rng(1).exponential(60, 20000)) == pytest.approx(0, abs=0.02)


def test_the_pareto_fit_recovers_alpha_and_the_shape_ignores_scale():
    u = np.random.default_rng(2).random(4000)
    alpha, fit_ks, x_min = pareto_fit(10 * (1 - u) ** (-1 / 1.5))
    assert alpha == pytest.approx(1.5, abs=0.08) and fit_ks < 0.05 and x_min == pytest.approx(10 * 0.95 ** (-1 / 1.5), rel=0.02)
    counts = np.floor(50 * (1 - u[:500]) ** (-1 / 1.5))
    assert ks_statistic(shape_sample(counts), shape_sample(counts * 10)) < 0.05  # ten times the volume, the same shape
    assert math.isnan(pareto_fit(np.array([3.0, 3.0, 3.0]))[0])
    assert pareto_fit(np.r_[1.0, np.full(99, 40.0) + np.arange(99)])[2] > 1  # one user with one event does not set x_min


def test_ratings_go_onto_the_traces_scale_by_equal_bins():
    assert on_scale(np.arange(1.0, 11.0), (1, 10), (1, 5)).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert on_scale(np.array([0.5, 3.0, 5.0]), (0.5, 5.0), (0.5, 5.0)).tolist() == [0, 5, 9]


def test_a_runs_events_are_spread_over_their_round():
    run = Trace.from_events("run", [("a", 8 * 3600.0, "rate", "1", 5.0)], resolution=5 * 3600.0)
    hours = TimeOfDay("hour").measure(run, run).histogram
    assert hours[8:13].tolist() == pytest.approx([0.2] * 5) and hours.sum() == pytest.approx(1)
    exact = Trace.from_events("real", [("a", 8 * 3600.0 + 60, "rate", "1", 5.0)])
    assert TimeOfDay("hour").measure(exact, exact).histogram[8] == 1
    days = TimeOfDay("day").measure(exact, exact)
    assert days.bins[int(days.details["peak"])] == "Thu"  # 1 January 1970


def test_cascades_know_their_depths():
    tree = Cascade("c", ["a", "b", "c", "d"], np.zeros(4), np.array([-1, 0, 1, 1]))
    assert tree.depths().tolist() == [0, 1, 2, 2] and tree.size == 4
