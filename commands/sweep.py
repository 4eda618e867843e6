"""``townsquare sweep SCENARIO --vary KEY=V1,V2 [--vary ...] --seeds N --metric NAME ...``: what a
finding depends on.

Every combination of the varied settings (``--method grid``, the default) times every seed is one
ordinary run, ``<out>/<point>/seed-<S>``, played by a separate ``townsquare run`` process with the
machinery of ``townsquare ablate`` (:mod:`townsquare.commands.ablate`): resumable as a whole (a
finished run is skipped, a stopped or killed one resumed, a folder without a manifest started
again), ``--jobs`` at once. A point is a variant whose ``--set`` lines are its settings, so an
ablation is a sweep over plugin switches and a sweep a grid of variants.

Each run gives each metric one value (its summary over rounds: the last round's, the mean, or the
mean of the last K), and each point the mean over seeds with its 95 % Student-t interval
(:func:`townsquare.lib.stats.mean_interval`). Written to ``<out>``: ``sweep.md`` (printed),
``sweep.png`` (each metric against each setting, with the intervals) and ``sweep.json`` (a list
``points``, each with ``settings``, ``metric``, ``mean`` and ``interval``).

``--method morris`` and ``--method sobol`` sample the settings' ranges (each ``--vary``'s lowest and
highest value) with SALib (Morris's elementary effects, Campolongo et al.'s mu*; Sobol's indices
from Saltelli's scheme) and report each setting's influence on each metric: mu*, its 95 %
bootstrap interval and sigma for Morris; S1 and ST with their 95 % intervals for Sobol. SALib is
the ``sweep`` extra (included in ``test``).

Metric names (:data:`METRIC_SETS`): ``party`` (heard, came), ``cocoon`` (entropy, every genre and
first genre), ``conformity`` (rho, over all agents and over those who had not rated the movie
first), or any ``metrics`` row of a run (and ``compare``'s counts) with ``--summary``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import click

from townsquare.api import hookimpl
from townsquare.lib.stats import Interval, mean_interval
from townsquare.cli.options import common_options, llm_overrides, log_json
from townsquare.cli.progress import AblateProgress, progress_mode
from townsquare.commands.study_runs import Job, Variant, check_variants, end_rounds, run_jobs, summary_value
from townsquare.commands.compare import number_text, read_series
from townsquare.errors import UsageError
from townsquare.launch.scenario_files import override_lines, override_value, read_scenario

METHODS = ("grid", "morris", "sobol")


@dataclass(frozen=True)
class Measure:
    """A metric as a sweep reports it: its name, the run's series it is read from (a ``metrics``
    row, or a count ``compare`` reads) and how a run's series becomes one value."""

    name: str
    source: str
    summary: str = "last"
    about: str = ""

    def describe(self) -> str:
        how = {"last": "at the last round", "mean": "mean over rounds"}.get(self.summary) or \
            f"mean of the last {end_rounds(self.summary)} rounds"
        return f"{self.name} = {self.source} {how}" + (f" ({self.about})" if self.about else "")


#: ``--metric NAME`` for a study: the measures its finding is stated in
METRIC_SETS: dict[str, tuple[Measure, ...]] = {
    "party": (
        Measure("heard", "town_metrics.party.heard", "last", "agents who heard of the party: seed or a remembered conversation"),
        Measure("came", "town_metrics.party.attended_guests", "last", "guests at the place during the party, there for it"),
    ),
    "cocoon": (
        Measure("entropy", "cocoon_entropy.entropy", "end:5", "entropy of the recommended genres, every genre of an item"),
        Measure("entropy_first_genre", "cocoon_entropy.entropy_first_genre", "end:5", "the same, each item by its first genre"),
    ),
    "conformity": (
        Measure("rho", "conformity.rho", "last", "Spearman's rho of friends and each agent's attitude change"),
        Measure("rho_others", "conformity.rho_others", "last", "the same over the agents who had not rated it before the run"),
    ),
}


