"""``townsquare eval park RUN``: Park et al.'s controlled evaluation of a finished run's agents
(§6; see :mod:`.controlled_eval`). The agents are rebuilt from the run's newest checkpoint and
interviewed under the four architectures with the run's LLM; the judges (``--judge``, repeatable,
as ``--llm`` is written: ``openai:gpt-4o-mini``; default the run's LLM) rank the answers; the
command prints the Bradley–Terry table and writes every answer and ordering to
``RUN/evaluation.json`` (or ``--out``). Nothing in the run's tables changes: the agents are
rebuilt in the folder beside that file (``RUN/evaluation/``), where every call of theirs and of
the judges is an ``llm_calls`` row (``events.sqlite``) and every answer is cached
(``llm_cache.sqlite``), so the same command again replays the evaluation and says that the
model answered nothing; a budget stop names the command that resumes it. ``--estimate`` plays
the evaluation on stand-in models and prints its calls, tokens and cost per stage.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from townsquare.api import hookimpl


#: completion tokens an estimate assumes per call (our guesses; the output says so)
EXPECTED_TOKENS = {"eval.answer": 80, "eval.judge": 20, "eval.knows_topic": 2, "eval.knows_person": 2}


def evaluation_folder(target: Path) -> Path:
    """Where an evaluation written to ``target`` (``RUN/evaluation.json``) keeps its agents'
    simulation: its response cache and its ``llm_calls`` journal (``RUN/evaluation/``)."""
    return target.with_suffix("") if target.suffix else target.with_name(target.name + "-calls")


async def _evaluate(run_path: str, judges: tuple[str, ...], agents: int | None, questions: int, seed: int,
                    bootstrap: int, topic: str | None = None, evidence: str = "", *, folder: Path, resume: str | None = None,
                    dry_run: Any = None) -> tuple[list[Any], list[Any], Any, dict[str, int]]:
    """(judgements, ranking, social interviews, the calls written by status). The run's agents are
    rebuilt from its newest checkpoint in ``folder`` (:class:`~townsquare.api.commands.EvalSimulation`),
    where every call of theirs and of the judges is journaled and cached; with ``dry_run`` they
    and the judges are stand-ins."""
    import numpy as np

    from townsquare.api import UsageError
    from townsquare.api.commands import EvalLLMs, EvalSimulation, load_run

    from ..prompt_files import load_prompts
    from .controlled_eval import ARCHITECTURES, REQUIRED, evaluate
    from .social_interviews import REQUIRED as SOCIAL, interview_town
    from .ranking import rank_conditions

    run_dir, scenario, plugins = load_run(run_path)
    checkpoint = run_dir.latest_checkpoint()
    if checkpoint is None:
        raise UsageError(f"{run_path}: the run has no checkpoint to interview its agents from")
    if scenario.llm is None:
        raise UsageError(f"{run_path}: the run has no [llm]: nothing to interview with")
    last, state = checkpoint
    provider = dry_run.stand_in("agents", scenario) if dry_run is not None else None
    world = EvalSimulation(scenario, plugins, folder, llm_provider=provider, dry_run=dry_run is not None)
    evaluator = None
    calls: dict[str, int] = {}
    try:
        sim = await world.build(state, last + 1, resume)
        chosen = sim.agents[:agents] if agents else sim.agents
        contexts = [world.context(a) for a in chosen]
        # the judges behind the run's own middleware (cache, budget, retries), journaled with the agents;
        # a name of its own per judge, so the cache never gives one judge's answers to another
        evaluator = EvalLLMs(scenario, lambda more: load_run(run_path, plugins, overrides=list(more))[1], folder, resume=resume,
                             dry_run=dry_run, simulation=None if dry_run is not None else sim, round=last + 1)
        clients = [evaluator.client(spec, "judge" if spec is None else f"judge:{spec}") for spec in judges or (None,)]
        prompts = load_prompts("evaluation", {**REQUIRED, **SOCIAL})
        social = await interview_town(contexts, prompts, topic, evidence) if topic else None
        judged = await evaluate(contexts, clients, np.random.default_rng(seed), per_category=questions, prompts=prompts) \
            if questions else []
        orderings = [o for item in judged for o in item.orderings]
        return judged, rank_conditions(orderings, list(ARCHITECTURES), rounds=bootstrap, seed=seed), social, calls
    finally:
        if evaluator is not None:
            await evaluator.aclose()
        calls.update(await world.aclose())


def estimate_lines(run_dir: str, judges: tuple[str, ...], agents: int | None, questions: int, seed: int, topic: str | None,
                   evidence: str) -> list[str]:
    """A dry run of the evaluation on stand-in models, priced per stage and model."""
    import tempfile

    from townsquare.api.commands import DryRun

    dry = DryRun(EXPECTED_TOKENS)
    with tempfile.TemporaryDirectory(prefix="townsquare-park-estimate-") as tmp:
        asyncio.run(_evaluate(run_dir, judges, agents, questions, seed, 0, topic, evidence, folder=Path(tmp), dry_run=dry))
    return dry.report(f"to interview {run_dir}'s agents", "prompt tokens ~ characters / 4; completion tokens assumed per call: "
                      "answers 80, orderings 20, yes/no 2; repairs of malformed answers not included.")


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options, eval_group

    @eval_group(cli).command("park")
    @click.argument("run_dir", metavar="RUN")
    @click.option("--judge", "judges", multiple=True, metavar="PROVIDER[:MODEL]",
                  help="An LLM judge (repeat for an ensemble); default: the run's LLM.")
    @click.option("--agents", type=click.IntRange(min=1), default=None, help="Interview the first N agents (default all).")
    @click.option("--questions", type=click.IntRange(0, 5), default=5, help="Questions per category (5 in the paper; 0: no battery).")
    @click.option("--topic", default=None, help="Also ask every agent whether it knows about TOPIC and whether it knows each other agent (Park §7.1).")
    @click.option("--evidence", default="valentine|party", show_default=True,
                  help="Regular expression: a memory matching it backs a 'yes' about --topic (else it is a hallucination).")
    @click.option("--seed", type=int, default=0, help="Seeds the answer order shown to judges and the bootstrap.")
    @click.option("--bootstrap", type=click.IntRange(min=0), default=1000, help="Bootstrap resamples for the intervals.")
    @click.option("--out", type=click.Path(dir_okay=False), default=None,
                  help="JSON file to write (default RUN/evaluation.json); the calls' journal and cache go in the folder beside it (RUN/evaluation/).")
    @click.option("--estimate", is_flag=True, help="Print the calls, tokens and cost per stage of this evaluation; call no model.")
    @common_options
    def evaluate_cmd(run_dir: str, judges: tuple[str, ...], agents: int | None, questions: int, topic: str | None,
                     evidence: str, seed: int, bootstrap: int, out: str | None, estimate: bool, **_: Any) -> None:
        """Park et al.'s controlled evaluation: interview RUN's agents under four architectures, rank them."""
        from dataclasses import asdict

        from .ranking import table

        import re

        from townsquare.api import LLMFault, RunStopped
        from townsquare.api.commands import cached_answers, calls_line, clear_earlier_answers, command_line, open_run

        try:
            re.compile(evidence)
        except re.error as exc:
            raise click.BadParameter(f"not a regular expression: {exc}", param_hint="--evidence") from None
        open_run(run_dir)
        if estimate:
            for line in estimate_lines(run_dir, judges, agents, questions, seed, topic, evidence):
                click.echo(line)
            return
        target = Path(out) if out else Path(run_dir) / "evaluation.json"
        folder = evaluation_folder(target)
        clear_earlier_answers(folder / "events.sqlite")
        known = cached_answers(folder)
        resume = command_line(click.get_current_context())
        try:
            judged, ranked, social, calls = asyncio.run(_evaluate(run_dir, judges, agents, questions, seed, bootstrap, topic, evidence,
                                                                  folder=folder, resume=resume))
        except LLMFault as exc:  # retries are the middleware's; what is left stops the evaluation cleanly
            raise RunStopped(f"evaluation stopped: LLM call failed: {exc.describe()}; the answers so far are cached: "
                             f"resume with {resume}") from None
        saved: dict[str, Any] = {"ranking": [asdict(r) for r in ranked], "judgements": [asdict(j) for j in judged]}
        if social is not None:
            saved["social"] = {**asdict(social), "knows_share": social.knows_share, "density": social.density}
        target.write_text(json.dumps(saved, indent=1, ensure_ascii=False), encoding="utf-8")
        if judged:
            click.echo(table(ranked))
            orderings = sum(len(j.orderings) for j in judged)
            click.echo(f"{orderings} orderings of {len(judged)} questions")
            if not orderings:
                click.echo("note: no judge gave a usable ordering: the scores carry no information", err=True)
        if social is not None:
            click.echo(f"know about {social.topic}: {len(social.informed)} of {social.agents} ({social.knows_share:.0%}); "
                       f"{len(social.hallucinated)} said yes without a memory of it")
            click.echo(f"relationship density (both say they know each other): {social.density:.3f}")
        click.echo(f"{calls_line(calls, cached_answers(folder) - known)}; journal {folder / 'events.sqlite'}")
        click.echo(f"written to {target}")
