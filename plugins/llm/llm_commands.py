"""``townsquare replay`` and ``townsquare estimate``: the LLM layer's commands.

``replay RUN --out DIR`` re-executes a finished run from its manifest with every answer taken
from ``RUN/llm_cache.sqlite`` (:class:`~townsquare.plugins.llm.llm_cache.CacheReplayProvider`; no
endpoint, no key), then compares the two runs. Identical means: ``agents``, ``posts``,
``actions``, ``follows`` and ``metrics`` equal row for row, and ``llm_calls`` equal once the
recording's ``error`` rows are left out (failed attempts are not replayed), ``ok`` reads
``cached``, ``cost`` is 0 and ``latency_ms`` and ``seq`` are ignored. A request the recording
never made stops the replay with ``cache miss in replay: PURPOSE for AGENT``; a difference
exits with status 1.

``estimate SCENARIO`` forecasts LLM calls, tokens and cost before a run: it plays the scenario
with a stand-in model that answers instantly and counts (:mod:`townsquare.commands.dry_run`: prompt
tokens ~ characters / 4, completion tokens as expected per purpose) and prints a table per
purpose, then one per simulated day (the day of each call's round). The counts follow the
stand-in's answers, not a real model's, and the output says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from townsquare.api import cache_line, hookimpl

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


def calls_per_day(events_path: Path) -> dict[str, tuple[int, int, int]]:
    """Simulated day (``2023-02-13``) -> (calls, prompt tokens, completion tokens) of a run's
    answered LLM calls, by the day of each call's round (repairs left out, as the stand-in model
    leaves them out of its counts)."""
    import sqlite3

    db = sqlite3.connect(events_path)
    try:
        rows = db.execute("SELECT substr(r.sim_time, 1, 10), COUNT(*), SUM(c.prompt_tokens), SUM(c.completion_tokens) "
                          "FROM llm_calls c JOIN rounds r ON r.round = c.round WHERE c.status IN ('ok', 'cached') AND c.purpose NOT LIKE '%.repair' "
                          "GROUP BY 1 ORDER BY 1").fetchall()
    finally:
        db.close()
    return {day: (int(n), int(pt or 0), int(ct or 0)) for day, n, pt, ct in rows}


def cached_prefix(events_path: Path) -> tuple[int, int]:
    """(prompt tokens, cached prefix tokens) of a run's answered LLM calls (``llm_calls.cached_prefix_tokens``)."""
    import sqlite3

    db = sqlite3.connect(events_path)
    try:
        prompt, cached = db.execute("SELECT SUM(prompt_tokens), SUM(cached_prefix_tokens) FROM llm_calls "
                                    "WHERE status IN ('ok', 'cached')").fetchone()
    finally:
        db.close()
    return int(prompt or 0), int(cached or 0)


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
    @common_options
    def estimate(scenario: str, overrides: tuple[str, ...], seed: int | None, completion: tuple[str, ...], plugin_options, **_: Any) -> None:
        """Forecast LLM calls, tokens and cost of SCENARIO with a dry run on a stand-in model."""
        from townsquare.api import UsageError
        from townsquare.api.commands import DEFAULT_COMPLETION_TOKENS, cost_of, estimate_scenario, format_table

        expected = {}
        for item in completion:
            purpose, sep, tokens = item.partition("=")
            if not sep or not tokens.strip().isdigit():
                raise UsageError(f"--completion-tokens {item}: expected PURPOSE=TOKENS, e.g. post=80")
            expected[purpose.strip()] = int(tokens)
        estimate = estimate_scenario(scenario, overrides=overrides, seed=seed, plugin_options=plugin_options, completion_tokens=expected,
                                     read=lambda events: (calls_per_day(events), cached_prefix(events)))
        model, (days, (prompt_tokens, cached_tokens)) = estimate.model, estimate.read
        llm = estimate.scenario.llm
        prices = estimate.prices()
        priced = prices is not None

        def cost(pt: int, ct: int) -> float | None:
            return cost_of(pt, ct, prices)

        rows = [(p, c, pt, ct, cost(pt, ct)) for p, (c, pt, ct) in sorted(model.rows.items())]
        totals = [sum(r[i] for r in rows) for i in (1, 2, 3)]
        rows.append(("total", *totals, cost(totals[1], totals[2])))
        model_rounds = estimate.scenario.model.rounds
        click.echo(f"ESTIMATE for {scenario} ({model_rounds} rounds): a dry run with a stand-in model, not a language model; "
                   "a real model's answers change what agents do next, and so the counts.")
        for line in format_table(("purpose", "calls", "prompt tokens", "completion tokens", "cost"), rows):
            click.echo(line)
        if len(days) > 1:
            click.echo("per simulated day:")
            day_rows = [(day, c, pt, ct, cost(pt, ct)) for day, (c, pt, ct) in days.items()]
            for line in format_table(("day", "calls", "prompt tokens", "completion tokens", "cost"), day_rows):
                click.echo(line)
        click.echo("prompt tokens ~ characters / 4; completion tokens as expected per call "
                   f"(decisions {DEFAULT_COMPLETION_TOKENS['labels']}, JSON {DEFAULT_COMPLETION_TOKENS['json']}, "
                   f"text {DEFAULT_COMPLETION_TOKENS['text']}; --completion-tokens PURPOSE=N); retries and repairs of malformed answers not included.")
        if priced:
            click.echo(f"prices: {prices[0]} / {prices[1]} per 1k prompt / completion tokens, from the scenario's [llm] table.")
        else:
            click.echo("no price table: set llm.price_prompt_per_1k and llm.price_completion_per_1k for a cost.")
        click.echo(cache_line(prompt_tokens, cached_tokens, llm.config if llm else None))
