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

``--topic`` adds §7.1's social interviews (:mod:`.social_interviews`); a topic the run's
``town_metrics`` measures (``--topic party``) is asked about in its own words (``about``) and a
yes is backed by the same evidence the metric counts. ``--each-day`` interviews from the
checkpoint that ends each simulated day (the run must keep them: ``[engine] keep_checkpoints``),
and the JSON holds every agent's answers for each (``social_by_day``).
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
                    bootstrap: int, topic: str | None = None, evidence: str | None = None, *, folder: Path,
                    resume: str | None = None, dry_run: Any = None, each_day: bool = False,
                    ) -> tuple[list[Any], list[Any], list[tuple[int | None, Any]], dict[str, int]]:
    """(judgements, ranking, the social interviews after each round asked, the calls written by
    status). The run's agents are rebuilt from its newest checkpoint in ``folder``
    (:class:`~townsquare.api.commands.EvalSimulation`), where every call of theirs and of the
    judges is journaled and cached; with ``dry_run`` they and the judges are stand-ins."""
    import numpy as np

    from townsquare.api.commands import EvalLLMs

    from ..prompt_files import load_prompts
    from .controlled_eval import ARCHITECTURES, REQUIRED, evaluate
    from .ranking import rank_conditions

    town = TownAtCheckpoints(run_path, folder, dry_run=dry_run)
    evaluator = None
    calls: dict[str, int] = {}
    try:
        social: list[tuple[int | None, Any]] = []
        if topic:
            rounds = town.day_ends() if each_day else [town.last]
            social = [(round, results[0]) for round, results in await town.interviews(rounds, [topic], evidence, resume, agents)]
        opened = await town.at(town.last, resume)
        contexts = town.contexts(agents)
        # the judges behind the run's own middleware (cache, budget, retries), journaled with the agents;
        # a name of its own per judge, so the cache never gives one judge's answers to another
        evaluator = EvalLLMs(town.scenario, lambda more: town.load(more)[1], folder, resume=resume,
                             dry_run=dry_run, world=None if dry_run is not None else opened, round=town.last + 1)
        clients = [evaluator.client(spec, "judge" if spec is None else f"judge:{spec}") for spec in judges or (None,)]
        prompts = load_prompts("evaluation", REQUIRED)
        judged = await evaluate(contexts, clients, np.random.default_rng(seed), per_category=questions, prompts=prompts) \
            if questions else []
        orderings = [o for item in judged for o in item.orderings]
        return judged, rank_conditions(orderings, list(ARCHITECTURES), rounds=bootstrap, seed=seed), social, calls
    finally:
        if evaluator is not None:
            await evaluator.aclose()
        calls.update(await town.aclose())


