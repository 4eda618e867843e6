"""Ranking conditions from judges' orderings (Park et al. §6.2 rank with TrueSkill; we use the
Bradley–Terry model, which the issue allows, fitted by Hunter's MM algorithm).

Each judge orders the answers of the conditions to one question; an ordering of n answers is
n(n-1)/2 pairwise wins (earlier beats later). Bradley–Terry gives each condition a strength
p_i with P(i beats j) = p_i / (p_i + p_j). The MM update (Hunter 2004, eq. 3) is
p_i <- W_i / sum_j n_ij / (p_i + p_j), with W_i the wins of i and n_ij the comparisons of i and
j; strengths are rescaled to geometric mean 1 and reported as log-strengths (0 = average).
``prior`` adds that many virtual wins each way to every pair (our choice, 0.5 by default: a
condition that never wins keeps a finite score). Confidence intervals: percentile bootstrap
over the orderings (``rounds`` resamples, seeded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


def wins_from_orderings(orderings: Sequence[Sequence[str]], conditions: Sequence[str]) -> np.ndarray:
    """``wins[i, j]``: how often condition i was ranked above condition j."""
    index = {c: i for i, c in enumerate(conditions)}
    wins = np.zeros((len(conditions), len(conditions)))
    for order in orderings:
        for a in range(len(order)):
            for b in range(a + 1, len(order)):
                wins[index[order[a]], index[order[b]]] += 1
    return wins


def bradley_terry(wins: np.ndarray, prior: float = 0.5, iterations: int = 1000, tol: float = 1e-10) -> np.ndarray:
    """Log-strengths (geometric mean 1, so they sum to 0) from a wins matrix."""
    w = np.asarray(wins, dtype=float) + prior * (1 - np.eye(len(wins)))
    n = w + w.T
    total = w.sum(axis=1)
    p = np.ones(len(w))
    for _ in range(iterations):
        denom = (n / (p[:, None] + p[None, :])).sum(axis=1)
        fresh = np.where(denom > 0, total / np.where(denom > 0, denom, 1), p)
        fresh = np.maximum(fresh, 1e-12)
        fresh /= np.exp(np.log(fresh).mean())
        if np.max(np.abs(fresh - p)) < tol:
            p = fresh
            break
        p = fresh
    return np.log(p)


@dataclass
class Ranked:
    condition: str
    score: float
    low: float
    high: float
    comparisons: int


def rank_conditions(orderings: Sequence[Sequence[str]], conditions: Sequence[str], *, prior: float = 0.5,
                    rounds: int = 1000, seed: int = 0, level: float = 0.95) -> list[Ranked]:
    """Conditions by Bradley–Terry log-strength, best first, with bootstrap intervals."""
    wins = wins_from_orderings(orderings, conditions)
    scores = bradley_terry(wins, prior)
    rng = np.random.default_rng(seed)
    samples = []
    if orderings and rounds > 0:
        for _ in range(rounds):
            picked = rng.integers(0, len(orderings), len(orderings))
            samples.append(bradley_terry(wins_from_orderings([orderings[i] for i in picked], conditions), prior))
    tail = (1 - level) / 2 * 100
    low = np.percentile(samples, tail, axis=0) if samples else scores
    high = np.percentile(samples, 100 - tail, axis=0) if samples else scores
    counts = (wins + wins.T).sum(axis=1)
    ranked = [Ranked(c, float(scores[i]), float(low[i]), float(high[i]), int(counts[i])) for i, c in enumerate(conditions)]
    return sorted(ranked, key=lambda r: -r.score)


def table(ranked: Sequence[Ranked], level: float = 0.95) -> str:
    """The paper-style table as text."""
    width = max([len("architecture")] + [len(r.condition) for r in ranked])
    lines = [f"{'architecture':<{width}}  {'BT score':>9}  {int(level * 100)}% interval", "-" * (width + 33)]
    lines += [f"{r.condition:<{width}}  {r.score:>9.3f}  [{r.low:.3f}, {r.high:.3f}]" for r in ranked]
    return "\n".join(lines)
