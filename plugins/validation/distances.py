"""The distances between a real measurement and a simulated one (numpy only).

- ``ks``: the two-sample Kolmogorov-Smirnov statistic, sup_x |F_real(x) - F_sim(x)| over the
  pooled values (0: the same empirical distribution, 1: disjoint);
- ``js``: the Jensen-Shannon divergence of two histograms in bits, JS(P, Q) = (KL(P || M) +
  KL(Q || M)) / 2 with M = (P + Q) / 2 (0: identical, 1: disjoint supports);
- ``relative_error``: |sim - real| / |real| (nan when the real value is 0);
- ``nrmse``: the root-mean-square difference of two curves over the same grid, divided by the
  range (max - min) of the real curve, the normalised RMSE that OASIS (Yang et al., 2024, §4.1)
  reports for cascade growth; the range is our reading of "normalised" (the paper gives no
  formula).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

DISTANCES = ("ks", "js", "relative_error", "nrmse")


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.sort(np.asarray(a, dtype=np.float64)), np.sort(np.asarray(b, dtype=np.float64))
    if not len(a) or not len(b):
        return math.nan
    pooled = np.concatenate([a, b])
    gap = np.searchsorted(a, pooled, side="right") / len(a) - np.searchsorted(b, pooled, side="right") / len(b)
    return float(np.max(np.abs(gap)))


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.sum() <= 0 or q.sum() <= 0:
        return math.nan
    p, q = p / p.sum(), q / q.sum()
    m = (p + q) / 2

    def kl(x: np.ndarray) -> float:
        seen = x > 0
        return float(np.sum(x[seen] * np.log2(x[seen] / m[seen])))

    return max(0.0, (kl(p) + kl(q)) / 2)


def relative_error(real: float, sim: float) -> float:
    if real == 0 or math.isnan(real) or math.isnan(sim):
        return math.nan
    return abs(sim - real) / abs(real)


def nrmse(real: np.ndarray, sim: np.ndarray) -> float:
    real, sim = np.asarray(real, dtype=np.float64), np.asarray(sim, dtype=np.float64)
    if not len(real) or len(real) != len(sim):
        return math.nan
    spread = float(np.max(real) - np.min(real))
    rmse = float(np.sqrt(np.mean((sim - real) ** 2)))
    return rmse / spread if spread > 0 else math.nan


def distance(kind: str, real: Any, sim: Any) -> float:
    """The ``kind`` distance between two :class:`~townsquare.lib.validation.Measurement`\\ s."""
    if kind == "ks":
        return ks_statistic(real.sample, sim.sample) if real.sample is not None and sim.sample is not None else math.nan
    if kind == "js":
        return js_divergence(real.histogram, sim.histogram) if real.histogram is not None and sim.histogram is not None else math.nan
    if kind == "relative_error":
        return relative_error(float(real.value), float(sim.value))
    if kind == "nrmse":
        return nrmse(real.curve, sim.curve) if real.curve is not None and sim.curve is not None else math.nan
    raise ValueError(f"unknown distance {kind!r} (known: {', '.join(DISTANCES)})")
