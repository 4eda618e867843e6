"""PersonaGym over townsquare agents (Samuel et al. §3): for each agent (persona p),

1. environments E_p chosen from the pool (§3.2 "Dynamic Environment Selection"; skipped with
   the static questions, which come with their own);
2. questions Q_t per task t: ``per_task`` for each chosen environment (§3.2 "Question
   Generation": "10 task-specific questions per selected environment"; the released
   benchmark-v1 set instead has 10 per task per persona, its environments listed together in
   one prompt), or the released static set;
3. the agent's answers O, through its own persona and memory components;
4. score examples e_{p,q} for every question, generated once (§3.2 "Reasoning Exemplars");
5. every evaluator grades every answer with the completed rubric; the question's score is the
   evaluators' mean (:mod:`.persona_score`).

Agents run concurrently and so do their questions; the run's concurrency limit bounds the
calls in flight.
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


@dataclass
class Subject:
    """An agent to evaluate: its step context (agent, LLM) and its persona description p."""

    ctx: Any
    description: str
    #: the released static questions for this persona (task -> questions), if used
    static: dict[str, list[str]] | None = None

    @property
    def agent_id(self) -> str:
        return self.ctx.agent.id


@dataclass
class QuestionResult:
    task: str
    environment: str | None
    question: str
    answer: str = ""
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
    environment_source: str   # llm | fallback | given (--environment) | benchmark
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


async def evaluate(subjects: Sequence[Subject], *, generator: Any, judges: Sequence[Judge], prompts: dict[str, str],
                   tasks: dict[str, Task], pool: Sequence[str], environments: int, per_task: int,
                   settings: llm_steps.Settings = llm_steps.Settings(), fixed: Sequence[str] | None = None) -> list[PersonaResult]:
    """Every subject through the five steps (module docstring); ``fixed``: these environments
    for every persona instead of the selector's choice."""
    running = [asyncio.ensure_future(_persona(s, generator=generator, judges=judges, prompts=prompts, tasks=tasks, pool=pool,
                                              environments=environments, per_task=per_task, settings=settings, fixed=fixed))
               for s in subjects]
    try:
        return list(await asyncio.gather(*running))
    except BaseException:
        # a stop (budget, outage, Ctrl-C): the other agents' calls end before the cache closes
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        raise


async def _persona(subject: Subject, *, generator: Any, judges: Sequence[Judge], prompts: dict[str, str],
                   tasks: dict[str, Task], pool: Sequence[str], environments: int, per_task: int,
                   settings: llm_steps.Settings, fixed: Sequence[str] | None = None) -> PersonaResult:
    agent = subject.ctx.agent
    description = subject.description[:settings.persona_chars]
    if subject.static is not None:
        chosen, source = [], "benchmark"
        items = [QuestionResult(t, None, q) for t in TASKS for q in subject.static[t][:per_task]]
    else:
        chosen, source = (list(fixed), "given") if fixed else await llm_steps.select_environments(generator, prompts, description, pool, environments, settings)
        pairs = [(t, e) for t in TASKS for e in chosen]
        generated = await asyncio.gather(*(llm_steps.generate_questions(generator, prompts, description, e, tasks[t], per_task, settings)
                                           for t, e in pairs))
        items = [QuestionResult(t, e, q) for (t, e), qs in zip(pairs, generated) for q in qs]
    result = PersonaResult(agent.id, agent.persona.name, agent.population, description, chosen, source, items)
    log.info("personagym.questions", agent=agent.id, environments=chosen, source=source, questions=len(items))

    async def one(item: QuestionResult) -> None:
        task = tasks[item.task]
        answer, examples = await asyncio.gather(
            llm_steps.agent_answer(subject.ctx, prompts, item.question, item.task, settings),
            llm_steps.score_examples(generator, prompts, description, item.question, task, settings))
        item.answer, item.examples = answer, examples
        grades = await asyncio.gather(*(llm_steps.grade(j.llm, prompts, description, item.question, answer, task, examples, settings)
                                        for j in judges))
        item.grades = {j.label: g for j, g in zip(judges, grades)}

    await asyncio.gather(*(one(item) for item in items))
    log.info("personagym.graded", agent=agent.id, questions=len(items),
             scored=sum(1 for i in items if i.score is not None))
    return result
