"""Pareto activity levels (RecAgent eq. 1; Zhou et al. eq. 2, alpha = 2) with numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from townsquare.activity import active_agents, active_probabilities, pareto_inverse_cdf, sample_activity


def test_inverse_cdf_numbers():
    # F(x) = 1 - (x_min / x)^alpha; alpha 2, x_min 1: F(2) = 0.75, so the 0.75 quantile is 2.
    assert pareto_inverse_cdf(0.75, 2.0, 1.0) == pytest.approx(2.0)
    assert pareto_inverse_cdf(0.0, 2.0, 3.0) == pytest.approx(3.0)  # the minimum is x_min
    assert pareto_inverse_cdf(0.5, 2.0, 1.0) == pytest.approx(math.sqrt(2))  # the median
    assert pareto_inverse_cdf(0.99, 1.0, 1.0) == pytest.approx(100.0)


def test_sample_matches_the_density():
    levels = sample_activity(np.random.default_rng(0), 200_000, alpha=2.0, x_min=1.0)
    assert levels.min() >= 1.0
    assert np.median(levels) == pytest.approx(math.sqrt(2), rel=0.01)
    # P(X > 4) = (1/4)^2 = 0.0625: the long tail
    assert (levels > 4).mean() == pytest.approx(0.0625, rel=0.05)
    # density check on a bin: P(1.5 < X < 2) = (1/1.5)^2 - (1/2)^2
    assert ((levels > 1.5) & (levels < 2)).mean() == pytest.approx(1 / 2.25 - 0.25, rel=0.03)


def test_same_rng_same_levels():
    a = sample_activity(np.random.default_rng(5), 10, 2.0, 1.0)
    b = sample_activity(np.random.default_rng(5), 10, 2.0, 1.0)
    assert np.array_equal(a, b)


def test_active_probability_per_round():
    # one session a day, one-hour rounds: 1 - exp(-1/24); 24 a day: 1 - exp(-1); always: 1
    p = active_probabilities([1.0, 24.0, math.inf], 60)
    assert p.tolist() == pytest.approx([1 - math.exp(-1 / 24), 1 - math.exp(-1), 1.0])
    assert active_agents(np.array([0.03, 0.7, 0.999]), p).tolist() == [True, False, True]


def test_an_hourly_profile_weighs_each_round_by_its_hours():
    from datetime import datetime

    from townsquare.activity import hour_weight

    evening = [0.0] * 18 + [4.0] * 6  # active only from 18:00, four times the mean there
    assert hour_weight(None, datetime(2024, 1, 1, 8), 60) == 1.0
    assert hour_weight(evening, datetime(2024, 1, 1, 8), 60) == 0.0
    assert hour_weight(evening, datetime(2024, 1, 1, 19), 60) == 4.0
    assert hour_weight(evening, datetime(2024, 1, 1, 17, 30), 60) == pytest.approx(2.0)  # half an hour of each
    assert hour_weight(evening, datetime(2024, 1, 1, 22), 300) == pytest.approx(4.0 * 2 / 5)  # 22-24h, then the night
    assert hour_weight([1.0] * 24, datetime(2024, 1, 1, 3), 1440) == pytest.approx(1.0)


def test_agents_act_only_in_the_hours_the_profile_opens(write_scenario, run_scenario, make_plugins):
    from helpers import read_table, scenario_text

    hourly = "[" + ", ".join(["0.0"] * 12 + ["1.0"] * 12) + "]"  # from noon on
    text = scenario_text(rounds=8, count=3, extra="[clock]\nstart = 2024-01-01T08:00:00\nminutes_per_round = 60\n").replace(
        '[activity]\nmodel = "always"\n', f'[activity]\nalpha = 2.0\nx_min = 40.0\nhourly = {hourly}\n')
    run_dir, _ = run_scenario(write_scenario(text), plugins=make_plugins())
    active = {row[0]: row[2] for row in read_table(run_dir.path, "rounds")}
    assert [active[r] for r in range(4)] == [0, 0, 0, 0]  # 8:00-11:59
    assert sum(active[r] for r in range(4, 8)) > 0  # with 40 sessions a day or more, someone comes at noon


def test_an_hourly_profile_must_have_24_non_negative_weights():
    from townsquare.scenario import ActivityConfig

    with pytest.raises(ValueError, match="at least 24 items"):
        ActivityConfig(hourly=[1.0] * 23)
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        ActivityConfig(hourly=[-1.0] + [1.0] * 23)
