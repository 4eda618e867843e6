"""``townsquare eval pathways STUDY [--llm MODEL] [--set KEY=VALUE] [--sweep sweep.json] [--json]``.

The model answers each recorded decision point of the study (``prompts/<study>.json``, or
``--prompts FILE``) as the study's agents are asked it, through the scenario's LLM middleware
(``--scenario FILE`` for an endpoint's settings, the cache, retries and a budget; without one, a
bare scenario with ``--llm``): every call is an ``llm_calls`` row of ``OUT/llm_calls.sqlite``,
answers are cached in ``OUT`` (run again to resume after a stop), ``--estimate`` prices the
calls with a stand-in model first. Written: ``OUT/pathways.json`` (``dispositions``: each with
``name``, the oracle setting it mirrors, ``value`` and ``interval``; ``map`` with ``--sweep``).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any, Sequence

import click

from townsquare.api import UsageError, hookimpl

from .dispositions import DISPOSITIONS, DecisionPoint, Measured, measure

FIXTURES = Path(__file__).resolve().parent / "prompts"
STUDIES = {study: tuple(d.name for d in DISPOSITIONS.values() if d.study == study) for study in ("party", "cocoon", "conformity")}
#: the scenario an evaluation without ``--scenario`` resolves: only its [llm] and middleware matter
BARE_SCENARIO = {"rounds": 1, "populations": [{"name": "agents", "count": 1, "personas": {
    "name": "inline", "items": [{"name": "Model Under Test", "sentences": ["An agent whose model is asked the study's prompts."]}]}}]}


def load_points(study: str, path: str | Path | None = None) -> tuple[dict[str, Any], list[DecisionPoint]]:
    """A study's recorded decision points (``path``: another file of the same format)."""
    source = Path(path) if path else FIXTURES / f"{study}.json"
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
        points = [DecisionPoint.from_json(study, item) for item in data["prompts"]]
    except OSError as exc:
        raise UsageError(f"--prompts {source}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{source}: not a file of recorded prompts ({type(exc).__name__}: {exc}); "
                         "python tools/pathway_prompts.py writes them") from None
    unknown = sorted({p.disposition for p in points} - set(STUDIES[study]))
    if unknown:
        raise UsageError(f"{source}: disposition {unknown[0]} is not one of the {study} study's ({', '.join(STUDIES[study])})")
    return {k: v for k, v in data.items() if k != "prompts"}, points


async def ask_all(client: Any, points: Sequence[DecisionPoint]) -> list[Any]:
    """Each point's answer as the study parses it (None where it fell back unparsed)."""

    async def one(point: DecisionPoint) -> Any:
        shape, r = point.answer_format(), point.request
        if shape is None:
            return await client.text(r.messages, purpose=r.purpose, max_tokens=r.max_tokens, temperature=r.temperature) or None
        answer = await client.ask(r.messages, shape, max_tokens=r.max_tokens, temperature=r.temperature)
        return None if answer.fallback else answer.value

    return list(await asyncio.gather(*(one(p) for p in points)))


async def evaluate(evaluator: Any, points: Sequence[DecisionPoint]) -> tuple[list[Measured], dict[str, int]]:
    """The dispositions measured, and the journal's rows by status."""
    try:
        answers = await ask_all(evaluator.client(None, "pathways"), points)
        calls = evaluator.write_journal()
    finally:
        await evaluator.aclose()
    found = [measure(name, [p for p in points if p.disposition == name], [a for p, a in zip(points, answers) if p.disposition == name])
             for name in dict.fromkeys(p.disposition for p in points)]
    return found, calls


def table_lines(found: Sequence[Measured]) -> list[str]:
    from townsquare.api.commands import format_table

    def num(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.3g}"

    rows = [(m.name, num(m.value), f"[{num(m.interval.low)}, {num(m.interval.high)}]", m.used, m.aside, m.unreadable, m.prompts)
            for m in found]
    lines = format_table(("disposition", "value", "95 % interval", "answers used", "aside", "unreadable", "prompts"), rows)
    return lines + [f"  {m.name}: {m.about} ({m.scale})" for m in found]


