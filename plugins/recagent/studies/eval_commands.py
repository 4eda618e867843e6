"""``townsquare eval discrimination SCENARIO`` and ``townsquare eval generation SCENARIO``:
RecAgent's discrimination (fig. 2a) and generation (fig. 2b) tests as commands (see
:mod:`.discrimination`).

The scenario gives the MovieLens folder (``[platform] catalogue = "movielens"``, ``path``; or
``--data``; any layout), the embedder (the Embedding baseline), the LLM (``--llm`` as for
``run``) and the agents' components: each sampled user becomes a ``recagent_policy`` agent with
the scenario's memory tiers and settings (one population, its persona the user's history).
Without an LLM the discrimination table has the random and embedding columns only. LLM calls
go through the scenario's middleware (cache, retries, budget) as in a run; nothing is written.
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


class Agents:
    """Builds a RecAgent agent per case with the scenario's components (one simulation per
    call, in a scratch folder), its history already in memory; closes them all at the end."""

    def __init__(self, scenario: Any, plugins: Any, folder: Path, ratings: dict[str, dict[str, float]], tmp: str):
        self.scenario, self.plugins, self.folder, self.ratings, self.tmp = scenario, plugins, folder, ratings, tmp
        self.simulations: list[Any] = []

    async def __call__(self, cases: list[Any]) -> dict[str, tuple[Any, Any]]:
        import json
        from datetime import datetime

        from townsquare.api import StepContext
        from townsquare.api.commands import RunDir, Simulation, resolve_scenario

        from .discrimination import case_persona

        n = len(self.simulations)
        personas = Path(self.tmp) / f"agents-{n}.jsonl"
        personas.write_text("".join(json.dumps(case_persona(c.user, c.history, self.ratings.get(c.user, {}))) + "\n" for c in cases))
        data = dict(self.scenario.data)
        data["platform"] = {**{k: v for k, v in (data.get("platform") or {}).items() if k in ("page_size",)},
                            "name": "recsys", "catalogue": "movielens", "path": str(self.folder.resolve())}
        first = dict((data.get("populations") or [{}])[0])
        data["populations"] = [{"name": first.get("name", "users"), "count": len(cases), "config": first.get("config", {}),
                                "personas": {"name": "jsonl", "path": str(personas)}, "slots": {"policy": "recagent_policy"}}]
        data["metrics"] = []
        resolved = resolve_scenario(data, self.scenario.source, self.scenario.base_dir, self.plugins)
        (Path(self.tmp) / f"agents-{n}").mkdir()
        simulation = Simulation(resolved, self.plugins, RunDir(Path(self.tmp) / f"agents-{n}"))
        simulation.fire_llm_call_hook = False
        self.simulations.append(simulation)
        await simulation.build()
        clock = resolved.model.clock
        out = {}
        for case, agent in zip(cases, simulation.agents):
            llm = simulation.services.llm.for_agent(agent.id) if simulation.services.llm is not None else None
            ctx = StepContext(agent=agent, round=0, now=clock.start or datetime(2024, 1, 1), minutes_per_round=clock.minutes_per_round,
                              services=simulation.services, llm=llm)
            policy = agent.components["policy"]
            await policy.seed_memory(ctx)
            policy.seeded = True
            out[case.user] = (policy, ctx)
        return out

    async def aclose(self) -> None:
        for simulation in self.simulations:
            await simulation.aclose()


async def _evaluate(scenario: Any, plugins: Any, folder: Path, users: int, grid: list[tuple[int, int]], seed: int,
                    generation_lengths: list[int] | None = None, page_size: int = 10) -> list[dict[str, Any]]:
    from townsquare.api import BuildContext, EmbeddingCache, Services
    from townsquare.api.commands import RunDir, Simulation, close_each

    from .discrimination import evaluate, generation, read_histories, read_ratings

    items, histories = read_histories(folder)
    ctx = BuildContext(services=None, seed=seed, base_dir=scenario.base_dir, scenario=scenario.model)
    embedder = EmbeddingCache(scenario.embedder.spec.factory(scenario.embedder.config, ctx))
    with tempfile.TemporaryDirectory() as tmp:
        simulation = Simulation(scenario, plugins, RunDir(Path(tmp)))
        ctx.services = Services(platform=None, embedder=embedder, run_dir=tmp)  # type: ignore[arg-type]
        agents = None
        try:
            llm = simulation.build_llm(ctx)  # the run's provider and middleware chain (its cache lives in tmp)
            agents = Agents(scenario, plugins, folder, read_ratings(folder), tmp) if llm is not None else None
            if generation_lengths is not None:
                if llm is None:
                    raise UsageError("eval generation: the judge and the agent need an LLM ([llm] or --llm)")
                return await generation(items, histories, users=users, lengths=generation_lengths, page_size=page_size, seed=seed,
                                        judge_llm=llm, embedder=embedder, agents=agents)
            return await evaluate(items, histories, users=users, grid=grid, seed=seed, embedder=embedder, llm=llm, agents=agents)
        finally:
            if agents is not None:
                await agents.aclose()
            await simulation.aclose()
            await close_each([embedder.embedder])


def _folder(scenario: str, resolved: Any, data: str | None) -> Path:
    """The MovieLens folder: ``--data`` or the scenario's platform path."""
    if data is None:
        platform = resolved.platform.config
        if getattr(platform, "catalogue", None) != "movielens" or not getattr(platform, "path", None):
            raise UsageError(f"{scenario}: platform: the test needs catalogue = \"movielens\" and a path (or --data)")
        return data_path(platform.path, resolved.base_dir)
    return data_path(data)  # data:movielens-latest-small -> the installed dataset


