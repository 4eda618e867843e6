"""``townsquare validate RUN... --against DATASET``: runs scored against a trace of real people.

::

    townsquare validate runs/a runs/b runs/c --against movielens-100k          # three replicates
    townsquare validate SCENARIO.toml --seeds 3 --against movielens-100k       # run it three times first
    townsquare validate RUN... --against PATH --json                           # the same, as JSON
    townsquare validate RUN... --against DATASET --html                        # and the plots, as one HTML page

Several runs are replicates (of one scenario, different seeds). Each dimension (a plugin of
``townsquare_register_validation_dimensions``) that the trace and every run can be measured on
gets a row: the real value, the simulated mean with its 95 % interval over the replicates, the
distance (KS, Jensen-Shannon, relative error or normalised RMSE), the trace's own split-half
floor for that distance and the ratio of simulated to real variance across users
(:mod:`.scoring`); the others are listed with the reason. ``--against`` is an installed dataset
(``townsquare data fetch NAME``) or a path (:mod:`.traces.trace_source`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import click

from townsquare.api import UsageError, hookimpl
from townsquare.lib.validation import Trace

from .scoring import DimensionResult, comparison_grid, score, shared_kinds
from .table import format_table


@dataclass
class Validation:
    """What ``validate`` found: the trace, the runs, one result per dimension."""

    against: str
    real: Trace
    runs: list[Trace]
    results: list[DimensionResult] = field(default_factory=list)

    @property
    def scored(self) -> list[DimensionResult]:
        return [r for r in self.results if r.skipped is None]

    def result(self, name: str) -> DimensionResult:
        return next(r for r in self.results if r.name == name)

    def as_json(self) -> dict[str, Any]:
        grain, span = comparison_grid(self.runs)
        return {"against": self.against, "trace": _trace_summary(self.real),
                "runs": [_trace_summary(r) for r in self.runs], "kinds": shared_kinds(self.real, self.runs),
                "grain_seconds": grain, "span_seconds": span,
                "dimensions": [r.as_json() for r in self.scored],
                "not_shared": [{"name": r.name, "why": r.skipped} for r in self.results if r.skipped is not None]}


def _trace_summary(trace: Trace) -> dict[str, Any]:
    return {"name": trace.name, "source": trace.source, "users": len(trace.user_index[0]), "events": len(trace),
            "population": len(trace.population) or None, "cascades": len(trace.cascades)}


def check_extra() -> None:
    """``validate`` and ``calibrate`` need the ``validate`` extra (powerlaw, scipy): one line if not."""
    import importlib.util

    if importlib.util.find_spec("powerlaw") is None:
        raise UsageError("townsquare validate needs the powerlaw package: pip install 'townsquare[validate]'")


def dimensions_of(plugins: Any, wanted: Iterable[str] = ()) -> list[tuple[Any, Any]]:
    """The registered dimensions (``(spec, dimension)``), all or the ``wanted`` ones in order."""
    specs = plugins.registry.by_slot.get("validation_dimension", {})
    wanted = list(wanted)
    unknown = [w for w in wanted if w not in specs]
    if unknown:
        raise UsageError(f"--dimension {unknown[0]}: no such dimension (dimensions: {', '.join(sorted(specs)) or 'none'})")
    if not specs:
        raise UsageError("no validation dimension is registered (every dimension plugin is disabled?)")
    return [(specs[name], specs[name].factory(None, None)) for name in (wanted or list(specs))]


def validate_runs(runs: list[Path], against: str, plugins: Any, *, dimensions: Iterable[str] = (), splits: int = 20,
                  utc_offset: float = 0.0, real: Trace | None = None) -> Validation:
    from .traces.run_trace import run_trace
    from .traces.trace_source import read_trace

    check_extra()
    if not runs:
        raise UsageError("validate needs at least one run")
    chosen = dimensions_of(plugins, dimensions)
    real = real if real is not None else read_trace(against, utc_offset)
    sims = [run_trace(run) for run in runs]
    empty = [s.source for s in sims if not len(s)]
    if len(empty) == len(sims):
        raise UsageError(f"{empty[0]}: no event to compare (no watch, post, comment, reblog or like in any run)")
    return Validation(against=against, real=real, runs=sims, results=score(real, sims, chosen, splits=splits))


def default_out(runs: list[Path]) -> Path:
    return runs[0].parent


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    from townsquare.api.commands import common_options

    @cli.command("validate")
    @click.argument("runs", nargs=-1, required=True, metavar="RUN...")
    @click.option("--against", required=True, metavar="DATASET", help="An installed dataset's name (townsquare data list) or a path.")
    @click.option("--seeds", type=int, default=None, metavar="N",
                  help="RUN is a scenario file: run it N times (seeds from the scenario's own) and score those runs.")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="With --seeds: override a scenario key.")
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None, help="With --seeds: the LLM the runs use, e.g. openai:gpt-4o-mini.")
    @click.option("--out", type=click.Path(file_okay=False), default=None,
                  help="Folder for the --seeds runs (default runs/<name>-validate) and the HTML report (default: beside the runs).")
    @click.option("--dimension", "dimensions", multiple=True, metavar="NAME", help="Only these dimensions (default: all).")
    @click.option("--splits", type=click.IntRange(1, 1000), default=20, show_default=True,
                  help="Random splits of the trace for its split-half floor.")
    @click.option("--utc-offset", type=float, default=0.0, show_default=True, metavar="HOURS",
                  help="Hours added to the trace's Unix times to put them on the local clock the simulation's clock stands for.")
    @click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (a list `dimensions`).")
    @click.option("--html", "html", is_flag=True, help="Also write an HTML report with real-against-simulated plots.")
    @common_options
    def validate(runs: tuple[str, ...], against: str, seeds: int | None, overrides: tuple[str, ...], llm_spec: str | None,
                 out: str | None, dimensions: tuple[str, ...], splits: int, utc_offset: float, as_json: bool, html: bool,
                 plugin_options: tuple[str, ...], **_: Any) -> None:
        """Score runs (replicates of one scenario) against a trace of real people, dimension by dimension."""
        from townsquare.api.commands import llm_overrides, load_plugins

        check_extra()
        paths = scenario_runs(runs, seeds, (*llm_overrides(llm_spec), *overrides), out, plugin_options)
        validation = validate_runs(paths, against, load_plugins(plugin_options), dimensions=dimensions, splits=splits,
                                   utc_offset=utc_offset)
        if as_json:
            click.echo(json.dumps(validation.as_json(), indent=1))
        else:
            click.echo(format_table(validation))
        if html:
            from .report_html import write_report

            folder = Path(out) if out and seeds is None else default_out(paths)
            click.echo(f"report: {write_report(validation, folder / f'validate-{Path(against).name}.html')}", err=True)


def scenario_runs(runs: tuple[str, ...], seeds: int | None, overrides: tuple[str, ...], out: str | None,
                  plugin_options: tuple[str, ...]) -> list[Path]:
    """The run directories to score: ``runs`` as they are, or with ``--seeds`` the replicates
    of the one scenario ``runs`` names."""
    if seeds is None:
        if overrides:
            raise UsageError("--set needs --seeds (it changes the scenario the replicates run)")
        missing = [r for r in runs if not Path(r).is_dir()]
        if missing:
            hint = " (a scenario file: add --seeds N)" if missing[0].endswith(".toml") else ""
            raise UsageError(f"{missing[0]}: not a run directory{hint}")
        return [Path(r) for r in runs]
    if len(runs) != 1 or not Path(runs[0]).is_file():
        raise UsageError("--seeds N runs one scenario: give its TOML file as the only RUN")
    from townsquare.api.commands import load_plugins, load_scenario

    from .replicates import run_replicates

    name = load_scenario(runs[0], list(overrides), load_plugins(plugin_options)).model.name
    return run_replicates(runs[0], seeds, Path(out) if out else Path("runs") / f"{name}-validate", overrides=overrides,
                          plugin_options=plugin_options)
