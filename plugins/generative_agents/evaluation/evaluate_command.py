"""``townsquare eval park RUN``: Park et al.'s controlled evaluation of a finished run's agents
(§6; see :mod:`.controlled_eval`). The agents are rebuilt from the run's newest checkpoint and
interviewed under the four architectures with the run's LLM; the judges (``--judge``, repeatable,
as ``--llm`` is written: ``openai:gpt-4o-mini``; default the run's LLM) rank the answers; the
command prints the Bradley–Terry table and writes every answer and ordering to
``RUN/evaluation.json`` (or ``--out``). Nothing in the run's tables changes.

``--topic`` adds §7.1's social interviews (:mod:`.social_interviews`); a topic the run's
``town_metrics`` measures (``--topic party``) is asked about in its own words (``about``) and a
yes is backed by the same evidence the metric counts. ``--each-day`` interviews from the
checkpoint that ends each simulated day (the run must keep them: ``[engine] keep_checkpoints``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from townsquare.api import hookimpl


async def _evaluate(run_path: str, judges: tuple[str, ...], agents: int | None, questions: int, seed: int,
                    bootstrap: int, topic: str | None = None, evidence: str | None = None,
                    each_day: bool = False) -> tuple[list[Any], list[Any], list[tuple[int | None, Any]]]:
    import numpy as np

    from townsquare.api import BuildContext, LLMClient
    from townsquare.api.commands import Accounting, close_each, compose, llm_overrides, load_run

    from ..prompt_files import load_prompts
    from .controlled_eval import ARCHITECTURES, REQUIRED, evaluate
    from .ranking import rank_conditions

    town = await TownAtCheckpoints.open(run_path, agents)
    providers: list[Any] = []
    try:
        social = []
        if topic:
            rounds = town.day_ends() if each_day else [town.last]
            social = [(round, results[0]) for round, results in await town.interviews(rounds, [topic], evidence)]
        contexts = town.contexts_at(town.last)
        clients = []
        for spec in judges or (None,):
            if spec is None:
                clients.append(town.sim.services.llm.for_agent("judge"))
                continue
            # the judge's provider behind the run's own middleware (retries, cache, budget)
            _, judge_scenario, _ = load_run(run_path, town.plugins, overrides=llm_overrides(spec))
            build = BuildContext(services=town.sim.services, seed=town.scenario.model.seed, base_dir=town.scenario.base_dir,
                                 scenario=judge_scenario.model)
            provider = judge_scenario.llm.spec.factory(judge_scenario.llm.config, build)
            providers.append(provider)
            accounting = Accounting(provider, lambda call: None, lambda: town.last + 1, price=getattr(provider, "cost", None))
            llm = LLMClient(compose(provider, [*town.sim.llm_middleware, accounting]), model=provider.model)
            clients.append(llm.for_agent("judge"))
        prompts = load_prompts("evaluation", REQUIRED)
        judged = await evaluate(contexts, clients, np.random.default_rng(seed), per_category=questions, prompts=prompts) \
            if questions else []
        orderings = [o for item in judged for o in item.orderings]
        return judged, rank_conditions(orderings, list(ARCHITECTURES), rounds=bootstrap, seed=seed), social
    finally:
        await close_each(providers)
        await town.aclose()


class TownAtCheckpoints:
    """A finished run's agents, rebuilt with the run's LLM and set to any checkpoint it kept (or
    to the start: round None, nothing restored), to be interviewed there."""

    def __init__(self, run_path: str, run_dir: Any, scenario: Any, plugins: Any, sim: Any, agents: int | None):
        self.run_path, self.run_dir, self.scenario, self.plugins, self.sim, self.agents = \
            run_path, run_dir, scenario, plugins, sim, agents
        self.last, self.state = run_dir.latest_checkpoint()
        self.restored: int | None = None

    @classmethod
    async def open(cls, run_path: str, agents: int | None = None) -> "TownAtCheckpoints":
        from townsquare.api import UsageError
        from townsquare.api.commands import Simulation, load_run

        run_dir, scenario, plugins = load_run(run_path)
        if run_dir.latest_checkpoint() is None:
            raise UsageError(f"{run_path}: the run has no checkpoint to interview its agents from")
        sim = Simulation(scenario, plugins, run_dir)
        town = cls(run_path, run_dir, scenario, plugins, sim, agents)
        try:
            await sim.build()
            if sim.services.llm is None:
                raise UsageError(f"{run_path}: the run has no [llm]: nothing to interview with")
        except BaseException:
            await sim.aclose()
            raise
        return town

    def day_ends(self) -> list[int]:
        """The checkpoint that ends each simulated day (a one-line error names a day without one)."""
        from townsquare.api import UsageError

        from .social_interviews import day_ends

        clock = self.scenario.model.clock
        kept = [r for r, _ in self.run_dir.checkpoints()]
        rounds, missing = day_ends(clock.start, clock.minutes_per_round, self.last, kept)
        if missing:
            raise UsageError(f"{self.run_path}: no checkpoint of {missing[0]} was kept (the run kept rounds "
                             f"{', '.join(map(str, kept))}): run it with --set engine.keep_checkpoints=0")
        return rounds

    def contexts_at(self, round: int | None) -> list[Any]:
        """The agents' step contexts after ``round`` (None: before the first round)."""
        from datetime import timedelta

        from townsquare.api import StepContext

        if round is not None and self.restored != round:
            self.sim.set_state(self.state if round == self.last else self.run_dir.checkpoint_at(round))
            self.restored = round
        clock = self.scenario.model.clock
        after = 0 if round is None else round + 1
        now = clock.start + timedelta(minutes=after * clock.minutes_per_round)
        chosen = self.sim.agents[:self.agents] if self.agents else self.sim.agents
        return [StepContext(agent=a, round=after, now=now, minutes_per_round=clock.minutes_per_round,
                            services=self.sim.services, llm=self.sim.services.llm.for_agent(a.id), start=clock.start)
                for a in chosen]

    async def interviews(self, rounds: list[int | None], topics: list[str], evidence: str | None = None) -> list[tuple[int | None, list[Any]]]:
        """Park §7.1's interviews after each of ``rounds`` (None, the start, must come first): every
        agent about each topic (``evidence`` backs a yes to the first; the others by their own
        measures), and about every other agent once."""
        from ..prompt_files import load_prompts
        from .social_interviews import REQUIRED, interview_town, topic_question

        prompts = load_prompts("evaluation", REQUIRED)
        out = []
        for round in rounds:
            contexts = self.contexts_at(round)
            results = []
            for i, topic in enumerate(topics):
                question, pattern, kinds = topic_question(self.scenario.model, topic, evidence if i == 0 else None)
                results.append(await interview_town(contexts, prompts, question, pattern, evidence_kinds=kinds, people=i == 0))
            out.append((round, results))
        return out

    async def aclose(self) -> None:
        await self.sim.aclose()