def format_generation(rows: list[dict[str, Any]]) -> str:
    names = [n for n in ("agent", "embedding") if any(f"{n}_win" in r for r in rows)]
    lines = [f"{'N':>3} {'users':>5} " + " ".join(f"{n + ' win/lose/indist.':>30}" for n in names)]
    for r in rows:
        cells = " ".join(f"{r[n + '_win']:>10.1%} {r[n + '_lose']:>8.1%} {r[n + '_indistinguishable']:>10.1%}" for n in names)
        lines.append(f"{r['n']:>3} {r['users']:>5} {cells}")
    lines.append("win: the judge took the simulator's sequence for the real one; lose: it took the real one (RB)")
    return "\n".join(lines)


def format_table(rows: list[dict[str, Any]]) -> str:
    names = [n for n in ("random", "embedding", "llm", "agent") if any(n in r for r in rows)]
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
        folder = _folder(scenario, resolved, data)
        rows = asyncio.run(_evaluate(resolved, plugins, folder, users, pairs, resolved.model.seed))
        click.echo(format_table(rows))
        click.echo("p/|U|: the share of the truth each user's picks found, averaged (p itself in brackets); "
                   "llm: the bare model, agent: the RecAgent agent (profile, memory, policy)")

    @group.command("generation")
    @click.argument("scenario", type=click.Path(dir_okay=False))
    @click.option("--users", type=click.IntRange(min=1), default=20, show_default=True, help="MovieLens users sampled.")
    @click.option("--n", "lengths", type=click.IntRange(min=1), multiple=True, help="Sequence length N; repeat for several (default: 5 and 10).")
    @click.option("--page-size", type=click.IntRange(min=2), default=10, show_default=True, help="Items on each page a simulator picks from.")
    @click.option("--data", type=click.Path(file_okay=False), default=None, help="MovieLens folder (default: the scenario's platform.path).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key (dotted path).")
    @click.option("--seed", type=int, default=None, help="Override the scenario's seed.")
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None, help="The agents' and the judge's LLM, as for run.")
    @common_options
    def generation_command(scenario: str, users: int, lengths: tuple[int, ...], page_size: int, data: str | None,
                           overrides: tuple[str, ...], seed: int | None, llm_spec: str | None, plugin_options: tuple[str, ...], **_: Any) -> None:
        """RecAgent's generation test (fig. 2b): the agent's and the Embedding baseline's N next
        movies against the user's real ones, as a judge sees them: win, lose, indistinguishable."""
        from townsquare.api.commands import llm_overrides, load_plugins, load_scenario

        plugins = load_plugins(plugin_options)
        resolved = load_scenario(scenario, [*llm_overrides(llm_spec), *overrides], plugins, seed=seed)
        folder = _folder(scenario, resolved, data)
        rows = asyncio.run(_evaluate(resolved, plugins, folder, users, [], resolved.model.seed, list(lengths) or [5, 10], page_size))
        click.echo(format_generation(rows))
