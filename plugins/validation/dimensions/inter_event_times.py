"""When users come back: the times between a user's consecutive events, and how bursty they are.

Both sides are put on the comparison's grain first (a run's round: its actions all carry the
round's start, so gaps shorter than a round cannot be told apart): times are floored to the
grain, and a gap is a whole number of grains (0: the same round).

- ``inter_event_times``: every gap of every user; the value is the median gap in hours, the
  distance the two-sample KS statistic of the gaps; per user, the log of the mean gap (plus
  one grain).
- ``burstiness``: per user with at least three events, B = (sigma - mu) / (sigma + mu) of their
  gaps (Goh and Barabasi, 2008, EPL 81:48002): -1 for a clock, 0 for a Poisson process, towards
  1 for bursts and long silences; the value is the mean over users, the distance KS.
"""

from __future__ import annotations

import math

import numpy as np

from townsquare.api import ValidationDimensionSpec, hookimpl
from townsquare.lib.validation import Measurement, Trace


def gaps_per_user(trace: Trace) -> dict[str, np.ndarray]:
    times = np.floor(trace.times / trace.grain) * trace.grain if trace.grain > 0 else trace.times
    return {user: np.diff(np.sort(values)) for user, values in trace.per_user(times).items()}


def _needs_clock(trace: Trace) -> str | None:
    if not trace.absolute_times:
        return "its times are relative to each cascade, not a clock"
    return None if len(trace) else "no events"


class InterEventTimes:
    unit, distance = "user", "ks"
    label = "median gap between a user's events (hours)"
    axis = "seconds between a user's consecutive events"

    def applies(self, trace: Trace) -> str | None:
        return _needs_clock(trace)

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        gaps = [g for g in gaps_per_user(trace).values() if len(g)]
        pooled = np.concatenate(gaps) if gaps else np.zeros(0)
        step = trace.grain or 1.0
        return Measurement(value=float(np.median(pooled)) / 3600 if len(pooled) else math.nan, sample=pooled,
                           per_user=np.asarray([math.log(float(np.mean(g)) + step) for g in gaps]),
                           details={"same_grain_share": float(np.mean(pooled == 0)) if len(pooled) else math.nan})


def burstiness(gaps: np.ndarray) -> float:
    mu, sigma = float(np.mean(gaps)), float(np.std(gaps))
    return (sigma - mu) / (sigma + mu) if sigma + mu > 0 else math.nan


class Burstiness:
    unit, distance = "user", "ks"
    label = "mean burstiness B of users' gaps"
    axis = "burstiness B of a user's gaps"

    def applies(self, trace: Trace) -> str | None:
        why = _needs_clock(trace)
        if why is None and not any(len(g) >= 2 for g in gaps_per_user(trace).values()):
            return "no user has three events"
        return why

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        values = np.asarray([b for g in gaps_per_user(trace).values() if len(g) >= 2 and not math.isnan(b := burstiness(g))])
        return Measurement(value=float(values.mean()) if len(values) else math.nan, sample=values, per_user=values)


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec("inter_event_times", lambda config, ctx: InterEventTimes(),
                                    description="gaps between a user's events, on the runs' grain (KS)"),
            ValidationDimensionSpec("burstiness", lambda config, ctx: Burstiness(),
                                    description="Goh-Barabasi burstiness of each user's gaps (KS)")]
