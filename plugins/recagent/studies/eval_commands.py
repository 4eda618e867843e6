"""``townsquare eval discrimination SCENARIO``: RecAgent's discrimination test (fig. 2a) as a
command (see :mod:`.discrimination`).

The scenario gives the MovieLens folder (``[platform] catalogue = "movielens"``, ``path``; or
``--data``), the embedder (the Embedding baseline) and the LLM (the agent; ``--llm`` as for
``run``). Without an LLM the table has the random and embedding columns only. LLM calls go
through the scenario's middleware (cache, retries, budget) as in a run; nothing is written.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import click

from townsquare.api import UsageError, data_path, hookimpl


def _grid(values: tuple[str, ...]) -> list[tuple[int, int]]:
    from .discrimination import GRID

    pairs = []
    for value in values:
        try:
            a, b = (int(x) for x in value.split(","))
        except ValueError:
            raise UsageError(f"--grid {value!r}: expected A,B (two whole numbers, e.g. 1,5)") from None
        if a < 1 or b < 0:
            raise UsageError(f"--grid {value!r}: a must be at least 1 and b at least 0")
        pairs.append((a, b))
    return pairs or list(GRID)


async def _evaluate(scenario: Any, plugins: Any, folder: Path, users: int, grid: list[tuple[int, int]], seed: int) -> list[dict[str, Any]]:
    from townsquare.api import BuildContext, EmbeddingCache, Services
    from townsquare.api.commands import RunDir, Simulation, close_each

    from .discrimination import evaluate, read_histories

    items, histories = read_histories(folder)
    ctx = BuildContext(services=None, seed=seed, base_dir=scenario.base_dir, scenario=scenario.model)
    embedder = EmbeddingCache(scenario.embedder.spec.factory(scenario.embedder.config, ctx))
    with tempfile.TemporaryDirectory() as tmp:
        simulation = Simulation(scenario, plugins, RunDir(Path(tmp)))
        ctx.services = Services(platform=None, embedder=embedder, run_dir=tmp)  # type: ignore[arg-type]
        try:
            llm = simulation.build_llm(ctx)  # the run's provider and middleware chain (its cache lives in tmp)
            return await evaluate(items, histories, users=users, grid=grid, seed=seed, embedder=embedder, llm=llm)
        finally:
            await simulation.aclose()
            await close_each([embedder.embedder])


def format_table(rows: list[dict[str, Any]]) -> str:
    names = [n for n in ("random", "embedding", "agent") if any(n in r for r in rows)]
    head = f"{'(a, b)':<9} {'users':>5} " + " ".join(f"{n + ' p/|U|':>16}" for n in names)
    lines = [head]
    for r in rows:
        cells = " ".join(f"{r[f'{n}_mean']:>9.3f} ({r[n]:>4.1f})" if n in r else f"{'-':>16}" for n in names)
        pair = f"({r['a']}, {r['b']})"
        lines.append(f"{pair:<9} {r['users']:>5} {cells}")
    return "\n".join(lines)


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options, eval_group

    group = eval_group(cli)

    @group.command("discrimination")
    @click.argument("scenario", type=click.Path(dir_okay=False))
    @click.option("--users", type=click.IntRange(min=1), default=20, show_default=True, help="MovieLens users sampled.")
    @click.option("--grid", "grid", multiple=True, metavar="A,B", help="An (a, b) pair; repeat for several (default: 1,5 1,10 3,5 3,10).")
    @click.option("--data", type=click.Path(file_okay=False), default=None, help="MovieLens folder (default: the scenario's platform.path).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key (dotted path).")
    @click.option("--seed", type=int, default=None, help="Override the scenario's seed.")
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None, help="The agent's LLM, as for run.")
    @common_options
    def discrimination(scenario: str, users: int, grid: tuple[str, ...], data: str | None, overrides: tuple[str, ...],
                       seed: int | None, llm_spec: str | None, plugin_options: tuple[str, ...], **_: Any) -> None:
        """RecAgent's discrimination test (fig. 2a): p for the agent, random and embedding."""
        from townsquare.api.commands import llm_overrides, load_plugins, load_scenario

        pairs = _grid(grid)
        plugins = load_plugins(plugin_options)
        resolved = load_scenario(scenario, [*llm_overrides(llm_spec), *overrides], plugins, seed=seed)
        if data is None:
            platform = resolved.platform.config
            if getattr(platform, "catalogue", None) != "movielens" or not getattr(platform, "path", None):
                raise UsageError(f"{scenario}: platform: the discrimination test needs catalogue = \"movielens\" and a path (or --data)")
            folder = Path(platform.path) if Path(platform.path).is_absolute() else Path(resolved.base_dir) / platform.path
        else:
            folder = data_path(data)  # data:movielens-latest-small -> the installed dataset
        if not (folder / "ratings.csv").is_file():
            raise UsageError(f"{folder}: no ratings.csv (the discrimination test needs MovieLens ratings)")
        rows = asyncio.run(_evaluate(resolved, plugins, folder, users, pairs, resolved.model.seed))
        click.echo(format_table(rows))
        click.echo("p/|U|: the share of the truth each user's picks found, averaged (p itself in brackets)")
