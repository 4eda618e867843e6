"""The declared surface for plugins that add commands (``townsquare_register_commands``).

A command works on scenarios and run directories the way the built-in ones do (reading a run,
re-resolving its scenario with :func:`load_run`, opening its agents at a checkpoint with
:class:`EvalSimulation`, as ``townsquare eval park`` does)::

    from townsquare.api.commands import common_options, open_run

    @hookimpl
    def townsquare_register_commands(cli):
        @cli.command("summary")
        @click.argument("run_dir")
        @common_options
        def summary(run_dir, **_):
            manifest = open_run(run_dir).read_manifest()

An evaluation opens the agents it questions with :class:`EvalSimulation` (a
:class:`~townsquare.api.World` opened in the evaluation's folder, never played: one place
assembles them, its calls journaled and cached there), and its judges' and generators' clients
with :class:`EvalLLMs` (the scenario's middleware shared, every call an ``llm_calls`` row, a
budget stop that names the command resuming it, ``--estimate`` through a :class:`DryRun` of
stand-in models priced per stage); see :mod:`townsquare.commands.eval_llm`. An interview of a
run's agent is :func:`interview` (:mod:`townsquare.launch.interviews`).

Like :mod:`townsquare.api`, this module declares: every name is defined where it works (the CLI's
options, the launch glue, the commands' machinery) and re-exported here. Import it inside the
hook (it loads the kernel's run machinery): ``townsquare --help`` stays fast.
"""

from __future__ import annotations

from townsquare.cli.options import common_options, eval_group, llm_overrides
from townsquare.commands.dry_run import DEFAULT_COMPLETION_TOKENS, StandInModel, cost_of, format_table, prices_of, schema_example
from townsquare.commands.typical_answers import DRY_RUN_DISABLED, ScenarioEstimate, TypicalModel, answer_priors, estimate_scenario
from townsquare.commands.eval_llm import (
    DryRun, EvalLLMs, EvalSimulation, cached_answers, calls_line, check_spec, clear_earlier_answers, command_line, completion_cap,
    model_identity, settings_scenario, spec_overrides, without_middleware,
)
from townsquare.commands.score_table import cell_text, table_lines, write_tables
from townsquare.launch.interviews import interview
from townsquare.launch.run_lock import locked, open_run
from townsquare.launch.runner import load_plugins, load_run, rerun, start_run
from townsquare.llm import Accounting, compose
from townsquare.plugin_manager import Plugins, make_plugin_manager, parse_plugin_options
from townsquare.rundir import RunDir
from townsquare.scenario import ResolvedScenario, validate_scenario
from townsquare.launch.scenario_files import load_scenario
from townsquare.scenario import resolve as resolve_scenario
from townsquare.store import EventStore
from townsquare.world import close_each

__all__ = [
    "eval_group", "cell_text", "table_lines", "write_tables",
    "DEFAULT_COMPLETION_TOKENS", "DRY_RUN_DISABLED", "DryRun", "EvalLLMs", "EvalSimulation", "ScenarioEstimate", "StandInModel",
    "TypicalModel", "answer_priors", "cached_answers", "calls_line", "check_spec", "clear_earlier_answers", "command_line",
    "completion_cap", "cost_of", "estimate_scenario", "format_table", "model_identity", "prices_of", "schema_example",
    "settings_scenario", "spec_overrides", "without_middleware",
    "Accounting", "EventStore", "interview", "Plugins", "ResolvedScenario", "RunDir", "close_each", "common_options", "compose",
    "llm_overrides", "load_plugins", "load_run", "load_scenario", "locked", "make_plugin_manager", "open_run", "parse_plugin_options",
    "rerun", "resolve_scenario", "start_run", "validate_scenario",
]
