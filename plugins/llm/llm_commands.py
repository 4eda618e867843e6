"""``townsquare replay`` and ``townsquare estimate``: the LLM layer's commands.

``replay RUN --out DIR`` re-executes a finished run from its manifest with every answer taken
from ``RUN/llm_cache.sqlite`` (:class:`~townsquare.plugins.llm.llm_cache.CacheReplayProvider`; no
endpoint, no key), then compares the two runs. Identical means: ``agents``, ``posts``,
``actions``, ``follows`` and ``metrics`` equal row for row, and ``llm_calls`` equal once the
recording's ``error`` rows are left out (failed attempts are not replayed), ``ok`` reads
``cached``, ``cost`` is 0 and ``latency_ms`` and ``seq`` are ignored. A request the recording
never made stops the replay with ``cache miss in replay: PURPOSE for AGENT``; a difference
exits with status 1.

``estimate SCENARIO`` forecasts LLM calls, tokens and cost before a run
(:mod:`.run_estimate`): it plays the scenario on a stand-in that answers as the designs declare
a typical model does, and prints calls and tokens per purpose with a range, then per simulated day.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from townsquare.api import hookimpl

from .run_estimate import DISPOSITION_WORDS, DISPOSITIONS, forecast_run

#: the tables a replay must reproduce row for row
SAME_TABLES = ("agents", "posts", "actions", "follows", "reflections", "metrics")


def compare_runs(recorded: Path, replayed: Path) -> list[str]:
    """Where a replay differs from its recording (empty: identical, as the module defines it)."""
    from townsquare.api.commands import EventStore

    stores = EventStore(recorded), EventStore(replayed)
    try:
        found = []
        for table in (*SAME_TABLES, "llm_calls"):
            (columns, a), (_, b) = stores[0].rows(table), stores[1].rows(table)
            a, b = list(a), list(b)
            if table == "llm_calls":
                a, b = _as_replayed(columns, a), _as_replayed(columns, b)
            if a != b:
                first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                found.append(f"{table} (row {first + 1}; {len(a)} rows recorded, {len(b)} replayed)")
        return found
    finally:
        for store in stores:
            store.close()


def _as_replayed(columns: list[str], rows: list[tuple]) -> list[tuple]:
    """llm_calls rows as a replay records them: no error rows, ok -> cached, cost 0, no latency or seq."""
    at = {name: i for i, name in enumerate(columns)}
    out = []
    for row in rows:
        row = list(row)
        if row[at["status"]] == "error":
            continue
        if row[at["status"]] in ("ok", "cached"):
            row[at["status"]], row[at["cost"]] = "cached", 0.0
        out.append(tuple(v for name, v in zip(columns, row) if name not in ("seq", "latency_ms")))
    return out


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options

    @cli.command("replay")
    @click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
    @click.option("--out", type=click.Path(file_okay=False), required=True, help="Directory for the replayed run.")
    @common_options
    def replay(run_dir: str, out: str, **_: Any) -> None:
        """Re-execute finished RUN_DIR from its manifest and LLM cache alone, and check the result is identical."""
        from townsquare.api import UsageError
        from .llm_cache import CacheReplayProvider, cache_path
        from townsquare.api.commands import open_run, rerun, validate_scenario

        source = open_run(run_dir)
        manifest = source.read_manifest()
        if manifest.get("status") != "finished":
            raise UsageError(f"{run_dir}: the run is {manifest.get('status')}; replay needs a finished run (resume it first)")
        provider = CacheReplayProvider(cache_path(run_dir), validate_scenario(manifest["scenario"], str(source.manifest_path)))
        replayed, summary = rerun(run_dir, out, llm_provider=provider, on_ready=lambda *_: click.echo(
            f"replaying {run_dir} into {out}: every answer from {provider.cache.store.path}, no endpoint", err=True))
        differences = compare_runs(source.events_path, replayed.events_path)
        if differences:
            raise click.ClickException(f"replay {replayed.path} differs from {run_dir} in: {'; '.join(differences)}")
        click.echo(f"replay identical: {replayed.path} — {summary.rounds_completed} rounds, {summary.actions} actions, "
                   f"{summary.llm_calls} LLM answers from the cache ({', '.join(SAME_TABLES)} equal; llm_calls equal "
                   "but for status cached, cost 0 and the recording's failed attempts)", err=True)

    @cli.command("estimate")
    @click.argument("scenario", type=click.Path(dir_okay=False))
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key (dotted path).")
    @click.option("--seed", type=int, default=None, help="Override the scenario's seed.")
    @click.option("--completion-tokens", "completion", multiple=True, metavar="PURPOSE=TOKENS",
                  help="Expected completion tokens per call of PURPOSE (default: decisions 2, JSON 60, text 80).")
    @click.option("--range/--no-range", "with_range", default=True, show_default=True,
                  help="Also play the run with a model that acts half as much and half again as much (three dry runs).")
    @common_options
    def estimate(scenario: str, overrides: tuple[str, ...], seed: int | None, completion: tuple[str, ...], with_range: bool,
                 plugin_options, **_: Any) -> None:
        """Forecast LLM calls, tokens and cost of SCENARIO with dry runs on a stand-in that answers as a typical model."""
        from townsquare.api import UsageError
        from townsquare.api.commands import DRY_RUN_DISABLED, load_plugins

        expected = {}
        for item in completion:
            purpose, sep, tokens = item.partition("=")
            if not sep or not tokens.strip().isdigit():
                raise UsageError(f"--completion-tokens {item}: expected PURPOSE=TOKENS, e.g. post=80")
            expected[purpose.strip()] = int(tokens)
        plugins = load_plugins(plugin_options, disable=DRY_RUN_DISABLED)
        forecast = forecast_run(scenario, plugins, overrides=overrides, seed=seed, completion_tokens=expected,
                                dispositions=DISPOSITIONS if with_range else (1.0,),
                                on_dry_run=lambda d: click.echo(f"dry run: a model that acts {DISPOSITION_WORDS[d]}...", err=True))
        for line in forecast.lines(scenario):
            click.echo(line)
