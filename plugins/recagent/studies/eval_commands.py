"""``townsquare eval discrimination SCENARIO`` and ``townsquare eval generation SCENARIO``:
RecAgent's discrimination (fig. 2a) and generation (fig. 2b) tests as commands (see
:mod:`.discrimination`).

The scenario gives the MovieLens folder (``[platform] catalogue = "movielens"``, ``path``; or
``--data``; any layout), the embedder (the Embedding baseline), the LLM (``--llm`` as for
``run``) and the agents' components: each sampled user becomes a ``recagent_policy`` agent with
the scenario's memory tiers and settings (one population, its persona the user's history).
Without an LLM the discrimination table has the random and embedding columns only. LLM calls
go through the scenario's middleware (cache, retries, budget) as in a run, in the output folder
(``--out``, default ``runs/NAME-discrimination`` / ``runs/NAME-generation``): the bare model's
and the judge's calls in ``OUT/`` (``llm_cache.sqlite``, ``events.sqlite``), each batch of
agents' in ``OUT/agents-N/``; every call is an ``llm_calls`` row, the same command again
replays from the caches (and says the model answered nothing), and ``--estimate`` prices the
test on stand-in models. The table's rows are written to ``OUT/discrimination.json`` or
``OUT/generation.json``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import click

from townsquare.api import UsageError, hookimpl
from townsquare.lib.data_paths import data_path


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
    """Builds a RecAgent agent per case with the scenario's components (one
    :class:`~townsquare.api.commands.EvalSimulation` per call, in ``OUT/agents-N/``: its cache and
    journal), its history already in memory; closes them all at the end and keeps the calls
    they wrote, by status, in ``calls``."""

    def __init__(self, scenario: Any, plugins: Any, folder: Path, ratings: dict[str, dict[str, float]], out: Path,
                 dry_run: Any = None, resume: str | None = None):
        self.scenario, self.plugins, self.folder, self.ratings, self.out = scenario, plugins, folder, ratings, out
        self.dry_run, self.resume = dry_run, resume
        self.evaluations: list[Any] = []
        self.calls: dict[str, int] = {}

    async def __call__(self, cases: list[Any]) -> dict[str, tuple[Any, Any]]:
        import json

        from townsquare.api.commands import EvalSimulation, resolve_scenario

        from .discrimination import case_persona

        where = self.out / f"agents-{len(self.evaluations)}"
        where.mkdir(parents=True, exist_ok=True)
        personas = where / "agents.jsonl"
        personas.write_text("".join(json.dumps(case_persona(c.user, c.history, self.ratings.get(c.user, {}))) + "\n" for c in cases))
        data = dict(self.scenario.data)
        data["platform"] = {**{k: v for k, v in (data.get("platform") or {}).items() if k in ("page_size",)},
                            "name": "recsys", "catalogue": "movielens", "path": str(self.folder.resolve())}
        first = dict((data.get("populations") or [{}])[0])
        data["populations"] = [{"name": first.get("name", "users"), "count": len(cases), "config": first.get("config", {}),
                                "personas": {"name": "jsonl", "path": str(personas.resolve())}, "slots": {"policy": "recagent_policy"}}]
        data["metrics"] = []
        resolved = resolve_scenario(data, self.scenario.source, self.scenario.base_dir, self.plugins)
        provider = self.dry_run.stand_in("agents", resolved) if self.dry_run is not None else None
        evaluation = EvalSimulation(resolved, self.plugins, where, llm_provider=provider, dry_run=self.dry_run is not None)
        self.evaluations.append(evaluation)
        opened = await evaluation.build(resume=self.resume)
        out = {}
        for case, agent in zip(cases, opened.agents):
            ctx = evaluation.context(agent)
            policy = agent.components["policy"]
            await policy.seed_memory(ctx)
            policy.seeded = True
            out[case.user] = (policy, ctx)
        return out

    async def aclose(self) -> None:
        for evaluation in self.evaluations:
            for status, n in (await evaluation.aclose()).items():
                self.calls[status] = self.calls.get(status, 0) + n


async def _evaluate(scenario: Any, plugins: Any, folder: Path, users: int, grid: list[tuple[int, int]], seed: int,
                    generation_lengths: list[int] | None = None, page_size: int = 10, *, out: Path, resolve: Any = None,
                    resume: str | None = None, dry_run: Any = None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(the table's rows, the calls journaled by status). The bare model's and the judge's calls
    go through an :class:`~townsquare.api.commands.EvalLLMs` client in ``out`` (cache and
    ``events.sqlite``), the agents' through their simulations in ``out/agents-N/``."""
    from townsquare.api import BuildContext, EmbeddingCache, Services
    from townsquare.api.commands import EvalLLMs, close_each

    from .discrimination import evaluate, generation, read_histories, read_ratings

    items, histories = read_histories(folder)
    ctx = BuildContext(services=None, seed=seed, base_dir=scenario.base_dir, scenario=scenario.model)
    embedder = EmbeddingCache(scenario.embedder.spec.factory(scenario.embedder.config, ctx))
    ctx.services = Services(platform=None, embedder=embedder, run_dir=str(out))  # type: ignore[arg-type]
    out.mkdir(parents=True, exist_ok=True)
    evaluator = EvalLLMs(scenario, resolve or (lambda more: scenario), out, journal=out / "events.sqlite", resume=resume, dry_run=dry_run)
    agents = None
    calls: dict[str, int] = {}
    try:
        llm = evaluator.client(None, "recagent") if scenario.llm is not None else None
        agents = Agents(scenario, plugins, folder, read_ratings(folder), out, dry_run, resume) if llm is not None else None
        if generation_lengths is not None:
            if llm is None:
                raise UsageError("eval generation: the judge and the agent need an LLM ([llm] or --llm)")
            rows = await generation(items, histories, users=users, lengths=generation_lengths, page_size=page_size, seed=seed,
                                    judge_llm=llm, embedder=embedder, agents=agents)
        else:
            rows = await evaluate(items, histories, users=users, grid=grid, seed=seed, embedder=embedder, llm=llm, agents=agents)
        return rows, calls
    finally:
        if agents is not None:
            await agents.aclose()
            calls.update(agents.calls)
        for status, n in evaluator.write_journal().items():
            calls[status] = calls.get(status, 0) + n
        await evaluator.aclose()
        await close_each([embedder.embedder])