class TownAtCheckpoints:
    """A finished run's agents rebuilt for an evaluation in ``folder`` (an
    :class:`~townsquare.api.commands.EvalSimulation`: its own journal and cache) and set to any
    checkpoint the run kept, or to the start (round None: the agents as built, before the first
    round), to be interviewed there."""

    def __init__(self, run_path: str, folder: Path, dry_run: Any = None):
        from townsquare.api import UsageError
        from townsquare.api.commands import EvalSimulation, load_run

        self.run_path = run_path
        self.run_dir, self.scenario, self.plugins = load_run(run_path)
        checkpoint = self.run_dir.latest_checkpoint()
        if checkpoint is None:
            raise UsageError(f"{run_path}: the run has no checkpoint to interview its agents from")
        if self.scenario.llm is None:
            raise UsageError(f"{run_path}: the run has no [llm]: nothing to interview with")
        self.last, self.state = checkpoint
        provider = dry_run.stand_in("agents", self.scenario) if dry_run is not None else None
        self.evaluation = EvalSimulation(self.scenario, self.plugins, folder, llm_provider=provider, dry_run=dry_run is not None)
        self.restored: tuple[int | None] | None = None

    def load(self, overrides: Any) -> Any:
        from townsquare.api.commands import load_run

        return load_run(self.run_path, self.plugins, overrides=list(overrides))

    def day_ends(self) -> list[int]:
        """The checkpoint that ends each simulated day (a one-line error names a day without one)."""
        from townsquare.api import UsageError

        from .social_interviews import day_ends

        clock = self.scenario.model.clock
        kept = [r for r, _ in self.run_dir.checkpoints()]
        rounds, missing = day_ends(clock.start, clock.minutes_per_round, self.last, kept)
        if missing:
            raise UsageError(f"{self.run_path}: --each-day: no checkpoint of {missing[0]} was kept (the run kept rounds "
                             f"{', '.join(map(str, kept))}); run it with --set engine.keep_checkpoints=0")
        return rounds

    async def at(self, round: int | None, resume: str | None = None) -> Any:
        """The world set to the state after ``round`` (None: as built), its clock after it."""
        if self.restored == (round,):
            return self.evaluation.world
        if self.evaluation.world is None:
            await self.evaluation.build(None, 0, resume)
        state = None if round is None else self.state if round == self.last else self.run_dir.checkpoint_at(round)
        self.evaluation.restore(state, 0 if round is None else round + 1)
        self.restored = (round,)
        return self.evaluation.world

    def contexts(self, agents: int | None = None) -> list[Any]:
        agents_built = self.evaluation.world.agents
        return [self.evaluation.context(a) for a in (agents_built[:agents] if agents else agents_built)]

    async def interviews(self, rounds: list[int | None], topics: list[str], evidence: str | None = None,
                         resume: str | None = None, agents: int | None = None) -> list[tuple[int | None, list[Any]]]:
        """Park §7.1's interviews after each of ``rounds`` (None, the start, must come first): every
        agent about each topic (``evidence`` backs a yes to the first; the others by their own
        measures), and about every other agent once."""
        from ..prompt_files import load_prompts
        from .social_interviews import REQUIRED, interview_town, topic_question

        prompts = load_prompts("evaluation", REQUIRED)
        out = []
        for round in rounds:
            await self.at(round, resume)
            contexts = self.contexts(agents)
            results = []
            for i, topic in enumerate(topics):
                question, pattern, kinds = topic_question(self.scenario.model, topic, evidence if i == 0 else None)
                results.append(await interview_town(contexts, prompts, question, pattern, evidence_kinds=kinds, people=i == 0))
            out.append((round, results))
        return out

    async def aclose(self) -> dict[str, int]:
        return await self.evaluation.aclose()


async def interview_run(run_path: str, rounds: list[int | None], topics: list[str], folder: Path) -> list[tuple[int | None, list[Any]]]:
    """:meth:`TownAtCheckpoints.interviews` of a run, journaled in ``folder`` (what
    ``benchmarks/party.py`` asks)."""
    town = TownAtCheckpoints(run_path, folder)
    try:
        return await town.interviews(rounds, topics)
    finally:
        await town.aclose()


