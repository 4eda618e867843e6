"""Forgetting in RecAgent's long-term memory (Wang et al., "Memory Module", long-term memory,
and Supplementary Figure S.5). Not a plugin: :mod:`.long_term_memory` uses it.

The paper: a memory M_i is forgotten with a probability proportional to

    g(M_i) = 1 - (s_i + r_i) / 2 * max(r_i ** beta, delta)

where s_i and r_i are the normalised recency and importance in (0, 1), beta > 1 shapes the
power function and delta in (0, 1) is its floor (delta -> 1 leaves only the mean of recency and
importance). The paper does not say how recency is normalised nor how "proportional" becomes
a probability; our choices, all settings of ``long_term_memory``:

- recency ``s = 1 / (1 + hours / recency_hours)``: hours since the record was last read or
  written, a power-law decay (fast at first, then slower, as the paper motivates), in (0, 1];
- importance ``r = importance / 10`` (sensory memory scores 1-10);
- both clipped into the open interval [EPS, 1 - EPS];
- one forgetting pass after each write, in which record i is forgotten with probability
  ``min(1, forget_per_pass * g_i / sum_j g_j)``, so ``forget_per_pass`` records are forgotten
  on average (the reference code normalises g over the records the same way, i.e. 1 per pass).

Option ``mode = "exponential"`` is the reference code's variant: recency decays as
``(1 - decay_rate) ** hours`` and the power and floor act on recency,
``g = 1 - (s + r)/2 * max(s ** beta, delta)``; records read or written in the last
``spare_hours`` are never forgotten. The paper puts the power on r (importance), which we follow
in the default ``mode = "power"``.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-3
IMPORTANCE_SCALE = 10.0


def g_value(s: np.ndarray | float, r: np.ndarray | float, beta: float, delta: float) -> np.ndarray | float:
    """The paper's g(M) = 1 - (s + r)/2 * max(r^beta, delta)."""
    s, r = np.asarray(s, dtype=float), np.asarray(r, dtype=float)
    return 1.0 - (s + r) / 2.0 * np.maximum(r ** beta, delta)


def g_exponential(s: np.ndarray | float, r: np.ndarray | float, beta: float, delta: float) -> np.ndarray | float:
    """The reference code's variant: the power and floor act on recency."""
    s, r = np.asarray(s, dtype=float), np.asarray(r, dtype=float)
    return 1.0 - (s + r) / 2.0 * np.maximum(s ** beta, delta)


def power_recency(hours: np.ndarray, recency_hours: float) -> np.ndarray:
    return np.clip(1.0 / (1.0 + np.asarray(hours, dtype=float) / recency_hours), EPS, 1.0 - EPS)


def exponential_recency(hours: np.ndarray, decay_rate: float) -> np.ndarray:
    return np.clip((1.0 - decay_rate) ** np.asarray(hours, dtype=float), EPS, 1.0 - EPS)


def normalised_importance(importance: np.ndarray) -> np.ndarray:
    return np.clip(np.asarray(importance, dtype=float) / IMPORTANCE_SCALE, EPS, 1.0 - EPS)


def forget_probabilities(g: np.ndarray, per_pass: float) -> np.ndarray:
    """Probabilities proportional to ``g``, scaled so ``per_pass`` records go on average."""
    g = np.asarray(g, dtype=float)
    total = g.sum()
    if total <= 0:
        return np.zeros_like(g)
    return np.minimum(1.0, per_pass * g / total)
