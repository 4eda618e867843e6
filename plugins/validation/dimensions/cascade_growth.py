"""How cascades grow, scored as OASIS scores its Twitter15/16 replays (Yang et al., 2024, §4.1):
the scale (users reached), depth and maximum breadth of a cascade as functions of the time since
its post, compared by normalised RMSE.

OASIS replays each real propagation and compares the curves one by one; a run here is not a
replay of the trace's cascades, so the mean curves over cascades are compared: at each point of
a grid from 0 to the comparison's span (the runs' length) in steps of its grain (the runs' round;
a twentieth of the span when runs have no rounds), the mean over cascades of the measure on the
nodes that had joined by then. The distance is the RMSE of the run's mean curve against the
trace's divided by the range of the trace's curve (:mod:`..distances`); the value is the curve's
last point.
"""

from __future__ import annotations

import numpy as np

from townsquare.api import ValidationDimensionSpec, hookimpl
from townsquare.lib.validation import Cascade, Measurement, Trace

#: a grid has at most this many points
MAX_POINTS = 200


def grid_of(trace: Trace) -> np.ndarray:
    span = trace.span or max((float(c.times.max() - c.times.min()) for c in trace.cascades), default=0.0)
    step = trace.grain or span / 20 or 1.0
    if span / step > MAX_POINTS - 1:
        step = span / (MAX_POINTS - 1)
    return np.arange(int(span // step) + 1) * step


def growth(cascade: Cascade, grid: np.ndarray, quantity: str) -> np.ndarray:
    """The measure at each point of ``grid`` (seconds since the post), over the nodes joined by then."""
    since = cascade.times - cascade.times[0]
    order = np.argsort(since, kind="stable")
    depth = cascade.depths()[order]
    if quantity == "scale":
        first: dict[str, float] = {}
        for node in order:
            first.setdefault(cascade.users[node], float(since[node]))
        return np.searchsorted(np.sort(list(first.values())), grid, side="right").astype(np.float64)
    if quantity == "depth":
        running = np.maximum.accumulate(depth)
    else:
        counts: dict[int, int] = {}
        running = np.empty(len(depth))
        widest = 0
        for k, d in enumerate(depth):
            counts[int(d)] = counts.get(int(d), 0) + 1
            widest = max(widest, counts[int(d)])
            running[k] = widest
    joined = np.searchsorted(since[order], grid, side="right")  # nodes joined by each point (the root always)
    return running[np.maximum(joined, 1) - 1].astype(np.float64)


class CascadeGrowth:
    unit, distance = "cascade", "nrmse"

    def __init__(self, quantity: str):
        self.quantity = quantity
        self.label = {"scale": "mean users reached at the end of the grid", "depth": "mean depth at the end of the grid",
                      "max_breadth": "mean maximum breadth at the end of the grid"}[quantity]

    def applies(self, trace: Trace) -> str | None:
        return None if trace.cascades else "no cascades"

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        grid = grid_of(trace)
        curve = np.mean([growth(c, grid, self.quantity) for c in trace.cascades], axis=0)
        return Measurement(value=float(curve[-1]), curve=curve, grid=grid / 3600.0)


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec(f"cascade_growth_{m}", lambda config, ctx, m=m: CascadeGrowth(m),
                                    description=f"mean cascade {m.replace('_', ' ')} over time since the post (normalised RMSE, as OASIS)")
            for m in ("scale", "depth", "max_breadth")]
