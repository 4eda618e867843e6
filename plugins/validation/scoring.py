"""Scoring runs against a real trace, dimension by dimension.

For each dimension that the trace and every run can be measured on:

- ``real``: the dimension's value on the trace; ``simulated``: the mean of its value over the
  runs (the replicates), with a 95 % Student-t ``interval``;
- ``distance``: the dimension's distance between the trace and each run, averaged over the
  runs, with its interval;
- ``floor``: the trace's own distance from itself, so a distance is judged against the
  trace's variability. Split-half: the trace's users (or cascades) are shuffled, ``k`` of them
  are measured against the others, and the distance is averaged over ``splits`` shuffles
  (``floor_range``: its 2.5th and 97.5th percentiles). ``k`` is as many as a run has (the
  median over runs), at most half of the trace, so the floor carries the sampling noise of a
  run's size: a run drawn from the trace's own distribution lands within the range;
- ``variance_ratio``: the variance across users of the dimension's per-user value in a run
  over the same variance in the trace (mean over runs): below 1, agents vary less than people.

Both sides keep only the kinds of event they share (a run's likes are not compared with a
trace that has none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from townsquare.api import UsageError
from townsquare.lib.stats import mean_interval
from townsquare.lib.validation import Measurement, Trace

from .distances import distance


@dataclass
class DimensionResult:
    name: str
    label: str
    metric: str
    unit: str
    plugin: str = ""
    #: what the plotted values are (a dimension's optional ``axis``)
    axis: str = ""
    real: float = math.nan
    simulated: float = math.nan
    interval: tuple[float, float] = (math.nan, math.nan)
    distance: float = math.nan
    distance_interval: tuple[float, float] = (math.nan, math.nan)
    floor: float = math.nan
    floor_range: tuple[float, float] = (math.nan, math.nan)
    variance_ratio: float | None = None
    variance_ratio_interval: tuple[float, float] | None = None
    replicates: list[float] = field(default_factory=list)
    distances: list[float] = field(default_factory=list)
    details: dict[str, float] = field(default_factory=dict)
    #: why the dimension was not scored (None: it was)
    skipped: str | None = None
    real_measurement: Measurement | None = None
    measurements: list[Measurement] = field(default_factory=list)

    @property
    def within_floor(self) -> bool | None:
        """Whether the mean distance lies within the floor's range (None: not scored)."""
        if self.skipped or math.isnan(self.distance) or math.isnan(self.floor_range[1]):
            return None
        return self.distance <= self.floor_range[1]

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "plugin": self.plugin, "label": self.label, "metric": self.metric, "unit": self.unit,
                "real": _num(self.real), "simulated": _num(self.simulated), "interval": [_num(v) for v in self.interval],
                "distance": _num(self.distance), "distance_interval": [_num(v) for v in self.distance_interval],
                "floor": _num(self.floor), "floor_range": [_num(v) for v in self.floor_range],
                "within_floor": self.within_floor,
                "variance_ratio": _num(self.variance_ratio) if self.variance_ratio is not None else None,
                "variance_ratio_interval": [_num(v) for v in self.variance_ratio_interval] if self.variance_ratio_interval else None,
                "replicates": [_num(v) for v in self.replicates], "distances": [_num(v) for v in self.distances],
                "details": {k: _num(v) for k, v in self.details.items()}, "skipped": self.skipped}


def _num(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))) else round(float(value), 6)


def shared_kinds(real: Trace, sims: list[Trace]) -> list[str]:
    ran = set().union(*(set(s.kinds.tolist()) for s in sims)) if sims else set()
    shared = sorted(set(real.kinds.tolist()) & ran)
    if not shared:
        raise UsageError(f"the runs and the trace share no kind of event (runs: {', '.join(sorted(ran)) or 'none'}; "
                         f"trace {real.name}: {', '.join(sorted(set(real.kinds.tolist()))) or 'none'})")
    return shared


