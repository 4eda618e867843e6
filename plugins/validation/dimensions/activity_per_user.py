"""Activity per user: how many events each user has, the long tail RecAgent models with a Pareto
distribution (Wang et al., "Simulator", eq. 1; Supp. A.5 fits it to MovieLens and three other
datasets with "the interaction numbers of the users as their activity levels").

The value is the Pareto shape alpha of the counts, fitted by maximum likelihood from the
smallest count (RecAgent's form, continuous: p(x) = alpha x_min^alpha / x^(alpha + 1), x >=
x_min) with the ``powerlaw`` package (Alstott, Bullmore and Plenz, 2014), whose exponent is
alpha + 1 (its default range caps the exponent at 3, which a narrow run reaches: ours is 1-100); the fit's
own Kolmogorov-Smirnov distance from the counts is ``details.powerlaw_ks``. The distance is the
two-sample KS statistic of the counts' shape, free of their scale (a run of ten rounds and a
trace of seven months differ in volume, not necessarily in shape): log counts less their mean,
each count spread evenly over [c, c + 1) (``SPREAD`` points), the continuous version of a
whole number, without which two samples of the same distribution, shifted by slightly
different means, would differ by a whole step of the commonest count. Users without events are not counted (a trace knows only users who
acted); their share of a run's agents is ``details.silent_share``. The per-user value (for the
variance ratio) is the log count.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from townsquare.api import UsageError, ValidationDimensionSpec, hookimpl
from townsquare.api.validation import Measurement, Trace


#: points each count is spread over
SPREAD = 10


def counts_per_user(trace: Trace) -> np.ndarray:
    return trace.events_per_user().astype(np.float64)


def shape_sample(counts: np.ndarray) -> np.ndarray:
    """Log counts, each spread evenly over [c, c + 1), less their mean: what the KS compares."""
    logs = np.log((np.asarray(counts, dtype=np.float64)[:, None] + (np.arange(SPREAD) + 0.5)[None, :] / SPREAD).ravel())
    return logs - logs.mean()


def pareto_fit(counts: np.ndarray) -> tuple[float, float]:
    """RecAgent's alpha and the fit's KS distance (``powerlaw``, x_min = the smallest count)."""
    try:
        import powerlaw
    except ImportError:
        raise UsageError("activity_per_user needs the powerlaw package: pip install 'townsquare[validate]'") from None
    if len(counts) < 3 or counts.min() == counts.max():
        return math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = powerlaw.Fit(counts, discrete=False, xmin=float(counts.min()), verbose=False, parameter_ranges={"alpha": [1.0, 100.0]})
        return float(fit.power_law.alpha) - 1.0, float(fit.power_law.D)


class ActivityPerUser:
    unit, distance = "user", "ks"
    label = "Pareto alpha of events per user"

    def applies(self, trace: Trace) -> str | None:
        return None if len(trace) else "no events"

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        counts = counts_per_user(trace)
        logs = np.log(counts)
        alpha, fit_ks = pareto_fit(counts)
        population = len(trace.population) or len(counts)
        return Measurement(value=alpha, sample=shape_sample(counts), per_user=logs,
                           details={"powerlaw_ks": fit_ks, "users": float(len(counts)), "median_events": float(np.median(counts)),
                                    "silent_share": 1.0 - len(counts) / population if population else math.nan})


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec("activity_per_user", lambda config, ctx: ActivityPerUser(),
                                    description="events per user: Pareto alpha (powerlaw), KS of the shape")]