#: completion tokens an estimate assumes per call (labels: the stand-in's default)
EXPECTED_TOKENS = {"recagent.discrimination": 2, "recagent.judge": 2}


def run_command(name: str, scenario_path: str, resolved: Any, plugins: Any, folder: Path, users: int, grid: list[tuple[int, int]],
                lengths: list[int] | None, page_size: int, out: str | None, estimate: bool,
                resolve: Any) -> tuple[list[dict[str, Any]], str] | None:
    """``eval discrimination`` / ``eval generation``: the estimate (printed; None returned), or
    the evaluation in ``out`` (default ``runs/<scenario>-<name>/``), its rows written to
    ``<name>.json`` there: (the rows, the line that says where the calls went)."""
    import json

    from townsquare.api import LLMFault, RunStopped
    from townsquare.api.commands import DryRun, cached_answers, calls_line, clear_earlier_answers, command_line

    seed = resolved.model.seed
    if estimate:
        dry = DryRun(EXPECTED_TOKENS)
        with tempfile.TemporaryDirectory(prefix=f"townsquare-{name}-estimate-") as tmp:
            asyncio.run(_evaluate(resolved, plugins, folder, users, grid, seed, lengths, page_size, out=Path(tmp), resolve=resolve,
                                  dry_run=dry))
        for line in dry.report(f"for eval {name} of {scenario_path}", "prompt tokens ~ characters / 4; completion tokens assumed "
                               "per call: labels 2, the agents' own calls by kind (JSON 60, text 80); repairs of malformed answers "
                               "not included."):
            click.echo(line)
        return None
    target = Path(out) if out else Path("runs") / f"{resolved.model.name}-{name}"
    if target.exists() and not target.is_dir():
        raise UsageError(f"--out {target}: exists and is not a folder")
    for journal in [target / "events.sqlite", *sorted(target.glob("agents-*/events.sqlite"))]:
        clear_earlier_answers(journal)
    known = cached_answers(target)
    resume = command_line(click.get_current_context())
    try:
        rows, calls = asyncio.run(_evaluate(resolved, plugins, folder, users, grid, seed, lengths, page_size, out=target,
                                            resolve=resolve, resume=resume))
    except LLMFault as exc:
        raise RunStopped(f"eval {name} stopped: LLM call failed: {exc.describe()}; the answers so far are cached: "
                         f"resume with {resume}") from None
    (target / f"{name}.json").write_text(json.dumps({"scenario": scenario_path, "users": users, "seed": seed, "rows": rows,
                                                     "llm_calls": calls}, indent=1), encoding="utf-8")
    return rows, f"{calls_line(calls, cached_answers(target) - known)}; written to {target}"