def measures(names: Sequence[str], summary: str) -> list[Measure]:
    """The measures ``--metric`` names: a study's set, or a run's metric read with ``summary``."""
    if not names:
        raise UsageError(f"give at least one --metric ({', '.join(METRIC_SETS)}, or a metric row such as town_metrics.density)")
    end_rounds(summary)
    found: list[Measure] = []
    for name in names:
        for measure in METRIC_SETS.get(name, (Measure(name, name, summary),)):
            if measure.name not in {m.name for m in found}:
                found.append(measure)
    return found


@dataclass(frozen=True)
class Setting:
    """One ``--vary KEY=V1,V2,...``: the key and its values, as ``--set`` reads them."""

    key: str
    values: tuple[Any, ...]

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(label(v) for v in self.values)

    def numeric(self) -> bool:
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.values)

    def integer(self) -> bool:
        return all(isinstance(v, int) and not isinstance(v, bool) for v in self.values)

    def bounds(self) -> tuple[float, float]:
        return float(min(self.values)), float(max(self.values))


def label(value: Any) -> str:
    """A value as a table, a folder name and a plot show it: a string as it is, else its TOML."""
    return value if isinstance(value, str) else override_lines({"v": value})[0][2:]


def parse_vary(spec: str) -> Setting:
    """``KEY=V1,V2,...``: the values as a TOML array (``4, 6``, ``0.5``, ``true``, ``"x"``,
    ``[1, 2]``), else, as ``--set`` takes text that is no TOML, comma-separated words."""
    key, sep, rest = spec.partition("=")
    key = key.strip()
    if not sep or not key or not rest.strip():
        raise UsageError(f"--vary {spec!r}: expected KEY=V1,V2,... (e.g. llm.news_importance=4,6,8)")
    try:
        values = tomllib.loads(f"v = [{rest}]")["v"]
    except tomllib.TOMLDecodeError:
        words = [w.strip() for w in rest.split(",")]
        if not all(words):
            raise UsageError(f"--vary {key}: an empty value in {rest!r}") from None
        values = [override_value(w) for w in words]
    labels = [label(v) for v in values]
    if len(set(labels)) < len(labels):
        raise UsageError(f"--vary {key}: a value repeats in {rest!r}")
    return Setting(key, tuple(values))


@dataclass(frozen=True)
class Point:
    """A combination of settings: (key, value, its label)."""

    settings: tuple[tuple[str, Any, str], ...]

    @classmethod
    def of(cls, pairs: Sequence[tuple[str, Any]]) -> "Point":
        return cls(tuple((key, value, label(value)) for key, value in pairs))

    @property
    def name(self) -> str:
        """The folder of its runs: ``news_importance=4`` (each key's last part), made safe."""
        text = ",".join(f"{key.rpartition('.')[2]}={raw}" for key, _, raw in self.settings)
        safe = re.sub(r"[^A-Za-z0-9_.,=+-]", "_", text)
        return safe if len(safe) <= 80 else f"{safe[:60]}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"

    def values(self) -> dict[str, Any]:
        return {key: value for key, value, _ in self.settings}

    def text(self, key: str) -> str:
        return next(raw for k, _, raw in self.settings if k == key)

    def variant(self, common: Sequence[str]) -> Variant:
        return Variant(self.name, [*common, *override_lines({key: value for key, value, _ in self.settings})])


def grid(settings: Sequence[Setting]) -> list[Point]:
    """Every combination, the first setting varying slowest."""
    return [Point.of(list(zip((s.key for s in settings), combo))) for combo in itertools.product(*(s.values for s in settings))]


def salib() -> Any:
    try:
        import SALib  # noqa: F401
    except ImportError:
        raise UsageError('--method morris/sobol needs SALib: pip install -e ".[sweep]" (or pip install SALib)') from None
    return SALib


@dataclass
class Design:
    """A sampled design (Morris or Sobol): SALib's problem, the sample matrix as run (integer
    settings rounded) and the point of each row."""

    method: str
    problem: dict[str, Any]
    X: Any
    rows: list[Point]
    levels: int = 0
    notes: list[str] = field(default_factory=list)