def folder_name(study: str, model: str) -> str:
    return f"pathways-{study}-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", model).strip("_")


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options, eval_group

    @eval_group(cli).command("pathways")
    @click.argument("study", type=click.Choice(sorted(STUDIES)))
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None, help="The model under test, as for run (default: the scenario's).")
    @click.option("--scenario", "scenario_file", type=click.Path(dir_okay=False), default=None,
                  help="A scenario whose [llm] and middleware settings to use (endpoint, cache, retries, budget).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key (llm.news_importance=6...).")
    @click.option("--prompts", "prompts_file", type=click.Path(dir_okay=False), default=None,
                  help="Recorded decision points of the study (default: the shipped ones).")
    @click.option("--sweep", "sweep_file", type=click.Path(dir_okay=False, exists=True), default=None,
                  help="A sweep.json of an oracle sweep over these dispositions: place the model on its map.")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Folder of the cache, calls and results (default runs/pathways-STUDY-MODEL).")
    @click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
    @click.option("--estimate", is_flag=True, help="Print the calls, tokens and cost; call no model, write nothing.")
    @common_options
    def pathways(study: str, llm_spec: str | None, scenario_file: str | None, overrides: tuple[str, ...], prompts_file: str | None,
                 sweep_file: str | None, out: str | None, as_json: bool, estimate: bool, plugin_options: tuple[str, ...] = (), **_: Any) -> None:
        """A model's dispositions at STUDY's decision points, on the oracle's scales, and where the sweep puts it."""
        from townsquare.api import LLMFault, RunStopped
        from townsquare.api.commands import (
            DryRun, EvalLLMs, cached_answers, calls_line, clear_earlier_answers, command_line, llm_overrides, load_plugins, load_scenario,
            without_middleware,
        )

        from .sweep_map import place, placement_lines, read_sweep

        meta, points = load_points(study, prompts_file)
        sweep = read_sweep(sweep_file) if sweep_file else None
        plugins = load_plugins(plugin_options)
        base: Any = scenario_file or {"name": f"pathways-{study}", **BARE_SCENARIO}

        def resolve(more: list[str]) -> Any:
            return load_scenario(base, [*llm_overrides(llm_spec), *overrides, *more], plugins)

        scenario = resolve([])
        if scenario.llm is None:
            raise UsageError(f"{scenario_file or 'eval pathways'}: no [llm] to ask (give --llm PROVIDER[:MODEL])")
        if estimate:
            dry = DryRun()
            with tempfile.TemporaryDirectory(prefix="townsquare-pathways-") as tmp:
                asyncio.run(evaluate(EvalLLMs(without_middleware(scenario), resolve, Path(tmp), dry_run=dry), points))
            for line in dry.report(f"for {len(points)} decision points of the {study} study",
                                   "prompt tokens ~ characters / 4; completion tokens as expected per call (decisions 2, JSON 60, "
                                   "text 80, at most the request's max_tokens); repairs of malformed answers not counted.",
                                   stage_of=lambda purpose: purpose):
                click.echo(line)
            return
        from townsquare.api.commands import model_identity

        model = model_identity(scenario)
        folder = Path(out) if out else Path("runs") / folder_name(study, model)
        folder.mkdir(parents=True, exist_ok=True)
        clear_earlier_answers(folder / "llm_calls.sqlite")
        resume = command_line(click.get_current_context())
        evaluator = EvalLLMs(scenario, resolve, folder, journal=folder / "llm_calls.sqlite", resume=resume)
        known = cached_answers(folder)
        try:
            found, calls = asyncio.run(evaluate(evaluator, points))
        except LLMFault as exc:
            raise RunStopped(f"eval pathways stopped: LLM call failed: {exc.describe()}; the answers so far are cached: "
                             f"resume with {resume}") from None
        except RunStopped as exc:
            raise RunStopped(f"eval pathways stopped: {exc}") from None
        result: dict[str, Any] = {"study": study, "model": model, "prompts": str(prompts_file or FIXTURES / f"{study}.json"),
                                  "recorded": meta, "dispositions": [m.to_json() for m in found]}
        lines = [f"{model} at the {study} study's decision points ({len(points)} prompts recorded from {meta.get('source', 'an oracle run')}):",
                 *table_lines(found)]
        if sweep is not None:
            measured = {m.name: (m.value, m.interval.low, m.interval.high) for m in found}
            placements, notes = place(sweep, measured)
            result["map"] = {"sweep": str(sweep_file), "placements": [p.to_json() for p in placements], "notes": notes}
            lines += ["", *placement_lines(placements, str(sweep_file)), *(f"note: {n}" for n in notes)]
        (folder / "pathways.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
        if as_json:
            click.echo(json.dumps(result, indent=1))
        else:
            for line in lines:
                click.echo(line)
            click.echo(f"{calls_line(calls, cached_answers(folder) - known)}; written: {folder / 'pathways.json'}", err=True)
