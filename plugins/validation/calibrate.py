"""``townsquare calibrate SCENARIO --against DATASET --write OUT.toml``: fit when agents act to a
trace of real people, write the calibrated scenario, and show ``validate``'s distances before
and after.

::

    townsquare calibrate examples/recagent.toml --against movielens-100k --write recagent_calibrated.toml
    townsquare calibrate SCENARIO --against DATASET --write OUT.toml --seeds 5 --json
    townsquare calibrate SCENARIO --against DATASET --write OUT.toml --no-runs    # fit and write only

The scenario runs ``--seeds`` times (seeds from its own), the activity model is fitted
(:mod:`.calibration`: the Pareto levels and the hour-of-day profile), OUT.toml is the scenario
with its ``[activity]`` table replaced (everything else as written), and OUT.toml runs with the
same seeds. Both sets of runs are scored by ``validate``; the table shows each dimension's
distance before and after, the activity distance's paired difference by seed, and the trace's
floor. Runs go to ``--out`` (default ``runs/<name>-calibrate/``), ``before/`` and ``after/``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from townsquare.api import UsageError, hookimpl
from townsquare.lib.stats import mean_interval

from .table import cell, span


def calibrate(scenario: Path, against: str, write: Path, *, seeds: int, out: Path | None, runs: bool, force: bool,
              overrides: tuple[str, ...], plugin_options: tuple[str, ...], utc_offset: float, splits: int,
              reuse: bool = False) -> dict[str, Any]:
    """Fit, write and score (module docstring). ``reuse``: finished runs already in the run folders
    are kept (``after/`` ones only if they ran the fit just written)."""
    from townsquare.api.commands import load_plugins, load_scenario

    from .calibration import Clock, fit_activity, planners_of, population_activity, session_sizes, write_scenario
    from .replicates import run_replicates
    from .traces.trace_source import read_trace
    from .validate import check_extra, validate_runs

    check_extra()
    if write.exists() and not force:
        raise UsageError(f"--write {write}: exists already (add --force to replace it)")
    plugins = load_plugins(plugin_options)
    resolved = load_scenario(scenario, list(overrides), plugins)
    population_activity(resolved.data, str(scenario))
    model = resolved.model
    real = read_trace(against, utc_offset)
    folder = out or Path("runs") / f"{model.name}-calibrate"
    before_runs = run_replicates(scenario, seeds, folder / "before", overrides=overrides, plugin_options=plugin_options,
                                 reuse=reuse) if runs else []
    clock = Clock(agents=sum(p.count for p in model.populations), rounds=model.rounds, minutes=model.clock.minutes_per_round,
                  start=model.clock.start)
    before = (model.activity.alpha, model.activity.x_min)
    if model.activity.model == "always":
        before = (math.inf, math.inf)
    fit = fit_activity(real, clock, session_sizes(before_runs), before, model.activity.hourly)
    write_scenario(scenario, fit, against, write, force)
    report: dict[str, Any] = {"scenario": str(scenario), "against": against, "written": str(write), "fit": fit.as_json(),
                              "planners": planners_of(before_runs)}
    if not runs:
        return report
    after_runs = run_replicates(write, seeds, folder / "after", overrides=overrides, plugin_options=plugin_options, reuse=reuse)
    stale = [run for run in after_runs if _activity_of(run) != (fit.alpha, fit.x_min)]
    if stale:
        raise UsageError(f"{stale[0]}: ran alpha, x_min = {_activity_of(stale[0])}, not the fit's {fit.alpha}, {fit.x_min}: remove it")
    report["before"] = validate_runs(before_runs, against, plugins, splits=splits, real=real)
    report["after"] = validate_runs(after_runs, against, plugins, splits=splits, real=real)
    return report


def _activity_of(run: Path) -> tuple[Any, Any]:
    activity = (json.loads((Path(run) / "manifest.json").read_text(encoding="utf-8")).get("scenario") or {}).get("activity") or {}
    return activity.get("alpha"), activity.get("x_min")


def paired_change(report: dict[str, Any], name: str) -> tuple[float, float, float]:
    """The mean after-minus-before distance of dimension ``name``, paired by seed, and its interval."""
    before, after = report["before"].result(name), report["after"].result(name)
    found = mean_interval([a - b for a, b in zip(after.distances, before.distances)])
    return found.mean, found.low, found.high


def format_report(report: dict[str, Any]) -> str:
    fit = report["fit"]
    lines = [f"calibrated {report['scenario']} to {report['against']}: wrote {report['written']}",
             f"  activity: alpha {fit['alpha']}, x_min {fit['x_min']} sessions a day (the trace's own Pareto alpha: "
             f"{cell(fit['trace_alpha'])}, {fit['trace_users']} users); "
             f"{'an hour-of-day profile from the trace' if fit['hourly'] else 'no hour-of-day profile (the trace has no clock)'}",
             f"  expected activity_per_user KS under the activity model: {cell(fit['expected_ks_before'])} before, "
             f"{cell(fit['expected_ks'])} after ({fit['sessions_seen']} sessions seen, {cell(fit['session_mean'])} events each on average)"]
    if report["planners"]:
        lines.append(f"  note: planner {', '.join(report['planners'])} decides when agents act where it answers; "
                     "the activity model applies only where it does not")
    if "before" not in report:
        return "\n".join(lines)
    before, after = report["before"], report["after"]
    headers = ["dimension", "distance", "before [95% CI]", "after [95% CI]", "floor"]
    rows = []
    for result in before.scored:
        later = next((r for r in after.scored if r.name == result.name), None)
        rows.append([result.name, result.metric, cell(result.distance) + span(result.distance_interval),
                     cell(later.distance) + span(later.distance_interval) if later else "-", cell(result.floor)])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines += ["", "  ".join(h.ljust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    mean, low, high = paired_change(report, "activity_per_user")
    lines.append(f"activity_per_user KS after - before, paired by seed: {cell(mean)}{span((low, high))} "
                 f"over {len(before.runs)} seed{'s' * (len(before.runs) != 1)}")
    return "\n".join(lines)


def report_json(report: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in report.items() if k not in ("before", "after")}
    if "before" in report:
        out["before"], out["after"] = report["before"].as_json(), report["after"].as_json()
        mean, low, high = paired_change(report, "activity_per_user")
        out["activity_ks_change"] = {"mean": mean, "interval": [low, high]}
    return out


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    from townsquare.api.commands import common_options

    @cli.command("calibrate")
    @click.argument("scenario", type=click.Path(dir_okay=False, exists=True))
    @click.option("--against", required=True, metavar="DATASET", help="An installed dataset's name (townsquare data list) or a path.")
    @click.option("--write", "write", required=True, type=click.Path(dir_okay=False), metavar="OUT.toml",
                  help="Where the calibrated scenario goes (the scenario with its [activity] table replaced).")
    @click.option("--seeds", type=click.IntRange(1, 100), default=3, show_default=True, help="Runs before and after, seeds from the scenario's own.")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Folder for the runs (default runs/<name>-calibrate).")
    @click.option("--no-runs", "no_runs", is_flag=True, help="Fit and write only: no runs, no before-and-after table.")
    @click.option("--force", is_flag=True, help="Replace OUT.toml if it exists.")
    @click.option("--reuse-runs", "reuse", is_flag=True, help="Keep the finished runs already in --out (score them again).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key in every run.")
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None, help="The LLM every run uses, e.g. openai:gpt-4o-mini.")
    @click.option("--utc-offset", type=float, default=0.0, show_default=True, metavar="HOURS",
                  help="Hours added to the trace's Unix times to put them on the simulation's local clock.")
    @click.option("--splits", type=click.IntRange(1, 1000), default=20, show_default=True, help="Random splits for the trace's floor.")
    @click.option("--json", "as_json", is_flag=True, help="Print the fit and both validations as JSON.")
    @common_options
    def calibrate_command(scenario: str, against: str, write: str, seeds: int, out: str | None, no_runs: bool, force: bool, reuse: bool,
                          overrides: tuple[str, ...], llm_spec: str | None, utc_offset: float, splits: int, as_json: bool,
                          plugin_options: tuple[str, ...], **_: Any) -> None:
        """Fit when agents act (Pareto activity levels, hour-of-day profile) to a trace; write OUT.toml; validate before and after."""
        from townsquare.api.commands import llm_overrides

        report = calibrate(Path(scenario), against, Path(write), seeds=seeds, out=Path(out) if out else None, runs=not no_runs,
                           force=force, overrides=(*llm_overrides(llm_spec), *overrides), plugin_options=plugin_options,
                           utc_offset=utc_offset, splits=splits, reuse=reuse)
        click.echo(json.dumps(report_json(report), indent=1) if as_json else format_report(report))