def morris_levels(settings: Sequence[Setting], wanted: int) -> int:
    """The most grid levels p <= ``wanted`` (even, as Morris's design needs) such that every
    integer setting's levels are whole numbers: (p - 1) divides its range."""
    for p in range(wanted - wanted % 2, 1, -2):
        if all(int(s.bounds()[1] - s.bounds()[0]) % (p - 1) == 0 for s in settings if s.integer()):
            return p
    return 2


def sampled(settings: Sequence[Setting], method: str, samples: int, levels: int, seed: int) -> Design:
    salib()
    import numpy as np

    for s in settings:
        if not s.numeric() or len(s.values) < 2 or s.bounds()[0] == s.bounds()[1]:
            raise UsageError(f"--vary {s.key}: --method {method} samples a range: give numbers, the lowest and the highest (e.g. {s.key}=1,10)")
    problem = {"num_vars": len(settings), "names": [s.key for s in settings], "bounds": [list(s.bounds()) for s in settings]}
    notes = []
    if method == "morris":
        from SALib.sample import morris as morris_sample

        p = morris_levels(settings, levels)
        if p != levels:
            notes.append(f"Morris levels {p} (not {levels}): the integer settings' levels must be whole numbers")
        X = morris_sample.sample(problem, samples, num_levels=p, seed=seed)
    else:
        from SALib.sample import sobol as sobol_sample

        p = 0
        X = sobol_sample.sample(problem, samples, calc_second_order=False, seed=seed)
    X = np.array(X, dtype=float)
    for j, s in enumerate(settings):
        if s.integer():
            X[:, j] = np.round(X[:, j])
    if method == "sobol" and any(s.integer() for s in settings):
        notes.append("integer settings are rounded: the indices are those of the rounded inputs")
    rows = [Point.of([(s.key, int(v) if s.integer() else float(v)) for s, v in zip(settings, x)]) for x in X]
    return Design(method, problem, X, rows, p, notes)


# --------------------------------------------------------------------------- results


@dataclass
class Cell:
    """One point's value of one measure over seeds."""

    point: Point
    measure: Measure
    values: list[float]
    seeds: list[int]
    interval: Interval


def tabulate(points: Sequence[Point], jobs: Sequence[Job], chosen: Sequence[Measure]) -> list[Cell]:
    """Per point and measure: each finished run's value and their mean with its interval."""
    by_point: dict[str, dict[int, dict[str, dict[int, float]]]] = {}
    for job in jobs:
        if job.status() == "finished":
            by_point.setdefault(job.variant.name, {})[job.seed] = read_series(job.path).series
    cells = []
    for point in points:
        runs = by_point.get(point.name, {})
        for measure in chosen:
            found = {seed: summary_value(series[measure.source], measure.summary)
                     for seed, series in sorted(runs.items()) if series.get(measure.source)}
            cells.append(Cell(point, measure, list(found.values()), list(found), mean_interval(list(found.values()))))
    return cells


def unmeasured(chosen: Sequence[Measure], scenario: Any) -> list[str]:
    """Measures whose metric the scenario does not run (``town_metrics.party.heard`` needs the
    metric ``town_metrics``); compare's counts (``rounds.*``, ``posts.count``) are always there."""
    running = {choice.spec.name for choice in scenario.metrics}
    return [f"{m.name} needs the metric {m.source.split('.')[0]}" for m in chosen
            if m.source.split(".")[0] not in ("rounds", "posts") and m.source.split(".")[0] not in running]


def missing_metrics(cells: Sequence[Cell], jobs: Sequence[Job]) -> list[str]:
    """Measures no finished run recorded (a misspelt name, or a metric the scenario does not run)."""
    finished = any(job.status() == "finished" for job in jobs)
    return [m.name + (f" ({m.source})" if m.source != m.name else "") for m in dict.fromkeys(c.measure for c in cells)
            if finished and not any(c.values for c in cells if c.measure == m)]


def interval_text(interval: Interval) -> str:
    if interval.n == 0:
        return "-"
    if math.isnan(interval.low):
        return f"{number_text(interval.mean)} (n={interval.n})"
    return f"{number_text(interval.mean)} [{number_text(interval.low)}, {number_text(interval.high)}]"


