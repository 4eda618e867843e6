"""PersonaGym over townsquare agents (Samuel et al. §3), for one design or several compared.
For each persona p (a :class:`Case`, shared by every design):

1. environments E_p chosen from the pool (§3.2 "Dynamic Environment Selection"; skipped with
   the released static questions, which come without them);
2. questions Q_t per task t: ``per_task`` for each chosen environment (§3.2 "Question
   Generation": "10 task-specific questions per selected environment"), or the static set;
3. each design's agent for p answers every question, through its own components (answers
   produced elsewhere come with their questions: :mod:`.given_answers`);
4. score examples e_{p,q} for every question, generated once (§3.2 "Reasoning Exemplars"),
   ``batch`` questions of a task per call as the released code does;
5. every judge grades every answer with the completed rubric, ``batch`` answers of a task per
   call; the question's score is the judges' mean (:mod:`.persona_score`).

Steps 1, 2 and 4 happen once per persona whatever the number of designs, and every design is
graded by the same judges: designs compared in one evaluation get the same questions, examples
and judges by construction. Personas run concurrently and so do their questions; the
evaluation's concurrency limit bounds the calls in flight.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import structlog

from . import llm_steps
from .benchmark_data import TASKS, Task
from .persona_score import ensemble

log = structlog.get_logger("townsquare.plugins.personagym")


def persona_description(persona: Any) -> str:
    """The persona as the generator and the judges see it: its text, its name first when the
    text does not hold it (a benchmark persona's name is its description)."""
    text = persona.text.strip()
    if not text:
        return persona.name
    return text if persona.name in text else f"Name: {persona.name}. {text}"


@dataclass
class Case:
    """Persona p: its description, its static questions if used, each design's agent (step
    context) for it, by design label, and answers produced elsewhere (``--answers``), by file
    label, each a :class:`~.given_answers.Given` (task, question, answer): the questions then
    are theirs, the same for every label. ``key`` names the persona in those files' results."""

    description: str
    static: dict[str, list[str]] | None = None
    agents: dict[str, Any] = field(default_factory=dict)
    given: dict[str, list[Any]] = field(default_factory=dict)
    key: str = ""


@dataclass
class QuestionResult:
    task: str
    environment: str | None
    question: str
    answer: str = ""
    #: a digest of the prompt the agent answered (:func:`.llm_steps.agent_answer`)
    prompt: str = ""
    examples: dict[int, str] | None = None
    grades: dict[str, float | None] = field(default_factory=dict)

    @property
    def score(self) -> float | None:
        return ensemble(self.grades.values())


@dataclass
class PersonaResult:
    agent_id: str
    name: str
    population: str
    description: str
    environments: list[str]
    environment_source: str   # llm | fallback | given (--environment) | benchmark | answers (--answers: none)
    questions: list[QuestionResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for item, result in zip(out["questions"], self.questions):
            item["score"] = result.score
        return out


@dataclass
class Judge:
    """An evaluator: a label (its spec) and its client."""

    label: str
    llm: Any


def batches(items: Sequence[Any], size: int) -> list[list[Any]]:
    return [list(items[i:i + size]) for i in range(0, len(items), max(1, size))]


async def evaluate(cases: Sequence[Case], *, generator: Any, judges: Sequence[Judge], prompts: dict[str, str],
                   tasks: dict[str, Task], pool: Sequence[str], environments: int, per_task: int,
                   settings: llm_steps.Settings = llm_steps.Settings(), fixed: Sequence[str] | None = None) -> dict[str, list[PersonaResult]]:
    """Every case through the five steps (module docstring): design label -> its results, in
    the cases' order. ``fixed``: these environments for every persona instead of the selector's."""
    running = [asyncio.ensure_future(_case(c, generator=generator, judges=judges, prompts=prompts, tasks=tasks, pool=pool,
                                           environments=environments, per_task=per_task, settings=settings, fixed=fixed))
               for c in cases]
    try:
        done = list(await asyncio.gather(*running))
    except BaseException:
        # a stop (budget, outage, Ctrl-C): the other personas' calls end before the cache closes
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        raise
    labels = [*cases[0].agents, *cases[0].given] if cases else []
    return {label: [by_design[label] for by_design in done] for label in labels}


async def _questions(case: Case, generator: Any, prompts: dict[str, str], tasks: dict[str, Task], pool: Sequence[str],
                     environments: int, per_task: int, settings: llm_steps.Settings,
                     fixed: Sequence[str] | None) -> tuple[list[str], str, list[QuestionResult]]:
    description = case.description[:settings.persona_chars]
    if case.given:
        return [], "answers", [QuestionResult(g.task, None, g.question) for g in next(iter(case.given.values()))]
    if case.static is not None:
        return [], "benchmark", [QuestionResult(t, None, q) for t in TASKS for q in case.static[t][:per_task]]
    chosen, source = (list(fixed), "given") if fixed else await llm_steps.select_environments(
        generator, prompts, description, pool, environments, settings)
    pairs = [(t, e) for t in TASKS for e in chosen]
    generated = await asyncio.gather(*(llm_steps.generate_questions(generator, prompts, description, e, tasks[t], per_task, settings)
                                       for t, e in pairs))
    return chosen, source, [QuestionResult(t, e, q) for (t, e), qs in zip(pairs, generated) for q in qs]


async def _case(case: Case, *, generator: Any, judges: Sequence[Judge], prompts: dict[str, str], tasks: dict[str, Task],
                pool: Sequence[str], environments: int, per_task: int, settings: llm_steps.Settings,
                fixed: Sequence[str] | None) -> dict[str, PersonaResult]:
    description = case.description[:settings.persona_chars]
    chosen, source, items = await _questions(case, generator, prompts, tasks, pool, environments, per_task, settings, fixed)
    log.info("personagym.questions", persona=description[:60], environments=chosen, source=source, questions=len(items))
    results = {}
    for label, ctx in case.agents.items():
        agent = ctx.agent
        copies = [QuestionResult(i.task, i.environment, i.question) for i in items]
        results[label] = PersonaResult(agent.id, agent.persona.name, agent.population, description, chosen, source, copies)
    for label, given in case.given.items():  # answered elsewhere: nothing to ask
        copies = [QuestionResult(g.task, None, g.question, answer=g.answer) for g in given]
        results[label] = PersonaResult(case.key, case.description, label, description, chosen, source, copies)

    async def examples_for(task: str) -> None:
        mine = [i for i, item in enumerate(items) if item.task == task]
        for group in batches(mine, settings.batch):
            found = await llm_steps.score_examples(generator, prompts, [(description, items[i].question) for i in group],
                                                   tasks[task], settings)
            for i, examples in zip(group, found):
                items[i].examples = examples

    async def answers_for(label: str) -> None:
        ctx, mine = case.agents[label], results[label].questions
        answers = await asyncio.gather(*(llm_steps.agent_answer(ctx, prompts, q.question, q.task, settings) for q in mine))
        for q, (answer, prompt) in zip(mine, answers):
            q.answer, q.prompt = answer, prompt

    await asyncio.gather(*(examples_for(t) for t in TASKS), *(answers_for(label) for label in case.agents))
    for result in results.values():  # one set of examples per question, whichever design answered
        for q, item in zip(result.questions, items):
            q.examples = item.examples

    async def grades_for(label: str, judge: Judge, task: str) -> None:
        mine = [q for q in results[label].questions if q.task == task]
        for group in batches(mine, settings.batch):
            found = await llm_steps.grade(judge.llm, prompts, [(description, q.question, q.answer, q.examples) for q in group],
                                          tasks[task], settings)
            for q, score in zip(group, found):
                q.grades[judge.label] = score

    await asyncio.gather(*(grades_for(label, judge, task) for label in results for judge in judges for task in TASKS))
    for label, result in results.items():
        for q in result.questions:  # judges in their order, whatever order the grades landed in
            q.grades = {j.label: q.grades.get(j.label) for j in judges}
        log.info("personagym.graded", design=label, agent=result.agent_id, questions=len(result.questions),
                 scored=sum(1 for q in result.questions if q.score is not None))
    return results
