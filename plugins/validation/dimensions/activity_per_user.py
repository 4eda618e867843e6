"""Activity per user: how many events each user has, the long tail RecAgent models with a Pareto
distribution (Wang et al., "Simulator", eq. 1; Supp. A.5 fits it to MovieLens and three other
datasets with "the interaction numbers of the users as their activity levels").

The value is the Pareto shape alpha of the counts (RecAgent's form, continuous: p(x) = alpha
x_min^alpha / x^(alpha + 1), x >= x_min), fitted by maximum likelihood with the ``powerlaw``
package (Alstott, Bullmore and Plenz, 2014), whose exponent is alpha + 1 (its default range caps
the exponent at 3, which a narrow run reaches: ours is 1-100). x_min is the counts' 5th
percentile (``X_MIN_PERCENTILE``, a setting of ours), not their smallest value: one user with a
single event would otherwise move the whole fit. The fit's own Kolmogorov-Smirnov distance from
the counts above x_min is ``details.powerlaw_ks``, x_min ``details.x_min``. The distance is the
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
from townsquare.lib.validation import Measurement, Trace


#: points each count is spread over
SPREAD = 10
#: the Pareto fit starts at this percentile of the counts
X_MIN_PERCENTILE = 5.0


def counts_per_user(trace: Trace) -> np.ndarray:
    return trace.events_per_user().astype(np.float64)


def shape_sample(counts: np.ndarray) -> np.ndarray:
    """Log counts, each spread evenly over [c, c + 1), less their mean: what the KS compares."""
    logs = np.log((np.asarray(counts, dtype=np.float64)[:, None] + (np.arange(SPREAD) + 0.5)[None, :] / SPREAD).ravel())
    return logs - logs.mean()


def pareto_fit(counts: np.ndarray) -> tuple[float, float, float]:
    """RecAgent's alpha, the fit's KS distance and x_min (``powerlaw``, from ``X_MIN_PERCENTILE``)."""
    try:
        import powerlaw
    except ImportError:
        raise UsageError("activity_per_user needs the powerlaw package: pip install 'townsquare[validate]'") from None
    x_min = float(np.percentile(counts, X_MIN_PERCENTILE)) if len(counts) else math.nan
    if len(counts) < 3 or (counts > x_min).sum() < 2:
        return math.nan, math.nan, x_min
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = powerlaw.Fit(counts, discrete=False, xmin=x_min, verbose=False, parameter_ranges={"alpha": [1.0, 100.0]})
        return float(fit.power_law.alpha) - 1.0, float(fit.power_law.D), x_min


class ActivityPerUser:
    unit, distance = "user", "ks"
    label = "Pareto alpha of events per user"
    axis = "log events per user, less their mean"

    def applies(self, trace: Trace) -> str | None:
        return None if len(trace) else "no events"

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        counts = counts_per_user(trace)
        logs = np.log(counts)
        alpha, fit_ks, x_min = pareto_fit(counts)
        population = len(trace.population) or len(counts)
        return Measurement(value=alpha, sample=shape_sample(counts), per_user=logs,
                           details={"powerlaw_ks": fit_ks, "x_min": x_min, "users": float(len(counts)), "median_events": float(np.median(counts)),
                                    "silent_share": 1.0 - len(counts) / population if population else math.nan})


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec("activity_per_user", lambda config, ctx: ActivityPerUser(),
                                    description="events per user: Pareto alpha (powerlaw), KS of the shape")]
