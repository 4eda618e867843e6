"""A model placed on a sweep's map: what an oracle sweep (``townsquare sweep``, its ``sweep.json``)
gives at the dispositions measured on the model.

The sweep's grid is read per metric; along the settings the model was measured on, the mean and
the ends of its interval are interpolated linearly between grid values (multilinearly over
several), a value outside the swept range taking the nearest end (said so). Settings the sweep
varies that were not measured give one placement per value. Beside the value at the measured
point, the span of the interpolated mean over the box of the measured intervals (its corners
and the grid values inside it) says how much the model's uncertainty moves the prediction.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from townsquare.api import UsageError


@dataclass
class Placement:
    """One metric's prediction at the measured dispositions (for one value of the sweep's other settings)."""

    metric: str
    #: the measured dispositions the sweep varies: setting -> (value, interval low, high)
    at: dict[str, tuple[float, float, float]]
    condition: dict[str, Any]
    mean: float
    interval: tuple[float, float]
    span: tuple[float, float]
    clamped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "at": {k: list(v) for k, v in self.at.items()}, "condition": self.condition, "mean": self.mean, "interval": list(self.interval),
                "span": list(self.span), "outside_sweep": self.clamped}


def read_sweep(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--sweep {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--sweep {path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("points"), list) or not isinstance(data.get("settings"), list):
        raise UsageError(f"--sweep {path}: not a sweep.json (no list 'points' and 'settings'; made by townsquare sweep)")
    if data.get("method", "grid") != "grid":
        raise UsageError(f"--sweep {path}: a {data.get('method')} design is no grid; place a model on a grid sweep (--method grid)")
    return data


def _weights(axis: Sequence[float], x: float) -> tuple[list[tuple[int, float]], bool]:
    """(index, weight) of the grid values around ``x`` on ``axis`` (sorted), and whether ``x`` lay outside."""
    if x <= axis[0] or x >= axis[-1]:
        return [(0 if x <= axis[0] else len(axis) - 1, 1.0)], not (axis[0] <= x <= axis[-1])
    for i in range(len(axis) - 1):
        if axis[i] <= x <= axis[i + 1]:
            t = (x - axis[i]) / (axis[i + 1] - axis[i])
            return [(i, 1 - t), (i + 1, t)], False
    raise AssertionError("unreachable")


def place(sweep: dict[str, Any], measured: dict[str, tuple[float, float, float]]) -> tuple[list[Placement], list[str]]:
    """Placements per metric and condition, and the notes to print (settings of the sweep the
    model was not measured on; dispositions measured but not swept). ``measured``: setting ->
    (value, interval low, interval high)."""
    keys = [s["key"] for s in sweep["settings"]]
    axes = [k for k in keys if k in measured and not math.isnan(measured[k][0])]
    if not axes:
        raise UsageError(f"the sweep varies {', '.join(keys)}; none of them was measured here "
                         f"({', '.join(measured) or 'nothing'})")
    values = {s["key"]: s["values"] for s in sweep["settings"]}
    for key in axes:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values[key]):
            raise UsageError(f"the sweep's {key} has values that are not numbers: {values[key]}")
    grids = {k: sorted(float(v) for v in values[k]) for k in axes}
    others = [k for k in keys if k not in axes]
    notes = [f"{k} is measured but not swept: the sweep holds it at the scenario's value" for k in measured if k not in keys]
    table: dict[tuple[str, tuple], dict[str, Any]] = {}
    for point in sweep["points"]:
        settings = point["settings"]
        table[(point["metric"], tuple(json.dumps(settings[k], sort_keys=True) for k in keys))] = point
    metrics = list(dict.fromkeys(p["metric"] for p in sweep["points"]))
    placements = []
    for condition in itertools.product(*(values[k] for k in others)):
        fixed = dict(zip(others, condition))
        for metric in metrics:
            def at(coords: dict[str, float], field_: str) -> float:
                total = 0.0
                parts = [_weights(grids[k], coords[k])[0] for k in axes]
                for combo in itertools.product(*parts):
                    settings = {**fixed, **{k: grids[k][i] for k, (i, _) in zip(axes, combo)}}
                    key = (metric, tuple(json.dumps(_as_swept(settings[k], values[k]), sort_keys=True) for k in keys))
                    point = table.get(key)
                    if point is None:
                        return math.nan
                    value = point["mean"] if field_ == "mean" else point["interval"][0 if field_ == "low" else 1]
                    weight = math.prod(w for _, w in combo)
                    total += weight * (math.nan if value is None else value)
                return total

            centre = {k: measured[k][0] for k in axes}
            corners = [dict(zip(axes, c)) for c in itertools.product(*(_box(grids[k], measured[k]) for k in axes))]
            span = [at(c, "mean") for c in corners]
            span = [v for v in span if not math.isnan(v)]
            clamped = [k for k in axes if _weights(grids[k], centre[k])[1]]
            placements.append(Placement(metric, {k: measured[k] for k in axes}, fixed, at(centre, "mean"), (at(centre, "low"), at(centre, "high")),
                                        (min(span), max(span)) if span else (math.nan, math.nan), clamped))
    return placements, notes


def _box(axis: Sequence[float], measured: tuple[float, float, float]) -> list[float]:
    """The measured value's interval ends and the grid values between them (the extremes of a
    piecewise-linear function over the interval lie among these)."""
    value, low, high = measured
    low = value if math.isnan(low) else low
    high = value if math.isnan(high) else high
    return [low, *[x for x in axis if low < x < high], high]


def _as_swept(value: float, swept: Sequence[Any]) -> Any:
    """A grid value as the sweep wrote it (4 rather than 4.0 for an integer setting)."""
    return next((v for v in swept if float(v) == value), value)


def placement_lines(placements: Sequence[Placement], source: str) -> list[str]:
    def num(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.3g}"

    lines = []
    by_condition: dict[str, list[Placement]] = {}
    for p in placements:
        by_condition.setdefault(json.dumps(p.condition, sort_keys=True), []).append(p)
    for group in by_condition.values():
        at = ", ".join(f"{k} = {num(v[0])} [{num(v[1])}, {num(v[2])}]" for k, v in group[0].at.items())
        condition = ", ".join(f"{k} = {v}" for k, v in group[0].condition.items())
        lines.append(f"at {at}{' and ' + condition if condition else ''}, the sweep {source} gives:")
        for p in group:
            outside = f"; outside the swept range of {', '.join(p.clamped)}: its nearest end" if p.clamped else ""
            lines.append(f"  {p.metric} {num(p.mean)} [{num(p.interval[0])}, {num(p.interval[1])}] "
                         f"({num(p.span[0])} to {num(p.span[1])} over the dispositions' intervals{outside})")
    return lines
