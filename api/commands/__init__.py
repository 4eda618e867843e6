"""The declared surface for plugins that add commands (``townsquare_register_commands``).

A command works on scenarios and run directories the way the built-in ones do (reading a run,
re-resolving its scenario with :func:`load_run`, rebuilding its agents from a checkpoint with
:class:`EvalSimulation`, as ``townsquare eval park`` does)::

    from townsquare.api.commands import common_options, open_run

    @hookimpl
    def townsquare_register_commands(cli):
        @cli.command("summary")
        @click.argument("run_dir")
        @common_options
        def summary(run_dir, **_):
            manifest = open_run(run_dir).read_manifest()

An evaluation builds the agents it questions with :class:`EvalSimulation` (never
``Simulation`` itself: one place assembles them, its calls journaled and cached in the
evaluation's folder), and its judges' and generators' clients with :class:`EvalLLMs` (the
scenario's middleware shared, every call an ``llm_calls`` row, a budget stop that names the
command resuming it, ``--estimate`` through a :class:`DryRun` of stand-in models priced per
stage); see :mod:`townsquare.commands.eval_llm`.

Import it inside the hook (it loads the kernel's run machinery): ``townsquare --help`` stays fast.
"""

from __future__ import annotations

from typing import Iterable

from townsquare.cli.options import common_options, llm_overrides
from townsquare.commands.dry_run import DEFAULT_COMPLETION_TOKENS, StandInModel, cost_of, format_table, prices_of, schema_example
from townsquare.commands.typical_answers import DRY_RUN_DISABLED, ScenarioEstimate, TypicalModel, answer_priors, estimate_scenario
from townsquare.engine import Simulation, close_each
from townsquare.commands.eval_llm import (
    DryRun, EvalLLMs, EvalSimulation, cached_answers, calls_line, check_spec, clear_earlier_answers, command_line, completion_cap,
    model_identity, settings_scenario, spec_overrides, without_middleware,
)
from townsquare.commands.interview import interview
from townsquare.commands.score_table import cell_text, table_lines, write_tables
from townsquare.llm import Accounting, compose
from townsquare.plugin_manager import Plugins, make_plugin_manager, parse_plugin_options
from townsquare.rundir import RunDir
from townsquare.runner import load_run, rerun, start_run
from townsquare.scenario import ResolvedScenario, load_scenario, validate_scenario
from townsquare.scenario import resolve as resolve_scenario
from townsquare.store import EventStore


def open_run(path: str) -> RunDir:
    """An existing run directory (its manifest, event store and checkpoints); a clear error if it is none."""
    return RunDir.open(path)


def eval_group(cli) -> "click.Group":
    """The ``townsquare eval`` group that evaluation plugins add their subcommands to
    (``eval park``, ``eval discrimination``...), made by whichever plugin asks first."""
    import click

    group = cli.commands.get("eval")
    if not isinstance(group, click.Group):
        @cli.group("eval")
        def group() -> None:
            """Evaluate agents: PersonaGym, SoMe, Zhou et al.'s metrics, Park et al.'s interviews, RecAgent's discrimination test."""
    return group


def load_plugins(plugin_options: Iterable[str] = (), disable: Iterable[str] = ()) -> Plugins:
    """The plugin set a command's ``-p`` options (``plugin_options``) ask for, less ``disable``."""
    enable, disabled = parse_plugin_options(plugin_options)
    return make_plugin_manager(enable=enable, disable=[*disabled, *disable])


__all__ = [
    "eval_group", "cell_text", "table_lines", "write_tables",
    "DEFAULT_COMPLETION_TOKENS", "DRY_RUN_DISABLED", "DryRun", "EvalLLMs", "EvalSimulation", "ScenarioEstimate", "StandInModel", "TypicalModel",
    "answer_priors", "estimate_scenario", "cached_answers", "calls_line", "check_spec", "clear_earlier_answers", "command_line",
    "completion_cap", "cost_of", "format_table", "model_identity", "prices_of", "schema_example", "settings_scenario", "spec_overrides",
    "without_middleware",
    "Accounting", "EventStore", "interview", "Plugins", "ResolvedScenario", "RunDir", "Simulation", "close_each", "common_options", "compose",
    "llm_overrides", "load_plugins", "load_run", "load_scenario", "open_run", "rerun", "resolve_scenario", "start_run", "validate_scenario",
]