def markdown(cells: Sequence[Cell], settings: Sequence[Setting], seeds: Sequence[int]) -> str:
    """One row per point, a column per measure: mean over seeds [95 % interval]."""
    chosen = list(dict.fromkeys(c.measure for c in cells))
    points = list({c.point.name: c.point for c in cells}.values())
    lines = ["Per run: " + "; ".join(m.describe() for m in chosen) + ".",
             f"Per point: the mean over seeds {', '.join(map(str, seeds))} [its 95 % confidence interval, Student's t].", "",
             "| " + " | ".join([*(s.key for s in settings), *(m.name for m in chosen), "n"]) + " |",
             "|" + "---:|" * len(settings) + "---|" * len(chosen) + "---:|"]
    at = {(c.point.name, c.measure): c for c in cells}
    for point in points:
        n = max((at[point.name, m].interval.n for m in chosen), default=0)
        lines.append("| " + " | ".join([*(raw for _, _, raw in point.settings),
                                         *(interval_text(at[point.name, m].interval) for m in chosen), str(n)]) + " |")
    return "\n".join(lines) + "\n"


def plot(cells: Sequence[Cell], settings: Sequence[Setting], path: Path) -> Path:
    """A panel per measure and setting: the measure's mean (with its interval) against the
    setting's values, a line per combination of the other settings."""
    from townsquare.commands.study_plots import figure, save

    chosen = list(dict.fromkeys(c.measure for c in cells))
    fig, axes = figure(len(chosen), len(settings), width=4.2 * len(settings), height=2.9 * len(chosen))
    for row, measure in enumerate(chosen):
        mine = [c for c in cells if c.measure == measure]
        for col, setting in enumerate(settings):
            ax = axes[row * len(settings) + col]
            others = [s.key for s in settings if s.key != setting.key]
            lines: dict[tuple, list[Cell]] = {}
            for cell in mine:
                values = dict((k, raw) for k, _, raw in cell.point.settings)
                lines.setdefault(tuple(values[k] for k in others), []).append(cell)
            for label, group in lines.items():
                group.sort(key=lambda c: setting.texts.index(c.point.text(setting.key)))
                xs = [c.point.values()[setting.key] for c in group] if setting.numeric() else \
                    [setting.texts.index(c.point.text(setting.key)) for c in group]
                ys = [c.interval.mean for c in group]
                err = [[0 if math.isnan(c.interval.low) else c.interval.mean - c.interval.low for c in group],
                       [0 if math.isnan(c.interval.high) else c.interval.high - c.interval.mean for c in group]]
                name = ", ".join(f"{k.rpartition('.')[2]}={v}" for k, v in zip(others, label)) or None
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=name)
            if not setting.numeric():
                ax.set_xticks(range(len(setting.values)), setting.texts, fontsize=7)
            ax.set_xlabel(setting.key, fontsize=8)
            ax.set_ylabel(measure.name, fontsize=8)
            if others and len(lines) > 1:
                ax.legend(fontsize=6)
    return save(fig, path)