async def interview_run(run_path: str, rounds: list[int | None], topics: list[str]) -> list[tuple[int | None, list[Any]]]:
    """:meth:`TownAtCheckpoints.interviews` of a run (what ``benchmarks/party.py`` asks)."""
    town = await TownAtCheckpoints.open(run_path)
    try:
        return await town.interviews(rounds, topics)
    finally:
        await town.aclose()


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
    @click.option("--out", type=click.Path(dir_okay=False), default=None, help="JSON file to write (default RUN/evaluation.json).")
    @common_options
    def evaluate_cmd(run_dir: str, judges: tuple[str, ...], agents: int | None, questions: int, topic: str | None,
                     evidence: str | None, each_day: bool, seed: int, bootstrap: int, out: str | None, **_: Any) -> None:
        """Park et al.'s controlled evaluation: interview RUN's agents under four architectures, rank them."""
        from dataclasses import asdict

        from .ranking import table

        from townsquare.api import RunStopped
        from townsquare.api import LLMFault

        try:
            import re

            re.compile(evidence or "")
            judged, ranked, social = asyncio.run(_evaluate(run_dir, judges, agents, questions, seed, bootstrap, topic, evidence,
                                                           each_day))
        except re.error as exc:
            raise click.BadParameter(f"not a regular expression: {exc}", param_hint="--evidence") from None
        except LLMFault as exc:  # retries are the middleware's; what is left stops the evaluation cleanly
            raise RunStopped(f"evaluation stopped: LLM call failed: {exc.describe()}") from None
        target = Path(out) if out else Path(run_dir) / "evaluation.json"
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
        click.echo(f"written to {target}")