def score(real: Trace, sims: list[Trace], dimensions: list[tuple[Any, Any]], *, splits: int = 20, seed: int = 0) -> list[DimensionResult]:
    """One result per ``(spec, dimension)`` pair, in the order given."""
    kinds = shared_kinds(real, sims)
    grain, span = comparison_grid(sims)
    real = replace(real.of_kinds(kinds), grain=grain, span=span)
    sims = [replace(s.of_kinds(kinds), grain=grain, span=span) for s in sims]
    return [_score_one(spec, dimension, real, sims, splits, seed) for spec, dimension in dimensions]


def comparison_grid(sims: list[Trace]) -> tuple[float, float]:
    """The grain (the runs' longest round) and span (the median time a run covers, a round
    included) on which time differences and growth are compared."""
    grain = max((s.resolution for s in sims), default=0.0)
    spans = [s.span or float(s.times.max() - s.times.min()) + s.resolution for s in sims if len(s.times)]
    return grain, float(np.median(spans)) if spans else 0.0


def _score_one(spec: Any, dimension: Any, real: Trace, sims: list[Trace], splits: int, seed: int) -> DimensionResult:
    result = DimensionResult(name=spec.name, plugin=spec.plugin, label=dimension.label, metric=dimension.distance, unit=dimension.unit,
                             axis=getattr(dimension, "axis", ""))
    why = dimension.applies(real)
    if why is None:
        why = next((f"{s.name}: {w}" for s in sims if (w := dimension.applies(s)) is not None), None)
    else:
        why = f"trace {real.name}: {why}"
    if why is not None:
        result.skipped = why
        return result
    real_m = dimension.measure(real, real)
    sim_ms = [dimension.measure(s, real) for s in sims]
    result.real, result.real_measurement, result.measurements = float(real_m.value), real_m, sim_ms
    result.details = dict(real_m.details)
    result.replicates = [float(m.value) for m in sim_ms]
    found = mean_interval(result.replicates)
    result.simulated, result.interval = found.mean, (found.low, found.high)
    result.distances = [distance(dimension.distance, real_m, m) for m in sim_ms]
    found = mean_interval(result.distances)
    result.distance, result.distance_interval = found.mean, (found.low, found.high)
    ratios = [_variance_ratio(real_m, m) for m in sim_ms]
    if real_m.per_user is not None and not all(math.isnan(r) for r in ratios):
        found = mean_interval(ratios)
        result.variance_ratio, result.variance_ratio_interval = found.mean, (found.low, found.high)
    for key in sorted({k for m in sim_ms for k in m.details}):
        values = [m.details[key] for m in sim_ms if key in m.details]
        result.details[f"simulated_{key}"] = float(np.mean(values)) if values else math.nan
    result.floor, result.floor_range = _floor(dimension, real, sims, splits, seed)
    return result


def _variance_ratio(real: Measurement, sim: Measurement) -> float:
    if real.per_user is None or sim.per_user is None or len(real.per_user) < 2 or len(sim.per_user) < 2:
        return math.nan
    real_var = float(np.var(real.per_user, ddof=1))
    return float(np.var(sim.per_user, ddof=1)) / real_var if real_var > 0 else math.nan


def units_of(trace: Trace, unit: str) -> list[Any]:
    if unit == "cascade":
        return list(range(len(trace.cascades)))
    return trace.user_index[0].tolist()


def part(trace: Trace, unit: str, chosen: list[Any]) -> Trace:
    return trace.of_cascades(chosen) if unit == "cascade" else trace.of_users(chosen)


def _floor(dimension: Any, real: Trace, sims: list[Trace], splits: int, seed: int) -> tuple[float, tuple[float, float]]:
    units = units_of(real, dimension.unit)
    size = int(np.median([len(units_of(s, dimension.unit)) for s in sims])) if sims else len(units) // 2
    k = max(1, min(size, len(units) // 2))
    if len(units) < 2 or splits < 1:
        return math.nan, (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(splits):
        order = rng.permutation(len(units))
        drawn = part(real, dimension.unit, [units[i] for i in order[:k]])
        rest = part(real, dimension.unit, [units[i] for i in order[k:]])
        found.append(distance(dimension.distance, dimension.measure(rest, real), dimension.measure(drawn, real)))
    values = np.asarray([v for v in found if not math.isnan(v)])
    if not len(values):
        return math.nan, (math.nan, math.nan)
    return float(values.mean()), (float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5)))
