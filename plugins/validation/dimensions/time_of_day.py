"""When in the day and the week people act: the distribution of events over the 24 hours and the
7 weekdays, on the trace's clock (a run's simulated clock; a real trace's Unix times, moved by
``--utc-offset`` onto local time).

A run stamps every action with its round's start; what the run says is that the action
happened within the round, so each of a run's events is spread evenly over its round
(``Trace.resolution``) before it is binned. The distance is the Jensen-Shannon divergence (bits)
of the two histograms; the value is the histogram's entropy in bits (log2 24 = 4.58 and
log2 7 = 2.81 for activity spread evenly), and ``details.peak`` its busiest hour or day
(Monday = 0). Traces whose times are relative (Twitter15/16's minutes after a source tweet) have
no clock: these dimensions do not apply.
"""

from __future__ import annotations

import numpy as np

from townsquare.api import ValidationDimensionSpec, hookimpl
from townsquare.lib.validation import Measurement, Trace

#: a spread event is cut into pieces of at most this many seconds
PIECE = 600.0
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def spread(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Points in time and their weights: each event as it is, or spread over its round."""
    if trace.resolution <= 0:
        return trace.times, np.ones(len(trace.times))
    pieces = max(1, int(np.ceil(trace.resolution / PIECE)))
    offsets = (np.arange(pieces) + 0.5) * trace.resolution / pieces
    return (trace.times[:, None] + offsets[None, :]).ravel(), np.full(len(trace.times) * pieces, 1.0 / pieces)


def entropy_bits(histogram: np.ndarray) -> float:
    p = histogram[histogram > 0] / histogram.sum()
    return float(-(p * np.log2(p)).sum())


class TimeOfDay:
    unit, distance = "user", "js"

    def __init__(self, period: str):
        self.period = period
        self.label = f"entropy of the {'hour-of-day' if period == 'hour' else 'day-of-week'} distribution (bits)"
        self.axis = "hour of the day" if period == "hour" else "day of the week"

    def applies(self, trace: Trace) -> str | None:
        if not trace.absolute_times:
            return "its times are relative to each cascade, not a clock"
        return None if len(trace) else "no events"

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        times, weights = spread(trace)
        if self.period == "hour":
            bins, labels = (times % 86400 // 3600).astype(int), tuple(f"{h:02d}" for h in range(24))
        else:  # the Unix epoch fell on a Thursday
            bins, labels = ((times // 86400 + 3) % 7).astype(int), DAYS
        histogram = np.bincount(bins, weights=weights, minlength=len(labels)).astype(np.float64)
        return Measurement(value=entropy_bits(histogram), histogram=histogram, bins=labels,
                           details={"peak": float(np.argmax(histogram))})


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec("hour_of_day", lambda config, ctx: TimeOfDay("hour"),
                                    description="events over the 24 hours, a run's spread over its rounds (Jensen-Shannon)"),
            ValidationDimensionSpec("day_of_week", lambda config, ctx: TimeOfDay("day"),
                                    description="events over the 7 weekdays (Jensen-Shannon)")]
