"""The ablation table's statistics on known numbers (t tables; R's t.test)."""

from __future__ import annotations

import math

import pytest

from townsquare.lib.stats import (
    incomplete_beta, mean_interval, paired_test, share_interval, spearman, t_quantile, two_sided_p, welch_test,
)


@pytest.mark.parametrize("df,expected", [(1, 12.706205), (4, 2.776445), (9, 2.262157), (10, 2.228139), (30, 2.042272)])
def test_t_quantiles_match_the_t_table(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-6)


def test_two_sided_p_at_the_critical_values():
    assert two_sided_p(2.228139, 10) == pytest.approx(0.05, abs=1e-6)
    assert two_sided_p(12.706205, 1) == pytest.approx(0.05, abs=1e-6)
    assert two_sided_p(0.0, 7) == 1.0
    # df = 1 is the Cauchy distribution: P(|T| > 1) = 1/2 exactly
    assert two_sided_p(1.0, 1) == pytest.approx(0.5, abs=1e-12)


def test_incomplete_beta_closed_forms():
    assert incomplete_beta(0.3, 1, 1) == pytest.approx(0.3)
    assert incomplete_beta(0.3, 2, 1) == pytest.approx(0.09)  # x^a when b = 1
    assert incomplete_beta(0.3, 1, 3) == pytest.approx(1 - 0.7 ** 3)


def test_confidence_interval_of_a_mean():
    interval = mean_interval([1, 2, 3, 4, 5])
    # mean 3, s = sqrt(2.5), half-width t(0.975, 4) * s / sqrt(5) = 2.776445 * 0.707107
    assert interval.mean == 3 and interval.sd == pytest.approx(math.sqrt(2.5))
    assert (interval.low, interval.high) == pytest.approx((3 - 1.963243, 3 + 1.963243), abs=1e-6)
    assert interval.n == 5
    one = mean_interval([4.0])
    assert one.mean == 4.0 and math.isnan(one.low)


def test_welch_t_test_matches_r():
    # R: t.test(c(1,2,3,4,5), c(2,4,6,8,10)) -> t = -1.8974, df = 5.8824, p-value = 0.1075
    result = welch_test([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
    assert result.t == pytest.approx(-1.897367, abs=1e-6)
    assert result.df == pytest.approx(5.882353, abs=1e-6)
    assert result.p == pytest.approx(0.1075, abs=5e-5)


def test_paired_t_test_matches_r():
    # R: t.test(c(1,2,3,4,5), c(2,4,6,8,10), paired = TRUE) -> t = -4.2426, df = 4, p-value = 0.01324
    result = paired_test([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
    assert result.t == pytest.approx(-4.242641, abs=1e-6)
    assert result.df == 4
    assert result.p == pytest.approx(0.01324, abs=5e-6)
    # by hand: d = 0.3, -0.1, 0.7, 0.6, 0.1; mean 0.32, s_d^2 = 0.448 / 4, t = 0.32 / sqrt(0.112 / 5)
    # = 2.13809; the t table's 0.95 quantile at 4 df is 2.1318, so p is just under 0.10
    result = paired_test([5.1, 4.9, 6.2, 5.8, 6.0], [4.8, 5.0, 5.5, 5.2, 5.9])
    assert result.t == pytest.approx(0.32 / math.sqrt(0.112 / 5), rel=1e-9)
    assert 0.099 < result.p < 0.1


def test_paired_test_is_stronger_than_welch_on_correlated_runs():
    # the same-seed runs move together (common random numbers); the variant adds 0.1 to each
    base = [1.0, 3.0, 2.0, 5.0, 4.0]
    variant = [b + 0.1 + e for b, e in zip(base, [0.01, -0.02, 0.0, 0.02, -0.01])]
    assert paired_test(variant, base).p < 0.001 < 0.9 < welch_test(variant, base).p


def test_paired_edge_cases():
    assert math.isnan(paired_test([1.0], [2.0]).p)
    assert paired_test([1.0, float("nan"), 3.0], [0.0, 5.0, 2.0]) == paired_test([1.0, 3.0], [0.0, 2.0])
    assert paired_test([2, 3, 4], [1, 2, 3]).p == 0.0  # every difference 1: no variance
    assert paired_test([2, 3, 4], [2, 3, 4]).p == 1.0
    with pytest.raises(ValueError):
        paired_test([1.0, 2.0], [1.0])


def test_welch_edge_cases():
    assert math.isnan(welch_test([1.0], [1.0, 2.0]).p)
    assert welch_test([2, 2, 2], [2, 2, 2]).p == 1.0
    assert welch_test([2, 2, 2], [3, 3, 3]).p == 0.0


def test_wilson_interval_of_a_share():
    # Wilson (1927); binom::binom.wilson(8, 10) in R: 0.4901625 0.9433178
    found = share_interval(8, 10)
    assert found.mean == 0.8 and found.n == 10
    assert (found.low, found.high) == pytest.approx((0.4901625, 0.9433178), abs=1e-6)
    # at the edges the interval is not empty (the normal approximation's would be [0, 0])
    none = share_interval(0, 10)
    assert none.low == 0.0 and none.high == pytest.approx(0.2775328, abs=1e-6)
    assert share_interval(10, 10).low == pytest.approx(1 - 0.2775328, abs=1e-6)
    assert math.isnan(share_interval(0, 0).mean)
    with pytest.raises(ValueError):
        share_interval(11, 10)


def test_spearman_matches_scipy():
    # scipy.stats.spearmanr([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]): 0.8207826816681233 (ties share their mean rank)
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(0.8207826816681233, abs=1e-12)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [4, 4, 4]) is None and spearman([1], [2]) is None
