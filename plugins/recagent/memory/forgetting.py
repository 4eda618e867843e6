"""Forgetting in RecAgent's long-term memory (Wang et al., "Memory Module", long-term memory,
and Supplementary Figure S.5). Not a plugin: :mod:`.long_term_memory` uses it.

The paper: a memory M_i is forgotten with a probability proportional to

    g(M_i) = 1 - (s_i + r_i) / 2 * max(r_i ** beta, delta)

with beta > 1 shaping the power function and delta in (0, 1) its floor (delta -> 1 leaves only
the mean of the two scores). Which score is which: the paper's record is M = <c, s, t> with s
the *importance*, its power function models a forgetting rate that is "fast in the beginning,
and then gradually slows down over time", and the floor is there so that "important memories
produced long time ago can still be recalled" (an old record's r**beta is small; delta keeps
its importance in play). All three point to r = *recency*, and so does the reference code
(``max(recency ** 1.5, 0.01) * (importance + recency) / 2``). (The sentence naming the scores,
"s_i and r_i are normalized recency and importance scores", lists them the other way round; we
follow the record's notation and the stated reasons.) So here

    g = 1 - (importance + recency) / 2 * max(recency ** beta, delta)

in both modes. What the paper leaves open (our choices, settings of ``long_term_memory``):

- ``mode = "power"`` (default): recency ``1 / (1 + hours / recency_hours)``, hours since the
  record was last read or written, itself a power law (fast at first, then slower);
  beta = 3 and delta = 0.1 (our choice; the paper gives no values);
- ``mode = "reference"``: the reference code's values: recency ``(1 - decay_rate) ** hours``
  with decay_rate 0.01, beta = 1.5, delta = 0.01, and records read or written in the last
  ``spare_hours`` (24) are never forgotten;
- importance ``importance / 10`` (sensory memory scores 1-10), both scores clipped into
  [EPS, 1 - EPS];
- one forgetting pass after each write, in which record i is forgotten with probability
  ``min(1, forget_per_pass * g_i / sum_j g_j)``, so ``forget_per_pass`` records are forgotten
  on average (the reference code normalises g over the records the same way, i.e. 1 per pass).
"""

from __future__ import annotations

import numpy as np

EPS = 1e-3
IMPORTANCE_SCALE = 10.0
#: (beta, delta) of each mode when the settings leave them out
MODE_DEFAULTS = {"power": (3.0, 0.1), "reference": (1.5, 0.01)}


def g_value(importance: np.ndarray | float, recency: np.ndarray | float, beta: float, delta: float) -> np.ndarray | float:
    """The paper's g(M) = 1 - (s + r)/2 * max(r^beta, delta), s the importance, r the recency."""
    s, r = np.asarray(importance, dtype=float), np.asarray(recency, dtype=float)
    return 1.0 - (s + r) / 2.0 * np.maximum(r ** beta, delta)


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
