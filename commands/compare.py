"""``townsquare compare RUN_A RUN_B ...``: metric deltas after a branch point.

Each run's per-round series come from its ``events.sqlite``: every ``metrics`` row, plus the
``rounds`` table's counts (``rounds.active``, ``rounds.actions``, ``rounds.llm_calls``) and posts
written per round (``posts.count``). The branch point is the largest ``branch.at`` among the
runs' manifests (0 when none is a branch); a metric's value for a run is its mean over the
rounds from the branch point on, and the delta is against the first run (the reference:
usually the parent, or the first counterfactual feed).
"""

from __future__ import annotations

import csv
import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import click

from townsquare.api import hookimpl
from townsquare.cli.options import common_options
from townsquare.errors import UsageError
from townsquare.launch.run_lock import open_run

Series = dict[str, dict[int, float]]


@dataclass
class RunSeries:
    label: str
    path: Path
    at: int
    series: Series


@dataclass
class Comparison:
    at: int
    runs: list[RunSeries]
    #: metric -> mean over rounds >= at, one per run (nan where a run lacks the metric)
    means: dict[str, list[float]] = field(default_factory=dict)

    def deltas(self, metric: str) -> list[float]:
        values = self.means[metric]
        return [v - values[0] for v in values]


def read_series(path: str | Path) -> RunSeries:
    run = open_run(path)
    manifest = run.read_manifest()
    if not run.events_path.is_file():
        raise UsageError(f"{path}: no events.sqlite yet (the run has not started): nothing to compare")
    db = sqlite3.connect(f"file:{run.events_path}?mode=ro", uri=True)
    series: Series = {}
    try:
        for round, name, value in db.execute("SELECT round, name, value FROM metrics ORDER BY round, name"):
            series.setdefault(name, {})[int(round)] = float(value)
        for round, active, actions, calls in db.execute("SELECT round, active, actions, llm_calls FROM rounds ORDER BY round"):
            for name, value in (("rounds.active", active), ("rounds.actions", actions), ("rounds.llm_calls", calls)):
                series.setdefault(name, {})[int(round)] = float(value or 0)
        posts = dict(db.execute("SELECT round, COUNT(*) FROM posts GROUP BY round").fetchall())
        series["posts.count"] = {r: float(posts.get(r, 0)) for r in series.get("rounds.active", {})}
    finally:
        db.close()
    at = int((manifest.get("branch") or {}).get("at", 0))
    return RunSeries(label=run.path.name, path=run.path, at=at, series=series)


def compare_runs(paths: Sequence[str | Path], metrics: Sequence[str] = ()) -> Comparison:
    if len(paths) < 2:
        raise UsageError("compare needs at least two run directories")
    runs = [read_series(p) for p in paths]
    labels = [r.label for r in runs]
    if len(set(labels)) < len(labels):  # two runs named alike in different folders
        for run in runs:
            run.label = f"{run.path.parent.name}/{run.path.name}"
    at = max(r.at for r in runs)
    names = sorted({name for r in runs for name in r.series})
    if metrics:
        unknown = [m for m in metrics if m not in names]
        if unknown:
            raise UsageError(f"--metric {unknown[0]}: no such metric in these runs (known: {', '.join(names)})")
        names = list(metrics)
    comparison = Comparison(at=at, runs=runs)
    for name in names:
        comparison.means[name] = [_mean_after(r.series.get(name, {}), at) for r in runs]
    return comparison


def _mean_after(values: dict[int, float], at: int) -> float:
    after = [v for r, v in values.items() if r >= at]
    return sum(after) / len(after) if after else math.nan


def format_table(comparison: Comparison) -> str:
    """A plain-text table: the reference's mean, then each other run's mean and its delta."""
    ref, others = comparison.runs[0], comparison.runs[1:]
    headers = ["metric", ref.label] + [f"{r.label} (Δ)" for r in others]
    rows = []
    for name, values in comparison.means.items():
        deltas = comparison.deltas(name)
        rows.append([name, number_text(values[0])] + [f"{number_text(v)} ({signed_text(d)})" for v, d in zip(values[1:], deltas[1:])])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = [f"mean per round from round {comparison.at} on (Δ: minus {ref.label})",
             "  ".join(h.ljust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def write_csv(comparison: Comparison, path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["metric", "run", "path", "from_round", "mean", "delta"])
        for name, values in comparison.means.items():
            for run, value, delta in zip(comparison.runs, values, comparison.deltas(name)):
                writer.writerow([name, run.label, str(run.path), comparison.at, value, delta])
    return path


def plot(comparison: Comparison, path: Path, max_metrics: int = 12) -> Path:
    """One panel per metric, one line per run, the branch point marked."""
    from townsquare.commands.study_plots import figure, save

    names = list(comparison.means)[:max_metrics]
    cols = min(3, max(1, len(names)))
    rows = math.ceil(len(names) / cols)
    fig, axes = figure(rows, cols, width=4.2 * cols, height=2.8 * rows)
    for ax, name in zip(axes, names):
        for run in comparison.runs:
            points = sorted(run.series.get(name, {}).items())
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], label=run.label, linewidth=1.4)
        ax.axvline(comparison.at - 0.5, color="#555555", linestyle="--", linewidth=0.8)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("round", fontsize=8)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    if names:
        axes[0].legend(fontsize=7)
    return save(fig, path)


def number_text(value: float) -> str:  # also the ablation table's number format
    return "-" if math.isnan(value) else f"{value:.4g}"


def signed_text(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:+.4g}"


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.command("compare")
    @click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True))
    @click.option("--metric", "metrics", multiple=True, metavar="NAME", help="Only these metrics (default: all).")
    @click.option("--out", type=click.Path(file_okay=False), default=None,
                  help="Folder for compare.csv and compare.png (default: LAST_RUN/compare, inside the last run given).")
    @common_options
    def compare(run_dirs: tuple[str, ...], metrics: tuple[str, ...], out: str | None, **_: Any) -> None:
        """Metric means after the branch point, side by side, with deltas against the first run."""
        comparison = compare_runs(run_dirs, metrics)
        click.echo(format_table(comparison))
        folder = Path(out) if out is not None else Path(run_dirs[-1]) / "compare"
        folder.mkdir(parents=True, exist_ok=True)
        click.echo(f"table: {write_csv(comparison, folder / 'compare.csv')}", err=True)
        click.echo(f"plot: {plot(comparison, folder / 'compare.png')}", err=True)
