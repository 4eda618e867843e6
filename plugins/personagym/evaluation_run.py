"""One evaluation, built and run: the designs' simulations, the judges' and the generator's
clients, the personas (:class:`~.evaluation.Case`), and the steps of :mod:`.evaluation`.

Where the calls go:

* one design: its simulation is built in the output folder, and the generator and judges share
  its middleware (cache ``OUT/llm_cache.sqlite``, budget, retries) and its ``llm_calls``
  (``OUT/events.sqlite``);
* several designs: each design's simulation in ``OUT/<design>/`` (its agents' cache and calls),
  the generator and judges in ``OUT/`` (their own cache and calls, built from the first
  design's scenario: its ``[llm]`` is "the run's LLM" for them), and one budget for all: the
  designs' simulations are built without their own and share the evaluation's;
* answers produced elsewhere (``--answers``) are rows like designs (each file's results in
  ``OUT/<label>/`` beside others); with no design, the generator and judges are built from a
  scenario that holds nothing but LLM settings (:func:`.agent_session.settings_target`), their
  cache and calls in ``OUT/``.

With a :class:`~townsquare.api.commands.DryRun` (``--estimate``) every client is a stand-in and
no middleware is built: the same steps run, no call reaches a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from townsquare.api import UsageError

from .agent_session import Design, Target
from .evaluation import Case, Judge, PersonaResult, evaluate, persona_description
from .evaluation_inputs import Inputs
from .llm_steps import Settings


@dataclass
class Plan:
    """What the command decided: the designs, the inputs, the LLMs and where things go."""

    targets: list[Target]
    labels: list[str]
    inputs: Inputs
    prompts: dict[str, str]
    settings: Settings
    judges: tuple[str, ...]
    judge_labels: list[str]
    generator: str | None
    population: str | None
    with_run_memories: bool
    environments: int
    per_task: int
    resume: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    #: design -> slot -> the component filling it in the evaluated population, and ``llm`` -> provider:model
    slots: dict[str, dict[str, str]] = field(default_factory=dict)
    #: where the judges' and the generator's LLM settings come from: the first design, else
    #: the LLM-settings target of ``--answers`` alone
    base: Target | None = None

    @property
    def sources(self) -> list[str]:
        """What each row (label) came from: the designs' paths, then the answer files'."""
        return [t.path for t in self.targets] + ([f.path for f in self.inputs.given.files] if self.inputs.given else [])

    @property
    def settings_target(self) -> Target:
        return self.targets[0] if self.targets else self.base  # type: ignore[return-value]


def design_folder(out: Path, plan: Plan, k: int) -> Path:
    return out if len(plan.labels) == 1 else out / plan.labels[k]


async def run(plan: Plan, out: Path, dry_run: Any = None) -> dict[str, list[PersonaResult]]:
    """Build everything, evaluate, close; ``plan.counts`` gets the ``llm_calls`` rows written."""
    from townsquare.api.commands import EvalLLMs, model_identity, prices_of

    first = plan.settings_target
    single = len(plan.labels) == 1 and len(plan.targets) == 1  # the one design's simulation serves the judges too
    evaluator: Any = None
    designs: list[Design] = []
    try:
        if not single:  # the judges' own middleware first: its budget is shared with the designs
            evaluator = EvalLLMs(first.scenario, first.resolve_with, out, journal=out / "events.sqlite", resume=plan.resume,
                                 dry_run=dry_run)
            generator, judges = _evaluators(evaluator, plan)
        for k, target in enumerate(plan.targets):
            provider = dry_run.model(f"agents of {plan.labels[k]}", model_identity(target.scenario), prices_of(target.scenario.llm.config)) \
                if dry_run is not None else None
            design = Design(target, design_folder(out, plan, k), population=plan.population,
                            descriptions=plan.inputs.descriptions[:plan.inputs.count] if plan.inputs.descriptions else None,
                            with_run_memories=plan.with_run_memories, llm_provider=provider, dry_run=dry_run is not None,
                            shared_budget=None if single or evaluator is None else evaluator.budget())
            designs.append(design)
            await design.build(plan.resume)
        if single:
            evaluator = EvalLLMs(first.scenario, first.resolve_with, out, resume=plan.resume, dry_run=dry_run,
                                 world=None if dry_run is not None else designs[0].world, round=designs[0].round)
            generator, judges = _evaluators(evaluator, plan)
        plan.slots = {d.label: design_slots(d) for d in designs}
        cases = build_cases(designs, plan)
        return await evaluate(cases, generator=generator, judges=judges, prompts=plan.prompts, tasks=plan.inputs.tasks,
                              pool=plan.inputs.pool, environments=plan.environments, per_task=plan.per_task,
                              settings=plan.settings, fixed=plan.inputs.fixed)
    finally:
        if evaluator is not None:
            _add(plan.counts, evaluator.write_journal())
        for design in designs:
            _add(plan.counts, await design.close())
        if evaluator is not None:
            await evaluator.aclose()


def design_slots(design: Design) -> dict[str, str]:
    """slot -> component of the design's evaluated population, ``llm`` -> its provider:model."""
    from townsquare.api.commands import model_identity

    population = design.scenario.populations[design.index]
    slots = {slot: choice.spec.name if choice is not None else "-" for slot, choice in population.slots.items()}
    return {**slots, "llm": model_identity(design.scenario)}


def _evaluators(evaluator: Any, plan: Plan) -> tuple[Any, list[Judge]]:
    generator = evaluator.client(plan.generator, f"personagym.generator:{plan.generator or 'run'}")
    judges = [Judge(label, evaluator.client(spec, f"personagym.judge.{label}"))
              for label, spec in zip(plan.judge_labels, plan.judges or (None,))]
    return generator, judges


def _add(total: dict[str, int], more: dict[str, int]) -> None:
    for key, value in more.items():
        total[key] = total.get(key, 0) + value


def build_cases(designs: Sequence[Design], plan: Plan) -> list[Case]:
    """Persona i of every design and answer file, paired; designs whose persona i differs
    cannot share its questions, which is an error naming both."""
    agents = {d.label: d.contexts(d.agents()[:plan.inputs.count]) for d in designs}
    given = plan.inputs.given.answers if plan.inputs.given else {}
    count = min(len(a) for a in agents.values()) if agents else plan.inputs.count
    cases = []
    for i in range(count):
        described = {label: persona_description(ctxs[i].agent.persona) for label, ctxs in agents.items()}
        description = plan.inputs.descriptions[i] if plan.inputs.descriptions is not None else described[designs[0].label]
        if plan.inputs.descriptions is None and len(set(described.values())) > 1:
            a, b = designs[0].label, next(label for label, text in described.items() if text != described[designs[0].label])
            raise UsageError(f"designs {a} and {b} have different personas at agent {i + 1} ({described[a][:40]!r} vs "
                             f"{described[b][:40]!r}): a comparison needs the same personas (give --persona-file or --questions benchmark)")
        static = plan.inputs.static[i] if plan.inputs.static else None
        cases.append(Case(description, static, {label: ctxs[i] for label, ctxs in agents.items()},
                          {label: answers[i] for label, answers in given.items()}, key=f"persona-{i + 1:04d}"))
    return cases
