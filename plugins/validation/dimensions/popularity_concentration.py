"""Which items people choose: how concentrated the choices are on a few popular items.

- ``popularity_gini``: the Gini coefficient of the items' event counts over the catalogue (the
  trace's catalogue, items nobody chose counting 0; a run is measured on the same catalogue):
  0 when every item is chosen alike, towards 1 when a few take everything. Distance: relative
  error.
- ``long_tail_share``: the share of events on items outside the trace's head, the most chosen
  ``HEAD_SHARE`` (20 %) of the catalogue by the trace's own counts (a run is measured against
  the trace's head, so a run that picks other popular items is not mistaken for one that
  picks the same). Distance: relative error.
"""

from __future__ import annotations

import numpy as np

from townsquare.api import ValidationDimensionSpec, hookimpl
from townsquare.lib.validation import Measurement, Trace

#: the head is this share of the catalogue, the most chosen items first (a setting of ours)
HEAD_SHARE = 0.2


def gini(counts: np.ndarray) -> float:
    x = np.sort(np.asarray(counts, dtype=np.float64))
    if not len(x) or x.sum() == 0:
        return float("nan")
    n = len(x)
    return float((2 * np.arange(1, n + 1) - n - 1).dot(x) / (n * x.sum()))


def item_counts(trace: Trace) -> dict[str, int]:
    items, counts = np.unique(trace.items[trace.items != ""], return_counts=True)
    return dict(zip(items.tolist(), counts.tolist()))


def catalogue_of(trace: Trace, reference: Trace) -> list[str]:
    known = list(reference.catalogue) or sorted(item_counts(reference))
    return known + sorted(set(item_counts(trace)) - set(known))


def head_of(reference: Trace) -> set[str]:
    counts = item_counts(reference)
    size = max(1, int(round(HEAD_SHARE * len(catalogue_of(reference, reference)))))
    return {item for item, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:size]}


def _has_items(trace: Trace) -> str | None:
    return None if (trace.items != "").any() else "no events on items"


class ItemPopularity:
    unit, distance = "user", "relative_error"
    label = "Gini of item popularity over the catalogue"

    def applies(self, trace: Trace) -> str | None:
        return _has_items(trace)

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        counts = item_counts(trace)
        catalogue = catalogue_of(trace, reference)
        return Measurement(value=gini(np.asarray([counts.get(i, 0) for i in catalogue])),
                           details={"items_chosen": float(len(counts)), "catalogue": float(len(catalogue))})


class LongTailShare:
    unit, distance = "user", "relative_error"
    label = f"share of events outside the trace's top {HEAD_SHARE:.0%} of items"

    def applies(self, trace: Trace) -> str | None:
        return _has_items(trace)

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        chosen = trace.items[trace.items != ""]
        return Measurement(value=float(np.mean(~np.isin(chosen, list(head_of(reference))))) if len(chosen) else float("nan"))


@hookimpl
def townsquare_register_validation_dimensions():
    return [ValidationDimensionSpec("popularity_gini", lambda config, ctx: ItemPopularity(),
                                    description="Gini of item popularity over the catalogue (relative error)"),
            ValidationDimensionSpec("long_tail_share", lambda config, ctx: LongTailShare(),
                                    description="share of events outside the trace's most popular fifth (relative error)")]
