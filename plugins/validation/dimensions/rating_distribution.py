"""How people rate: the distribution of ratings, as Agent4Rec (Zhang et al., 2024) compares its
agents' ratings with MovieLens-1M's.

A run's ratings are put on the trace's scale first, by equal-width bins over each scale (a
RecAgent watch's 1-10 onto MovieLens's 1-5: 1-2 -> 1, 3-4 -> 2, ..., 9-10 -> 5, the inverse of
the doubling the recsys platform applies to earlier ratings). The value is the mean rating on
the trace's scale, the distance the Jensen-Shannon divergence (bits) of the histograms over the
scale's levels, and the per-user value each user's mean rating.
"""

from __future__ import annotations

import numpy as np

from townsquare.api import ValidationDimensionSpec, hookimpl
from townsquare.lib.validation import Measurement, Trace


def levels_of(scale: tuple[float, float]) -> np.ndarray:
    low, high = scale
    step = 0.5 if low % 1 else 1.0
    return np.arange(low, high + step / 2, step)


def on_scale(ratings: np.ndarray, scale: tuple[float, float], target: tuple[float, float]) -> np.ndarray:
    """The index, among ``target``'s levels, of each rating given on ``scale``."""
    levels = levels_of(target)
    if tuple(scale) == tuple(target):
        return np.clip(np.rint((ratings - levels[0]) / (levels[1] - levels[0] if len(levels) > 1 else 1)), 0, len(levels) - 1).astype(int)
    position = (ratings - scale[0]) / (scale[1] - scale[0])
    return np.clip(np.floor(position * len(levels)), 0, len(levels) - 1).astype(int)


class RatingDistribution:
    unit, distance = "user", "js"
    label = "mean rating (on the trace's scale)"
    axis = "rating"

    def applies(self, trace: Trace) -> str | None:
        if trace.rating_scale is None or not np.isfinite(trace.ratings).any():
            return "no ratings"
        return None

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        target = reference.rating_scale or trace.rating_scale
        rated = np.isfinite(trace.ratings)
        index = on_scale(trace.ratings[rated], trace.rating_scale, target)
        levels = levels_of(target)
        values = levels[index]
        _, user_of = np.unique(trace.users[rated], return_inverse=True)
        means = np.bincount(user_of, weights=values) / np.bincount(user_of)
        histogram = np.bincount(index, minlength=len(levels)).astype(np.float64)
        return Measurement(value=float(values.mean()), histogram=histogram, bins=tuple(f"{v:g}" for v in levels),
                           per_user=means)


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec("rating_distribution", lambda config, ctx: RatingDistribution(),
                                    description="ratings on the trace's scale (Jensen-Shannon)")]