def estimate_lines(run_dir: str, judges: tuple[str, ...], agents: int | None, questions: int, seed: int, topic: str | None,
                   evidence: str | None, each_day: bool = False) -> list[str]:
    """A dry run of the evaluation on stand-in models, priced per stage and model."""
    import tempfile

    from townsquare.api.commands import DryRun

    dry = DryRun(EXPECTED_TOKENS)
    with tempfile.TemporaryDirectory(prefix="townsquare-park-estimate-") as tmp:
        asyncio.run(_evaluate(run_dir, judges, agents, questions, seed, 0, topic, evidence, folder=Path(tmp), dry_run=dry,
                              each_day=each_day))
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
    @click.option("--topic", default=None, help="Also ask every agent whether it knows about TOPIC and whether it knows each "
                  "other agent (Park §7.1); the name of a topic the run's town_metrics measures (party) asks in its words.")
    @click.option("--evidence", default=None,
                  help="Regular expression: a memory matching it backs a 'yes' about --topic (else it is a hallucination); "
                       "default: the town_metrics topic's pattern, else 'valentine|party'.")
    @click.option("--each-day", is_flag=True, help="Ask about --topic at the end of each simulated day (from that day's "
                  "last checkpoint), not only at the run's end.")
    @click.option("--seed", type=int, default=0, help="Seeds the answer order shown to judges and the bootstrap.")
    @click.option("--bootstrap", type=click.IntRange(min=0), default=1000, help="Bootstrap resamples for the intervals.")
    @click.option("--out", type=click.Path(dir_okay=False), default=None,
                  help="JSON file to write (default RUN/evaluation.json); the calls' journal and cache go in the folder beside it (RUN/evaluation/).")
    @click.option("--estimate", is_flag=True, help="Print the calls, tokens and cost per stage of this evaluation; call no model.")
    @common_options
    def evaluate_cmd(run_dir: str, judges: tuple[str, ...], agents: int | None, questions: int, topic: str | None,
                     evidence: str | None, each_day: bool, seed: int, bootstrap: int, out: str | None, estimate: bool,
                     **_: Any) -> None:
        """Park et al.'s controlled evaluation: interview RUN's agents under four architectures, rank them."""
        from dataclasses import asdict

        from .ranking import table

        import re

        from townsquare.api import LLMFault, RunStopped
        from townsquare.api.commands import cached_answers, calls_line, clear_earlier_answers, command_line, open_run

        try:
            re.compile(evidence or "")
        except re.error as exc:
            raise click.BadParameter(f"not a regular expression: {exc}", param_hint="--evidence") from None
        open_run(run_dir)
        if estimate:
            for line in estimate_lines(run_dir, judges, agents, questions, seed, topic, evidence, each_day):
                click.echo(line)
            return
        target = Path(out) if out else Path(run_dir) / "evaluation.json"
        folder = evaluation_folder(target)
        clear_earlier_answers(folder / "events.sqlite")
        known = cached_answers(folder)
        resume = command_line(click.get_current_context())
        try:
            judged, ranked, social, calls = asyncio.run(_evaluate(run_dir, judges, agents, questions, seed, bootstrap, topic, evidence,
                                                                  folder=folder, resume=resume, each_day=each_day))
        except LLMFault as exc:  # retries are the middleware's; what is left stops the evaluation cleanly
            raise RunStopped(f"evaluation stopped: LLM call failed: {exc.describe()}; the answers so far are cached: "
                             f"resume with {resume}") from None
        saved: dict[str, Any] = {"ranking": [asdict(r) for r in ranked], "judgements": [asdict(j) for j in judged]}
        if social:
            days = [{"round": round, **asdict(result), "knows_share": result.knows_share, "density": result.density}
                    for round, result in social]
            saved["social"] = days[-1]
            if each_day:
                saved["social_by_day"] = days
        target.write_text(json.dumps(saved, indent=1, ensure_ascii=False), encoding="utf-8")
        if judged:
            click.echo(table(ranked))
            orderings = sum(len(j.orderings) for j in judged)
            click.echo(f"{orderings} orderings of {len(judged)} questions")
            if not orderings:
                click.echo("note: no judge gave a usable ordering: the scores carry no information", err=True)
        for round, result in social:
            when = f"after round {round}: " if each_day else ""  # round N: the checkpoint written after it
            click.echo(f"{when}know about {result.topic}: {len(result.informed)} of {result.agents} ({result.knows_share:.0%}); "
                       f"{len(result.hallucinated)} said yes without a memory of it")
            click.echo(f"{when}relationship density (both say they know each other): {result.density:.3f}")
        click.echo(f"{calls_line(calls, cached_answers(folder) - known)}; journal {folder / 'events.sqlite'}")
        click.echo(f"written to {target}")
