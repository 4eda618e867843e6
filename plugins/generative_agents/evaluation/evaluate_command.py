"""``townsquare eval park RUN``: Park et al.'s controlled evaluation of a finished run's agents
(§6; see :mod:`.controlled_eval`). The agents are rebuilt from the run's newest checkpoint and
interviewed under the four architectures with the run's LLM; the judges (``--judge``, repeatable,
as ``--llm`` is written: ``openai:gpt-4o-mini``; default the run's LLM) rank the answers; the
command prints the Bradley–Terry table and writes every answer and ordering to
``RUN/evaluation.json`` (or ``--out``). Nothing in the run's tables changes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from townsquare.api import hookimpl


async def _evaluate(run_path: str, judges: tuple[str, ...], agents: int | None, questions: int, seed: int,
                    bootstrap: int, topic: str | None = None, evidence: str = "") -> tuple[list[Any], list[Any], Any]:
    import numpy as np

    from townsquare.api import BuildContext, LLMClient, Services, StepContext, UsageError
    from townsquare.api.commands import Accounting, Simulation, close_each, compose, llm_overrides, load_run

    from ..prompt_files import load_prompts
    from .controlled_eval import ARCHITECTURES, REQUIRED, evaluate
    from .social_interviews import REQUIRED as SOCIAL, interview_town
    from .ranking import rank_conditions

    run_dir, scenario, plugins = load_run(run_path)
    checkpoint = run_dir.latest_checkpoint()
    if checkpoint is None:
        raise UsageError(f"{run_path}: the run has no checkpoint to interview its agents from")
    last, state = checkpoint
    sim = Simulation(scenario, plugins, run_dir)
    providers: list[Any] = []
    try:
        await sim.build()
        sim.set_state(state)
        if sim.services.llm is None:
            raise UsageError(f"{run_path}: the run has no [llm]: nothing to interview with")
        start, minutes = scenario.model.clock.start, scenario.model.clock.minutes_per_round
        from datetime import timedelta

        now = start + timedelta(minutes=(last + 1) * minutes)
        chosen = sim.agents[:agents] if agents else sim.agents
        contexts = [StepContext(agent=a, round=last + 1, now=now, minutes_per_round=minutes, services=sim.services,
                                llm=sim.services.llm.for_agent(a.id), start=start) for a in chosen]
        clients = []
        for spec in judges or (None,):
            if spec is None:
                clients.append(sim.services.llm.for_agent("judge"))
                continue
            # the judge's provider behind the run's own middleware (retries, cache, budget)
            _, judge_scenario, _ = load_run(run_path, plugins, overrides=llm_overrides(spec))
            build = BuildContext(services=sim.services, seed=scenario.model.seed, base_dir=scenario.base_dir,
                                 scenario=judge_scenario.model)
            provider = judge_scenario.llm.spec.factory(judge_scenario.llm.config, build)
            providers.append(provider)
            accounting = Accounting(provider, lambda call: None, lambda: last + 1, price=getattr(provider, "cost", None))
            llm = LLMClient(compose(provider, [*sim.llm_middleware, accounting]), model=provider.model)
            clients.append(llm.for_agent("judge"))
        prompts = load_prompts("evaluation", {**REQUIRED, **SOCIAL})
        social = await interview_town(contexts, prompts, topic, evidence) if topic else None
        judged = await evaluate(contexts, clients, np.random.default_rng(seed), per_category=questions, prompts=prompts) \
            if questions else []
        orderings = [o for item in judged for o in item.orderings]
        return judged, rank_conditions(orderings, list(ARCHITECTURES), rounds=bootstrap, seed=seed), social
    finally:
        await close_each(providers)
        await sim.aclose()


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
    @click.option("--out", type=click.Path(dir_okay=False), default=None, help="JSON file to write (default RUN/evaluation.json).")
    @common_options
    def evaluate_cmd(run_dir: str, judges: tuple[str, ...], agents: int | None, questions: int, topic: str | None,
                     evidence: str, seed: int, bootstrap: int, out: str | None, **_: Any) -> None:
        """Park et al.'s controlled evaluation: interview RUN's agents under four architectures, rank them."""
        from dataclasses import asdict

        from .ranking import table

        from townsquare.api import RunStopped
        from townsquare.api import LLMFault

        try:
            import re

            re.compile(evidence)
            judged, ranked, social = asyncio.run(_evaluate(run_dir, judges, agents, questions, seed, bootstrap, topic, evidence))
        except re.error as exc:
            raise click.BadParameter(f"not a regular expression: {exc}", param_hint="--evidence") from None
        except LLMFault as exc:  # retries are the middleware's; what is left stops the evaluation cleanly
            raise RunStopped(f"evaluation stopped: LLM call failed: {exc.describe()}") from None
        target = Path(out) if out else Path(run_dir) / "evaluation.json"
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
        click.echo(f"written to {target}")
