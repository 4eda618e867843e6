"""Who is connected to whom: degree distributions.

- ``follower_degree`` and ``following_degree``: each user's followers and followees in the
  follow graph at the end of the trace (a run's ``follows``), every user of the population
  counted, with 0 where they have none;
- ``interaction_degree``: for traces without a follow graph (MADOC, Twitter15/16), how many
  distinct users answered or reshared each user who was answered or reshared at least once.

The value is the mean degree, the distance the two-sample KS statistic of the degrees, and the
per-user value log(1 + degree).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from townsquare.api import ValidationDimensionSpec, hookimpl
from townsquare.lib.validation import Measurement, Trace


class Degree:
    unit, distance = "user", "ks"

    def __init__(self, which: str):
        self.which = which
        self.label = {"followers": "mean followers per user", "following": "mean followees per user",
                      "interaction": "mean distinct users who answered or reshared a user"}[which]
        self.axis = {"followers": "followers", "following": "followees", "interaction": "distinct users answering or resharing"}[which]

    def applies(self, trace: Trace) -> str | None:
        if self.which == "interaction":
            return None if trace.interactions else "no comments or reposts between users"
        return None if trace.follows else "no follow graph"

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        members = set(trace.user_ids())
        if self.which == "interaction":
            pairs = {(actor, target) for actor, target in trace.interactions}
            degrees = np.asarray(list(Counter(target for _, target in pairs).values()), dtype=np.float64)
        else:
            end = 1 if self.which == "followers" else 0
            counts = Counter(edge[end] for edge in set(trace.follows))
            degrees = np.asarray([counts.get(user, 0) for user in sorted(members | set(counts))], dtype=np.float64)
        return Measurement(value=float(degrees.mean()) if len(degrees) else float("nan"), sample=degrees, per_user=np.log1p(degrees))


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec("follower_degree", lambda config, ctx: Degree("followers"), description="followers per user (KS)"),
            ValidationDimensionSpec("following_degree", lambda config, ctx: Degree("following"), description="followees per user (KS)"),
            ValidationDimensionSpec("interaction_degree", lambda config, ctx: Degree("interaction"),
                                    description="distinct users answering or resharing a user (KS)")]
