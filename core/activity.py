"""Who is active: Pareto-distributed activity levels.

RecAgent (Wang et al., "Simulator", eq. 1) and Zhou et al. (§3.2.3, eq. 2) draw each agent's
activity level from a Pareto distribution with density

    p(x) = alpha * x_min**alpha / x**(alpha + 1),   x >= x_min.

(Zhou et al. print the denominator as ``alpha + 1``; that is a typo for ``x**(alpha + 1)``,
the density both papers cite.) Zhou et al. use alpha = 2.

townsquare reads a level as the expected number of active sessions per simulated day, so in
a round of ``m`` simulated minutes an agent is active with probability
``1 - exp(-x * m / 1440)`` (a Poisson process at rate x per day). A planner may override
this per agent (Zhou's browse window, Park's day plan). An hour-of-day profile (``[activity]
hourly``) multiplies the rate by the round's weight (:func:`hour_weight`), so a level keeps its
meaning as sessions per day. Each agent's draw is its own uniform of the round
(:mod:`townsquare.random_streams`), so a population is drawn in one numpy pass.
"""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

import numpy as np

MINUTES_PER_DAY = 24 * 60


def pareto_inverse_cdf(u: np.ndarray | float, alpha: float, x_min: float) -> np.ndarray | float:
    """The level at quantile ``u`` in [0, 1): ``x_min * (1 - u) ** (-1 / alpha)``."""
    return x_min * np.power(1.0 - np.asarray(u, dtype=float), -1.0 / alpha)


def sample_activity(rng: np.random.Generator, n: int, alpha: float, x_min: float) -> np.ndarray:
    """``n`` activity levels drawn by inverse-CDF sampling with ``rng``."""
    return pareto_inverse_cdf(rng.random(n), alpha, x_min)


def active_probabilities(levels: np.ndarray, minutes_per_round: int) -> np.ndarray:
    """Chance that an agent with each level of sessions a day has a session in one round
    (an infinite level: 1)."""
    return 1.0 - np.exp(-np.asarray(levels, dtype=np.float64) * minutes_per_round / MINUTES_PER_DAY)


def hour_weight(hourly: Sequence[float] | None, start: datetime, minutes: int) -> float:
    """A round's rate multiplier: the mean over its minutes from ``start`` of the 24 ``hourly``
    weights (0:00 first) scaled to mean 1; 1.0 without a profile."""
    if not hourly:
        return 1.0
    weights = np.asarray(hourly, dtype=np.float64) * (24 / sum(hourly) if sum(hourly) else 0.0)
    return float(weights[(start.hour * 60 + start.minute + np.arange(minutes)) // 60 % 24].mean())


def active_agents(uniforms: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """The activity draw: an agent is active when its round's uniform in [0, 1) is below its
    probability (:meth:`townsquare.random_streams.RandomStreams.activity_uniforms`)."""
    return uniforms < probabilities
