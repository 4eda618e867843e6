"""Fitting what decides when agents act to a trace of real people.

Two parts of the activity model (:mod:`townsquare.activity`) are fitted:

- the **hour-of-day profile** (``[activity] hourly``): the trace's events over the 24 hours of
  its clock (after ``--utc-offset``), each hour's weight its share of events times 24 (mean 1),
  with one event added to every hour so that no hour is closed for want of data. Traces
  without clock times (Twitter15/16) keep the scenario's profile.
- the **Pareto activity levels** (``alpha``, ``x_min``; RecAgent eq. 1). RecAgent fits p(x) to
  datasets with the users' interaction counts as their activity levels (Supp. A.5); the
  trace's own Pareto alpha, as ``validate``'s ``activity_per_user`` fits it, is reported as
  ``trace_alpha``. A level is sessions per simulated day, and a run sees a level only through
  what it makes of it: a Bernoulli draw each round with probability 1 - exp(-x * w * m / 1440)
  (capped at one session a round, where a high level saturates), over the scenario's rounds,
  and the events each session yields. So the fit is of the model as the scenario plays it:
  for each (alpha, x_min) on a grid (alpha 0.2-4 by 0.1, x_min 0.005-50 sessions a day on a
  log scale), the activity model is drawn for the scenario's agents, rounds, clock and hourly
  profile (``draws`` times, with the same random numbers at every grid point), each session
  is given a number of events drawn from what sessions yielded in the runs before (events per
  agent and round among the agents active then; 1 without runs), and the distance to the
  trace is the one ``validate``'s ``activity_per_user`` reports (the two-sample KS statistic of
  the shape of events per user, users without events left out). The grid point with
  the smallest mean distance is refined once on a grid ten times finer around it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from townsquare.api import UsageError, active_probabilities, hour_weight, pareto_inverse_cdf
from townsquare.lib.files import read_user_text
from townsquare.lib.validation import Trace

from .dimensions.activity_per_user import pareto_fit, shape_sample
from .distances import ks_statistic
from .table import write_text

ALPHAS = np.round(np.arange(0.2, 4.0001, 0.1), 3)
X_MINS = np.geomspace(0.005, 50.0, 41)


@dataclass
class ActivityFit:
    alpha: float
    x_min: float
    hourly: list[float] | None
    #: the model's mean KS distance from the trace at the fit, and at the scenario's own settings
    expected_ks: float
    expected_ks_before: float
    #: the trace's Pareto alpha (as ``activity_per_user`` fits it) and its users
    trace_alpha: float
    trace_users: int
    #: events per session the fit assumed: their mean, and how many sessions they came from
    session_mean: float
    sessions_seen: int

    def as_json(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Clock:
    """What of a scenario decides how a level becomes sessions."""

    agents: int
    rounds: int
    minutes: int
    start: datetime


def hourly_profile(real: Trace) -> list[float] | None:
    if not real.absolute_times or not len(real):
        return None
    counts = np.bincount((real.times % 86400 // 3600).astype(int), minlength=24)[:24] + 1.0
    return [round(float(w), 4) for w in counts * 24 / counts.sum()]




def session_sizes(runs: list[Path]) -> np.ndarray:
    """Events per active agent and round in ``runs``: the sessions with events, and a 0 for every
    active agent-round that made none (``rounds.active`` counts the active agents)."""
    sizes: list[int] = []
    for run in runs:
        db = sqlite3.connect(f"file:{Path(run) / 'events.sqlite'}?mode=ro", uri=True)
        try:
            made = [n for (n,) in db.execute(
                "SELECT COUNT(*) FROM actions WHERE ok = 1 AND kind IN ('watch', 'post', 'comment', 'reblog', 'like') "
                "GROUP BY round, agent_id")]
            active = db.execute("SELECT COALESCE(SUM(active), 0) FROM rounds").fetchone()[0]
        finally:
            db.close()
        sizes += made + [0] * max(0, int(active) - len(made))
    return np.asarray(sizes, dtype=np.int64)


class ActivityModel:
    """The activity model as a scenario plays it, drawn with fixed random numbers."""

    def __init__(self, clock: Clock, hourly: list[float] | None, sizes: np.ndarray, draws: int, seed: int):
        rng = np.random.default_rng(seed)
        self.clock = clock
        self.weights = np.asarray([hour_weight(hourly, clock.start + timedelta(minutes=r * clock.minutes), clock.minutes)
                                   for r in range(clock.rounds)])
        self.level_uniforms = rng.random((draws, clock.agents))
        self.round_uniforms = rng.random((draws, clock.rounds, clock.agents))
        self.sizes = sizes if len(sizes) else np.ones(1, dtype=np.int64)
        self.size_uniforms = rng.random((draws, clock.rounds, clock.agents))

    def events(self, alpha: float, x_min: float, draw: int) -> np.ndarray:
        """Events per agent with at least one, in draw ``draw``."""
        levels = pareto_inverse_cdf(self.level_uniforms[draw], alpha, x_min)
        p = active_probabilities(levels[None, :] * self.weights[:, None], self.clock.minutes)
        active = self.round_uniforms[draw] < p
        made = self.sizes[(self.size_uniforms[draw] * len(self.sizes)).astype(np.int64)]
        counts = (active * made).sum(axis=0)
        return counts[counts > 0]

    def distance(self, target: np.ndarray, alpha: float, x_min: float) -> float:
        found = []
        for draw in range(len(self.level_uniforms)):
            counts = self.events(alpha, x_min, draw)
            found.append(ks_statistic(target, shape_sample(counts)) if len(counts) >= 2 else 1.0)
        return float(np.mean(found))


def fit_activity(real: Trace, clock: Clock, sizes: np.ndarray, before: tuple[float, float], hourly_before: list[float] | None,
                 draws: int = 3, seed: int = 0) -> ActivityFit:
    counts = real.events_per_user().astype(np.float64)
    if len(counts) < 10:
        raise UsageError(f"{real.name}: {len(counts)} users with events: too few to fit an activity distribution to")
    target = shape_sample(counts)
    hourly = hourly_profile(real) or hourly_before
    model = ActivityModel(clock, hourly, sizes, draws, seed)
    best = min((model.distance(target, a, x), a, x) for a in ALPHAS for x in X_MINS)
    _, a0, x0 = best
    finer = min((model.distance(target, a, x), a, x) for a in np.round(np.arange(a0 - 0.1, a0 + 0.1001, 0.01), 3) if a > 0
                for x in x0 * np.geomspace(X_MINS[0] / X_MINS[1], X_MINS[1] / X_MINS[0], 11))
    distance, alpha, x_min = min(best, finer)
    before_model = ActivityModel(clock, hourly_before, sizes, draws, seed)
    return ActivityFit(alpha=round(float(alpha), 3), x_min=float(f"{x_min:.4g}"), hourly=hourly, expected_ks=distance,
                       expected_ks_before=before_model.distance(target, before[0], before[1]), trace_alpha=pareto_fit(counts)[0],
                       trace_users=len(counts), session_mean=float(model.sizes.mean()), sessions_seen=len(sizes))


# --------------------------------------------------------------------------- the calibrated scenario

TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\s*(#.*)?$")


def activity_table(fit: ActivityFit, against: str) -> str:
    lines = [f"[activity]                         # calibrated to {against} by townsquare calibrate",
             'model = "pareto"', f"alpha = {fit.alpha}", f"x_min = {fit.x_min}"]
    if fit.hourly is not None:
        lines.append("hourly = [" + ", ".join(f"{w:g}" for w in fit.hourly) + "]   # 0:00 first, mean 1")
    return "\n".join(lines) + "\n"


def with_activity(text: str, table: str, source: str) -> str:
    """The scenario ``text`` with its top-level ``[activity]`` table replaced by ``table`` (or
    ``table`` added before the first table), everything else as it was."""
    lines = text.splitlines(keepends=True)
    headers = [(n, m.group(1).strip()) for n, line in enumerate(lines) if (m := TABLE.match(line)) and not line.lstrip().startswith("[[")]
    arrays = [n for n, line in enumerate(lines) if line.lstrip().startswith("[[")]
    starts = sorted([n for n, _ in headers] + arrays)
    mine = [n for n, name in headers if name == "activity"]
    if mine:
        start = mine[0]
        end = next((n for n in starts if n > start), len(lines))
        return "".join(lines[:start]) + table + ("\n" if end < len(lines) else "") + "".join(lines[end:])
    if re.search(r"^\s*activity\s*[.=]", text, re.MULTILINE):
        raise UsageError(f"{source}: writes activity as dotted keys or an inline table: calibrate rewrites an [activity] table; "
                         "write it as one")
    first = starts[0] if starts else len(lines)
    return "".join(lines[:first]) + ("\n" if first and lines[first - 1].strip() else "") + table + "\n" + "".join(lines[first:])


def write_scenario(scenario: Path, fit: ActivityFit, against: str, out: Path, force: bool) -> Path:
    import tomllib

    if out.exists() and not force:
        raise UsageError(f"--write {out}: exists already (add --force to replace it)")
    result = with_activity(read_user_text(scenario, "scenario"), activity_table(fit, against), str(scenario))
    written = tomllib.loads(result).get("activity", {})
    assert written.get("alpha") == fit.alpha, "the calibrated [activity] table did not come out as written"
    return write_text(out, result, "--write")


def population_activity(data: dict[str, Any], source: str) -> None:
    """Calibrate fits the scenario's ``[activity]``: a population with its own is refused."""
    for n, population in enumerate(data.get("populations") or []):
        if isinstance(population, dict) and population.get("activity"):
            raise UsageError(f"{source}: populations[{n}].activity overrides [activity]: calibrate fits the scenario's "
                             "[activity]; remove the population's table first")


def planners_of(runs: list[Path]) -> list[str]:
    """The planners that filled a slot in ``runs`` (a planner may overrule the activity draw)."""
    found = set()
    for run in runs:
        manifest = json.loads((Path(run) / "manifest.json").read_text(encoding="utf-8"))
        for row in manifest.get("slot_table") or []:
            if isinstance(row, dict) and row.get("slot") == "planner" and row.get("component") not in (None, "", "-"):
                found.add(str(row["component"]))
    return sorted(found)
