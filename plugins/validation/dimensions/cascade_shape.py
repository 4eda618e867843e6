"""The shape of cascades (a post and what spread from it, as a tree; the unit the floor splits):

- ``cascade_size``: nodes (the post and every reshare or answer);
- ``cascade_depth``: the longest chain from the root;
- ``cascade_max_breadth``: the most nodes at one depth;
- ``structural_virality``: the mean distance between two nodes of the tree (Goel, Anderson,
  Hofman and Watts, 2016, Management Science 62(1)), from the subtree sizes s below each edge:
  2 * sum_edges s * (n - s) / (n * (n - 1)); 1 for a star of reshares of one post, growing for
  chains of person-to-person spread; cascades of one node have none and are left out.

The value is the mean over cascades, the distance the two-sample KS statistic of the per-cascade
values.
"""

from __future__ import annotations

import numpy as np

from townsquare.api import ValidationDimensionSpec, hookimpl
from townsquare.lib.validation import Cascade, Measurement, Trace


def max_breadth(cascade: Cascade) -> int:
    return int(np.bincount(cascade.depths()).max())


def structural_virality(cascade: Cascade) -> float:
    n = cascade.size
    if n < 2:
        return float("nan")
    below = np.ones(n, dtype=np.float64)
    depth = cascade.depths()
    for node in np.argsort(-depth, kind="stable"):  # children before parents
        up = cascade.parent[node]
        if up >= 0:
            below[up] += below[node]
    edges = below[cascade.parent >= 0]
    return float(2 * (edges * (n - edges)).sum() / (n * (n - 1)))


MEASURES = {
    "cascade_size": ("mean cascade size (nodes)", lambda c: float(c.size)),
    "cascade_depth": ("mean cascade depth", lambda c: float(c.depths().max())),
    "cascade_max_breadth": ("mean maximum breadth of a cascade", lambda c: float(max_breadth(c))),
    "structural_virality": ("mean structural virality", structural_virality),
}


class CascadeShape:
    unit, distance = "cascade", "ks"

    def __init__(self, name: str):
        self.label, self.of = MEASURES[name]
        self.axis = name.replace("_", " ") + " of a cascade"

    def applies(self, trace: Trace) -> str | None:
        return None if trace.cascades else "no cascades"

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        values = np.asarray([v for c in trace.cascades if not np.isnan(v := self.of(c))])
        return Measurement(value=float(values.mean()) if len(values) else float("nan"), sample=values)


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec(name, lambda config, ctx, name=name: CascadeShape(name), description=f"{label} (KS)")
            for name, (label, _) in MEASURES.items()]
