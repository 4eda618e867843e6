"""The statistics of an ablation table: Student's t confidence interval of a mean, the paired
t-test and Welch's unequal-variances t-test, with the t distribution computed here (numpy and
math only; scipy is not a dependency).

- 95 % CI of the mean of n runs: mean +- t_{1 - alpha/2, n-1} * s / sqrt(n), s the sample
  standard deviation (ddof = 1).
- The paired t-test of variant A against the baseline B, runs paired by seed (under common
  random numbers a variant's run and the baseline's with the same seed share every draw where
  their histories agree, so they are correlated): d_i = A_i - B_i, t = mean(d) / (s_d /
  sqrt(n)), n - 1 degrees of freedom, two-sided p-value.
- Welch's t-test of variant A against the baseline B (independent samples): t = (mean_A -
  mean_B) / sqrt(s_A^2/n_A + s_B^2/n_B), degrees of freedom by the Welch-Satterthwaite
  equation, two-sided p-value.
- A share k / n (of relays that keep the details, of watches from the page...): the Wilson score
  interval, (p + z²/2n ± z·sqrt(p(1 − p)/n + z²/4n²)) / (1 + z²/n), z the normal quantile
  (Wilson 1927); it stays inside [0, 1] and is not empty at p = 0 or 1, where the normal
  approximation's is.
- Spearman's rho: Pearson's correlation of the ranks (ties share their mean rank).
- The t distribution's CDF through the regularised incomplete beta function,
  P(|T| > t) = I_{df / (df + t^2)}(df / 2, 1 / 2), evaluated by its continued fraction
  (modified Lentz); quantiles by bisection on the CDF.
- Percentile intervals of a two-level mean (personas and their questions) by the two-stage
  bootstrap, Holm's adjustment of a family of p-values, and Kendall's tau-b.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    sd: float
    n: int


@dataclass(frozen=True)
class TTest:
    """A two-sided t-test's statistic, degrees of freedom and p-value."""

    t: float
    df: float
    p: float


NO_TEST = TTest(math.nan, math.nan, math.nan)


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The mean and its t-interval; low = high = nan with fewer than two values."""
    xs = [float(v) for v in values if not math.isnan(float(v))]
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, 0)
    mean = sum(xs) / n
    if n < 2:
        return Interval(mean, math.nan, math.nan, math.nan, n)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, sd, n)


def share_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """The share ``successes / n`` and its Wilson score interval (``sd``: the share's binomial
    standard error); nan with no trials."""
    if n <= 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, 0)
    if not 0 <= successes <= n:
        raise ValueError("successes must be between 0 and n")
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the edges (no rounding error)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(p, low, high, math.sqrt(p * (1 - p) / n), n)


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start:end + 1]:
            out[i] = (start + end) / 2 + 1
        start = end + 1
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho of the pairs (x[i], y[i]); None when either side is constant (or fewer
    than two pairs)."""
    if len(x) != len(y):
        raise ValueError("spearman needs as many values on each side")
    rx, ry = ranks(x), ranks(y)
    n = len(rx)
    if n < 2:
        return None
    mx, my = sum(rx) / n, sum(ry) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def paired_test(a: Sequence[float], b: Sequence[float]) -> TTest:
    """The paired two-sided t-test of ``a`` against ``b`` (``a[i]`` and ``b[i]`` one pair; a
    pair with a nan is left out); nan where it is undefined (fewer than two pairs, or every
    difference the same: then p is 1 for a zero difference, 0 else)."""
    if len(a) != len(b):
        raise ValueError("a paired test needs as many values on each side")
    d = [float(x) - float(y) for x, y in zip(a, b) if not (math.isnan(float(x)) or math.isnan(float(y)))]
    n = len(d)
    if n < 2:
        return NO_TEST
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1)
    if var == 0:
        return TTest(math.nan, n - 1, 1.0 if mean == 0 else 0.0)
    t = mean / math.sqrt(var / n)
    return TTest(t, n - 1, two_sided_p(t, n - 1))


def welch_test(a: Sequence[float], b: Sequence[float]) -> TTest:
    """Welch's two-sided t-test of ``a`` against ``b``; nan where it is undefined (fewer than
    two values in a group, or no variance in either: then p is 1 for equal means, 0 else)."""
    xs, ys = [float(v) for v in a if not math.isnan(float(v))], [float(v) for v in b if not math.isnan(float(v))]
    if len(xs) < 2 or len(ys) < 2:
        return NO_TEST
    ma, mb = sum(xs) / len(xs), sum(ys) / len(ys)
    va = sum((x - ma) ** 2 for x in xs) / (len(xs) - 1) / len(xs)
    vb = sum((y - mb) ** 2 for y in ys) / (len(ys) - 1) / len(ys)
    if va + vb == 0:
        return TTest(math.nan, math.nan, 1.0 if ma == mb else 0.0)
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / (len(xs) - 1) if va else 0.0) + (vb ** 2 / (len(ys) - 1) if vb else 0.0))
    return TTest(t, df, two_sided_p(t, df))


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return min(1.0, max(0.0, incomplete_beta(df / (df + t * t), df / 2, 0.5)))