def _folder(scenario: str, resolved: Any, data: str | None) -> Path:
    """The MovieLens folder: ``--data`` or the scenario's platform path."""
    if data is None:
        platform = resolved.platform.config
        if getattr(platform, "catalogue", None) != "movielens" or not getattr(platform, "path", None):
            raise UsageError(f"{scenario}: platform: the test needs catalogue = \"movielens\" and a path (or --data)")
        return data_path(platform.path, resolved.base_dir)
    return data_path(data)  # data:movielens-latest-small -> the installed dataset


def _inputs(scenario: str, overrides: tuple[str, ...], seed: int | None, llm_spec: str | None, data: str | None,
            plugin_options: tuple[str, ...]) -> tuple[Any, Any, Path, Any]:
    """(the resolved scenario, the plugins, the MovieLens folder, the scenario with more overrides)."""
    from townsquare.api.commands import llm_overrides, load_plugins, load_scenario

    plugins = load_plugins(plugin_options)
    given = [*llm_overrides(llm_spec), *overrides]
    resolved = load_scenario(scenario, given, plugins, seed=seed)
    return resolved, plugins, _folder(scenario, resolved, data), lambda more: load_scenario(scenario, [*given, *more], plugins, seed=seed)


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
    @click.option("--out", type=click.Path(file_okay=False), default=None,
                  help="Folder for the results, the response caches and the LLM calls (default runs/NAME-discrimination).")
    @click.option("--estimate", is_flag=True, help="Print the calls, tokens and cost of this test; call no model.")
    @common_options
    def discrimination(scenario: str, users: int, grid: tuple[str, ...], data: str | None, overrides: tuple[str, ...],
                       seed: int | None, llm_spec: str | None, out: str | None, estimate: bool, plugin_options: tuple[str, ...],
                       **_: Any) -> None:
        """RecAgent's discrimination test (fig. 2a): p for the agent, random and embedding."""
        pairs = _grid(grid)
        resolved, plugins, folder, resolve = _inputs(scenario, overrides, seed, llm_spec, data, plugin_options)
        done = run_command("discrimination", scenario, resolved, plugins, folder, users, pairs, None, 10, out, estimate, resolve)
        if done is None:
            return
        click.echo(format_table(done[0]))
        click.echo("p/|U|: the share of the truth each user's picks found, averaged (p itself in brackets); "
                   "llm: the bare model, agent: the RecAgent agent (profile, memory, policy)")
        click.echo(done[1])

    @group.command("generation")
    @click.argument("scenario", type=click.Path(dir_okay=False))
    @click.option("--users", type=click.IntRange(min=1), default=20, show_default=True, help="MovieLens users sampled.")
    @click.option("--n", "lengths", type=click.IntRange(min=1), multiple=True, help="Sequence length N; repeat for several (default: 5 and 10).")
    @click.option("--page-size", type=click.IntRange(min=2), default=10, show_default=True, help="Items on each page a simulator picks from.")
    @click.option("--data", type=click.Path(file_okay=False), default=None, help="MovieLens folder (default: the scenario's platform.path).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key (dotted path).")
    @click.option("--seed", type=int, default=None, help="Override the scenario's seed.")
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None, help="The agents' and the judge's LLM, as for run.")
    @click.option("--out", type=click.Path(file_okay=False), default=None,
                  help="Folder for the results, the response caches and the LLM calls (default runs/NAME-generation).")
    @click.option("--estimate", is_flag=True, help="Print the calls, tokens and cost of this test; call no model.")
    @common_options
    def generation_command(scenario: str, users: int, lengths: tuple[int, ...], page_size: int, data: str | None,
                           overrides: tuple[str, ...], seed: int | None, llm_spec: str | None, out: str | None, estimate: bool,
                           plugin_options: tuple[str, ...], **_: Any) -> None:
        """RecAgent's generation test (fig. 2b): the agent's and the Embedding baseline's N next
        movies against the user's real ones, as a judge sees them: win, lose, indistinguishable."""
        resolved, plugins, folder, resolve = _inputs(scenario, overrides, seed, llm_spec, data, plugin_options)
        done = run_command("generation", scenario, resolved, plugins, folder, users, [], list(lengths) or [5, 10], page_size, out,
                           estimate, resolve)
        if done is None:
            return
        click.echo(format_generation(done[0]))
        click.echo(done[1])