def influence(design: Design, cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """Each setting's influence on each measure (SALib's analysis of the design's rows; a
    row's output is its point's mean over seeds)."""
    import numpy as np

    rows = []
    for measure in dict.fromkeys(c.measure for c in cells):
        means = {c.point.name: c.interval.mean for c in cells if c.measure == measure}
        Y = np.array([means.get(point.name, math.nan) for point in design.rows], dtype=float)
        if np.isnan(Y).any():
            raise UsageError(f"{measure.name}: {int(np.isnan(Y).sum())} of the design's {len(Y)} points have no finished run; "
                             "run the same command again to finish them")
        if design.method == "morris":
            from SALib.analyze import morris

            found = morris.analyze(design.problem, design.X, Y, num_levels=design.levels, seed=1)
            for j, name in enumerate(design.problem["names"]):
                rows.append({"setting": name, "metric": measure.name, "mu_star": float(found["mu_star"][j]),
                             "mu_star_interval": [float(found["mu_star"][j] - found["mu_star_conf"][j]),
                                                  float(found["mu_star"][j] + found["mu_star_conf"][j])],
                             "mu": float(found["mu"][j]), "sigma": float(found["sigma"][j])})
        else:
            from SALib.analyze import sobol

            found = sobol.analyze(design.problem, Y, calc_second_order=False, seed=1)
            for j, name in enumerate(design.problem["names"]):
                rows.append({"setting": name, "metric": measure.name,
                             **{key: float(found[key][j]) for key in ("S1", "ST")},
                             **{f"{key}_interval": [float(found[key][j] - found[f"{key}_conf"][j]),
                                                    float(found[key][j] + found[f"{key}_conf"][j])] for key in ("S1", "ST")}})
    return rows


def influence_markdown(method: str, rows: Sequence[dict[str, Any]]) -> str:
    if method == "morris":
        head = ["| metric | setting | mu* | 95 % interval | mu | sigma |", "|---|---|---:|---|---:|---:|"]
        body = [f"| {r['metric']} | {r['setting']} | {number_text(r['mu_star'])} | [{number_text(r['mu_star_interval'][0])}, "
                f"{number_text(r['mu_star_interval'][1])}] | {number_text(r['mu'])} | {number_text(r['sigma'])} |" for r in rows]
        what = ("Morris's elementary effects: mu* the mean absolute effect of a step of the setting (its influence), "
                "sigma their spread (interaction or non-linearity); the interval is SALib's bootstrap of mu*.")
    else:
        head = ["| metric | setting | S1 | 95 % interval | ST | 95 % interval |", "|---|---|---:|---|---:|---|"]
        body = [f"| {r['metric']} | {r['setting']} | {number_text(r['S1'])} | [{number_text(r['S1_interval'][0])}, "
                f"{number_text(r['S1_interval'][1])}] | {number_text(r['ST'])} | [{number_text(r['ST_interval'][0])}, "
                f"{number_text(r['ST_interval'][1])}] |" for r in rows]
        what = ("Sobol's indices: S1 the share of the metric's variance the setting explains alone, ST with all its "
                "interactions; the intervals are SALib's bootstrap.")
    return "\n".join([what, "", *head, *body]) + "\n"


def influence_plot(method: str, rows: Sequence[dict[str, Any]], path: Path) -> Path:
    from townsquare.commands.study_plots import figure, save

    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    fig, axes = figure(1, len(metrics), width=4.2 * len(metrics), height=3.0)
    key = "mu_star" if method == "morris" else "ST"
    for ax, metric in zip(axes, metrics):
        mine = [r for r in rows if r["metric"] == metric]
        values = [r[key] for r in mine]
        err = [[r[key] - r[f"{key}_interval"][0] for r in mine], [r[f"{key}_interval"][1] - r[key] for r in mine]]
        ax.bar(range(len(mine)), values, yerr=err, capsize=3, color="#669bbc")
        ax.set_xticks(range(len(mine)), [r["setting"] for r in mine], rotation=20, fontsize=7)
        ax.set_title(f"{metric}: {'mu*' if method == 'morris' else 'ST'}", fontsize=9)
    return save(fig, path)


def sweep_json(scenario: str, method: str, settings: Sequence[Setting], seeds: Sequence[int], cells: Sequence[Cell],
               rows: Sequence[dict[str, Any]] | None = None, design: Design | None = None) -> dict[str, Any]:
    def number(value: float) -> float | None:
        return None if math.isnan(value) else value

    out: dict[str, Any] = {
        "scenario": scenario, "method": method, "seeds": list(seeds),
        "settings": [{"key": s.key, "values": list(s.values)} for s in settings],
        "metrics": [{"name": m.name, "source": m.source, "summary": m.summary, "about": m.about}
                    for m in dict.fromkeys(c.measure for c in cells)],
        "points": [{"settings": c.point.values(), "metric": c.measure.name, "mean": number(c.interval.mean),
                    "interval": [number(c.interval.low), number(c.interval.high)], "n": c.interval.n,
                    "values": c.values, "seeds": c.seeds, "runs": c.point.name} for c in cells],
    }
    if design is not None:
        out["design"] = {"levels": design.levels, "rows": [p.values() for p in design.rows], "notes": design.notes}
        out["influence"] = list(rows or [])
    return out


def default_jobs(scenario: Any) -> int:
    """Runs at once: one per CPU, or one in all where a run takes every core itself (the
    embedded local model, whose threads use them all) or spreads over Ray."""
    llm = scenario.llm.spec.name if scenario.llm is not None else ""
    if llm == "local" or scenario.model.engine.backend == "ray":
        return 1
    return os.cpu_count() or 1


def estimate_lines(scenario: str, points: Sequence[Point], seeds: Sequence[int], common: Sequence[str],
                   plugin_options: Sequence[str]) -> list[str]:
    """Calls, tokens and cost of the sweep: a dry run per distinct point (its first seed; the
    oracle's dispositions change no count: a stand-in answers), times the seeds."""
    from townsquare.commands.dry_run import cost_of, format_table
    from townsquare.commands.typical_answers import estimate_scenario

    rows, done = [], {}
    for point in points:
        kept = tuple(o for o in point.variant(common).overrides if not is_disposition(o))
        if kept not in done:
            done[kept] = estimate_scenario(scenario, overrides=kept, seed=seeds[0], plugin_options=plugin_options)
        estimate = done[kept]
        calls, prompt, completion = (n * len(seeds) for n in estimate.totals())
        rows.append((point.name, len(seeds), calls, prompt, completion, cost_of(prompt, completion, estimate.prices())))
    costs = [r[5] for r in rows]
    total = sum(costs) if all(c is not None for c in costs) else None
    table = format_table(("point", "runs", "calls", "prompt tokens", "completion tokens", "cost"),
                         [*rows, ("total", sum(r[1] for r in rows), *(sum(r[i] for r in rows) for i in (2, 3, 4)), total)])
    return [f"ESTIMATE for sweep of {scenario}: {len(points)} points x {len(seeds)} seeds, a dry run per point with a stand-in "
            "model (not a language model: a real model's answers change what agents do next, and so the counts).", *table,
            "no price table: set llm.price_prompt_per_1k and llm.price_completion_per_1k for a cost." if total is None else
            "prices from the scenario's [llm] table."]


def is_disposition(override: str) -> bool:
    """An ``llm.`` setting that changes how a model answers, not what it is asked (a stand-in
    answers a dry run whatever it says); prices and the provider's name and model stay."""
    key = override.partition("=")[0].strip()
    return key.startswith("llm.") and key not in ("llm.name", "llm.model") and not key.startswith("llm.price")


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.command("sweep")
    @click.argument("scenario", type=click.Path(dir_okay=False, exists=True))
    @click.option("--vary", "vary", multiple=True, required=True, metavar="KEY=V1,V2,...",
                  help="A setting and its values (repeat for several; every combination is a point).")
    @click.option("--metric", "metric_names", multiple=True, metavar="NAME",
                  help=f"A study's measures ({', '.join(METRIC_SETS)}) or a run's metric row (repeat).")
    @click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Runs per point (seeds from the scenario's seed on).")
    @click.option("--first-seed", type=int, default=None, help="First seed (default: the scenario's seed).")
    @click.option("--method", type=click.Choice(METHODS), default="grid", show_default=True,
                  help="Every combination (grid), or SALib's Morris or Sobol design over the settings' ranges.")
    @click.option("--samples", type=click.IntRange(min=2), default=8, show_default=True,
                  help="morris: trajectories ((settings + 1) points each); sobol: base samples ((settings + 2) points each; a power of 2).")
    @click.option("--levels", type=click.IntRange(min=2), default=4, show_default=True, help="morris: grid levels of each range.")
    @click.option("--summary", default="last", show_default=True, metavar="last|mean|end:K",
                  help="A run's value of a metric row named by --metric: its last round's, its mean, or the mean of its last K rounds.")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key in every run.")
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None, help="The runs' LLM, as for run.")
    @click.option("--jobs", type=click.IntRange(min=1), default=None,
                  help="Runs at once (default: the CPU count; 1 with the embedded local model or Ray).")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Folder of the runs and results (default runs/sweep-<scenario>).")
    @click.option("--estimate", is_flag=True, help="Print the calls, tokens and cost of every run; run nothing.")
    @common_options
    def sweep(scenario: str, vary: tuple[str, ...], metric_names: tuple[str, ...], seeds: int, first_seed: int | None, method: str,
              samples: int, levels: int, summary: str, overrides: tuple[str, ...], llm_spec: str | None, jobs: int | None,
              out: str | None, estimate: bool, plugin_options: tuple[str, ...], **_: Any) -> None:
        """Run SCENARIO at every combination of settings x seed (resumable), then each metric per point with its 95 % interval."""
        from townsquare.plugin_manager import make_plugin_manager, parse_plugin_options
        from townsquare.launch.scenario_files import load_scenario

        settings = [parse_vary(spec) for spec in vary]
        keys = [s.key for s in settings]
        if len(set(keys)) < len(keys):
            raise UsageError(f"--vary: a key repeats ({', '.join(keys)})")
        chosen = measures(metric_names, summary)
        if method == "grid" and seeds < 2:
            raise UsageError("--seeds must be at least 2 (a confidence interval needs two runs)")
        base = int(read_scenario(scenario).get("seed", 0)) if first_seed is None else first_seed
        seed_list = [base + i for i in range(seeds)]
        design = sampled(settings, method, samples, levels, base) if method != "grid" else None
        points = list({p.name: p for p in design.rows}.values()) if design else grid(settings)
        common = [*llm_overrides(llm_spec), *overrides]
        variants = [point.variant(common) for point in points]
        check_variants(scenario, variants, plugin_options, what="--vary: point")
        if estimate:
            for line in estimate_lines(scenario, points, seed_list, common, plugin_options):
                click.echo(line)
            return
        folder = Path(out) if out else Path("runs") / f"sweep-{Path(scenario).stem}"
        planned = [Job(variant, seed, folder / variant.name / f"seed-{seed}") for variant in variants for seed in seed_list]
        enable, disable = parse_plugin_options(plugin_options)
        first = load_scenario(scenario, variants[0].overrides, make_plugin_manager(enable=enable, disable=disable))
        absent = unmeasured(chosen, first)
        if absent:
            raise UsageError(f"--metric: {'; '.join(absent)}, which {scenario} does not run "
                             f"(its metrics: {', '.join(c.spec.name for c in first.metrics) or 'none'})")
        workers = jobs or default_jobs(first)
        if design is not None:
            for note in design.notes:
                click.echo(f"note: {note}", err=True)
        click.echo(f"sweep: {len(points)} points x {len(seed_list)} seeds = {len(planned)} runs, {workers} at once, in {folder}", err=True)
        runs = {v.name: len(seed_list) for v in variants}
        with AblateProgress(progress_mode(log_json=log_json()), runs if len(runs) <= 12 else {"sweep": len(planned)}) as progress:
            run_jobs(scenario, planned, workers=workers, common=[a for p in plugin_options for a in ("-p", p)],
                     on_done=lambda job, outcome: progress.done(job.variant.name if len(runs) <= 12 else "sweep", job.seed, outcome,
                                                                label=job.variant.name))
        cells = tabulate(points, planned, chosen)
        absent = missing_metrics(cells, planned)
        if absent:
            raise UsageError(f"--metric: no finished run recorded {', '.join(absent)} (a metric of the scenario's [metrics]? "
                             f"study sets: {', '.join(METRIC_SETS)})")
        text = markdown(cells, settings, seed_list)
        rows = influence(design, cells) if design is not None else None
        if rows is not None:
            text += "\n" + influence_markdown(method, rows)
        click.echo(text)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sweep.md").write_text(text, encoding="utf-8")
        (folder / "sweep.json").write_text(json.dumps(sweep_json(scenario, method, settings, seed_list, cells, rows, design), indent=1),
                                           encoding="utf-8")
        picture = plot(cells, settings, folder / "sweep.png") if design is None else influence_plot(method, rows, folder / "sweep.png")
        click.echo(f"written: {folder / 'sweep.md'}, {folder / 'sweep.json'}, plot: {picture}", err=True)
        failed = [job for job in planned if job.status() != "finished"]
        if failed:
            raise UsageError(f"{len(failed)} of {len(planned)} runs did not finish (first: {failed[0].path}); "
                             "run the same command again to resume them")