def t_cdf(t: float, df: float) -> float:
    tail = two_sided_p(t, df) / 2
    return 1 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (bisection on :func:`t_cdf`, to 1e-12)."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if p == 0.5:
        return 0.0
    low, high = -1.0, 1.0
    while t_cdf(low, df) > p:
        low *= 2
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    return (low + high) / 2


def incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    # the continued fraction converges fast for x < (a + 1) / (a + b + 2); use symmetry otherwise
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(x, a, b) / a
    return 1.0 - front * _beta_fraction(1 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < eps:
            break
    return result


# ---------------------------------------------------------------- intervals by resampling, several tests, rank agreement

def two_stage_bootstrap(units: Sequence[Sequence[Sequence[float]]], rounds: int = 1000, confidence: float = 0.95,
                        seed: int = 0) -> tuple[list[tuple[float, float] | None], tuple[float, float] | None]:
    """Percentile intervals of a two-level mean by the two-stage (cluster) bootstrap.

    ``units[i][f]`` holds unit i's item scores on facet f (a persona's question scores on a task;
    a SoMe query is a unit with one facet and one item). A facet's score is the mean over units
    of the unit's mean item score on it; the overall score is the mean over units of the mean of
    the unit's facet means (PersonaScore). Each of ``rounds`` resamples draws the units with
    replacement, then within each drawn unit its items on each facet with replacement (Davison
    and Hinkley 1997, §3.8: resampling at both stages, which carries the spread of items within
    a unit as well as that between units); the interval is the resamples' ``(1 - confidence) /
    2`` and ``(1 + confidence) / 2`` percentiles. A unit with no item on a facet is left out of
    that facet (and of the overall score); None where no resample has a value. Seeded.
    """
    import warnings

    import numpy as np

    facets = max((len(u) for u in units), default=0)
    if not units or not facets:
        return [], None
    rng = np.random.default_rng(seed)
    n = len(units)
    picked = rng.integers(0, n, size=(rounds, n))
    facet_means = np.full((rounds, n, facets), np.nan)
    for f in range(facets):
        items = [list(u[f]) if f < len(u) else [] for u in units]
        counts = np.array([len(i) for i in items])
        width = max(1, int(counts.max()))
        table = np.array([i + [0.0] * (width - len(i)) for i in items], dtype=float)
        count = counts[picked]                                          # (rounds, n)
        draws = np.floor(rng.random((rounds, n, width)) * np.maximum(count, 1)[..., None]).astype(int)
        values = table[picked[..., None], draws]                        # (rounds, n, width)
        mask = np.arange(width)[None, None, :] < count[..., None]
        with np.errstate(invalid="ignore", divide="ignore"):
            facet_means[:, :, f] = np.where(count > 0, (values * mask).sum(axis=2) / count, np.nan)

    def interval(samples: np.ndarray) -> tuple[float, float] | None:
        samples = samples[~np.isnan(samples)]
        if not samples.size:
            return None
        tail = (1 - confidence) / 2 * 100
        return float(np.percentile(samples, tail)), float(np.percentile(samples, 100 - tail))

    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # a resample with no value on a facet: nan, left out
        per_facet = [interval(np.nanmean(facet_means[:, :, f], axis=1)) for f in range(facets)]
        complete = facet_means.mean(axis=2)                             # nan where a facet is missing
        overall = interval(np.nanmean(complete, axis=1))
    return per_facet, overall


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (Holm 1979): sorted ascending,
    p_(i) becomes max over j <= i of min(1, (m - j + 1) p_(j)), m the p-values present; None
    stays None."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None and not math.isnan(p))
    out: list[float | None] = [None] * len(pvalues)
    m, running = len(present), 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall's tau-b of paired values (ties in either counted as Kendall 1945 corrects for
    them): (concordant - discordant) / sqrt((n0 - n1)(n0 - n2)); None below two pairs or when
    either side has no spread."""
    if len(a) != len(b) or len(a) < 2:
        return None
    concordant = discordant = ties_a = ties_b = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return None if denominator == 0 else (concordant - discordant) / denominator
