"""How varied each user's taste is: the Shannon entropy (bits) of the genres of the items a user
chose, each event weighing 1 shared among its item's genres. The value is the mean over users,
the distance the two-sample KS statistic of the per-user entropies (which are also the per-user
values). A user with few events has a low entropy by construction: a run much shorter than the
trace carries that difference in volume too (compare ``activity_per_user``'s median events).
"""

from __future__ import annotations

import numpy as np

from townsquare.api import ValidationDimensionSpec, hookimpl
from townsquare.lib.validation import Measurement, Trace


def user_entropies(trace: Trace, genres: dict[str, tuple[str, ...]]) -> np.ndarray:
    """Each user's genre entropy (users whose events carry no genre are left out)."""
    items, item_of = np.unique(trace.items, return_inverse=True)
    names = sorted({g for item in items.tolist() for g in genres.get(item, ())})
    column = {g: k for k, g in enumerate(names)}
    shares = np.zeros((len(items), len(names)))
    for row, item in enumerate(items.tolist()):
        for genre in genres.get(item, ()):
            shares[row, column[genre]] += 1.0 / len(genres[item])
    weights = np.zeros((len(trace.user_index[0]), len(names)))
    np.add.at(weights, trace.user_index[1], shares[item_of.reshape(-1)])
    weights = weights[weights.sum(axis=1) > 0]
    p = weights / weights.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.nansum(np.where(p > 0, p * np.log2(p), 0.0), axis=1)


class GenreEntropy:
    unit, distance = "user", "ks"
    label = "mean per-user genre entropy (bits)"
    axis = "genre entropy of a user (bits)"

    def applies(self, trace: Trace) -> str | None:
        return None if any(trace.genres.get(i) for i in np.unique(trace.items).tolist()) else "no genres for its items"

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        values = user_entropies(trace, {**reference.genres, **trace.genres})
        return Measurement(value=float(values.mean()) if len(values) else float("nan"), sample=values, per_user=values)


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec("genre_entropy", lambda config, ctx: GenreEntropy(),
                                    description="Shannon entropy of each user's genres (KS)")]
