"""The LLM steps of PersonaGym (Samuel et al. §3.2), each one call through the run's client
(its cache, budget, retries, concurrency limit and ``llm_calls`` accounting) and, where the
answer has a format, one repair request before a recorded ``parse_failure``:

* :func:`select_environments`: the environment selector Xi_e (appendix A.1);
* :func:`generate_questions`: the question generator Xi_q (A.2);
* :func:`agent_answer`: the persona agent's answer, through its OWN persona and memory
  components (the slots the simulation uses), A.3;
* :func:`score_examples`: the examples generator Xi_r, one example per score 1-5 (A.4);
* :func:`grade`: one evaluator's score 1-5 (A.6).

Temperatures follow §4.1: 0.9 for environment selection and question generation, 0 for the
evaluators; the paper gives none for the agent or the examples generator (our choice: 0.7,
settings in :class:`Settings`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

import structlog

from townsquare.api import LLMRequest, Message, agent_memory, fill_prompt

from .answer_parsing import AnswerFormatError, parse_environments, parse_examples, parse_questions, parse_score
from .benchmark_data import Task

log = structlog.get_logger("townsquare.plugins.personagym")

T = TypeVar("T")

NO_MEMORIES = "(nothing comes to mind)"


@dataclass(frozen=True)
class Settings:
    """Sampling and length settings of the steps (the paper's values where it gives them)."""

    generator_temperature: float = 0.9   # §4.1
    judge_temperature: float = 0.0       # §4.1
    answer_temperature: float = 0.7      # not given: our choice
    examples_temperature: float = 0.7    # not given: our choice
    memories: int = 5                    # memories recalled for an answer
    persona_chars: int = 1500            # persona description shown to generator and judges
    answer_tokens: int = 300
    question_tokens: int = 80            # per question asked for
    examples_tokens: int = 600
    grade_tokens: int = 400
    select_tokens: int = 200


async def ask_parsed(llm: Any, messages: Sequence[Message], parse: Callable[[str], T], *, purpose: str, repair: str,
                     shape: dict[str, Any] | None = None, labels: tuple[str, ...] | None = None,
                     **options: Any) -> tuple[T | None, str]:
    """``parse`` of the answer (the paper's free format); on a format error one repair request
    (the answer and ``repair`` appended) that asks for the same content in a shape a provider
    can enforce: ``shape`` (a JSON schema: grammar-constrained on the offline model, JSON mode
    on an endpoint) or ``labels`` (the offline model scores each label); if that fails too, a
    ``parse_failure`` row and ``(None, answer)``."""
    answer = await llm.text(list(messages), purpose=purpose, **options)
    try:
        return parse(answer), answer
    except AnswerFormatError:
        pass
    followup = (*messages, Message("assistant", answer or "(no answer)"), Message("user", repair))
    request = LLMRequest(messages=followup, purpose=f"{purpose}.repair", agent_id=llm.agent_id, json_schema=shape,
                         labels=labels, **options)
    repaired = (await llm.complete(request)).text
    repaired = repaired if isinstance(repaired, str) else ""
    try:
        return parse(repaired), repaired
    except AnswerFormatError:
        llm.report_parse_failure(purpose, repaired)
        log.warning("personagym.unparsable", purpose=purpose, answer=repaired[:120])
        return None, repaired


def list_shape(key: str, count: int | None = None, choices: Sequence[str] | None = None) -> dict[str, Any]:
    """A JSON schema for ``{key: [strings]}`` (``choices``: strings of that set only)."""
    items: dict[str, Any] = {"type": "string", "enum": list(choices)} if choices else \
        {"type": "string", "minLength": 10, "maxLength": MAX_ITEM_CHARS}
    array: dict[str, Any] = {"type": "array", "items": items, "minItems": 1}
    if count:
        array["maxItems"] = count
    return {"type": "object", "properties": {key: array}, "required": [key]}


#: longest string a repair's JSON may hold: bounded, so a grammar-constrained answer closes
#: its JSON before the token limit instead of being cut off (and retried) mid-string
MAX_ITEM_CHARS = 300
EXAMPLES_SHAPE = {"type": "object",
                  "properties": {f"score_{n}": {"type": "string", "minLength": 3, "maxLength": MAX_ITEM_CHARS} for n in range(1, 6)},
                  "required": [f"score_{n}" for n in range(1, 6)]}
SCORE_LABELS = ("1", "2", "3", "4", "5")


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]{4,}", text.lower())}


def fallback_environments(description: str, pool: Sequence[str], count: int) -> list[str]:
    """When the selector's answer names no environment even after repair: the ``count``
    environments sharing the most words with the persona, ties in pool order (our choice; the
    paper has no fallback)."""
    words = _words(description)
    ranked = sorted(range(len(pool)), key=lambda i: (-len(words & _words(pool[i])), i))
    return [pool[i] for i in ranked[:count]]


async def select_environments(llm: Any, prompts: dict[str, str], description: str, pool: Sequence[str], count: int,
                              settings: Settings) -> tuple[list[str], str]:
    """(the first ``count`` environments the selector chose, ``"llm"``), or the fallback's
    choice and ``"fallback"``."""
    prompt = fill_prompt(prompts["select_environments"], persona=description, environments=repr(list(pool)))
    chosen, _ = await ask_parsed(llm, [Message("user", prompt)], lambda text: parse_environments(text, pool),
                                 purpose="personagym.environments", repair=prompts["repair_environments"],
                                 shape=list_shape("environments", count, pool),
                                 max_tokens=settings.select_tokens, temperature=settings.generator_temperature)
    if chosen:
        return chosen[:count], "llm"
    return fallback_environments(description, pool, count), "fallback"


async def generate_questions(llm: Any, prompts: dict[str, str], description: str, environment: str, task: Task,
                             count: int, settings: Settings) -> list[str]:
    """Up to ``count`` questions for ``task`` in ``environment`` (fewer when the generator gave
    fewer; none after a failed repair)."""
    prompt = fill_prompt(prompts["generate_questions"], persona=description, environments=environment, task=task.title,
                         criteria=task.criteria, count=count)
    questions, _ = await ask_parsed(llm, [Message("user", prompt)], parse_questions, purpose=f"personagym.questions.{task.key}",
                                    repair=fill_prompt(prompts["repair_questions"], count=count), shape=list_shape("questions", count),
                                    max_tokens=settings.question_tokens * count + 40,
                                    temperature=settings.generator_temperature)
    return (questions or [])[:count]


async def agent_answer(ctx: Any, prompts: dict[str, str], question: str, task: str, settings: Settings) -> str:
    """The agent's answer from its own components: ``persona.context`` rendered for the
    question (else the whole persona), the top memories its memory chain recalls for it."""
    agent = ctx.agent
    context = agent.components.get("persona.context")
    persona = await context.render(ctx, question) if context is not None else agent.persona.text
    memory = agent_memory(agent)
    records = await memory.recall(ctx, question, settings.memories) if memory and settings.memories else []
    lines = "\n".join(f"- {r.text}" for r in records if r.text.strip()) or NO_MEMORIES
    system = fill_prompt(prompts["answer_system"], name=agent.persona.name, persona=persona)
    user = fill_prompt(prompts["answer"], memories=lines, question=question)
    text = await ctx.llm.text([Message("system", system), Message("user", user)], purpose=f"personagym.answer.{task}",
                              max_tokens=settings.answer_tokens, temperature=settings.answer_temperature)
    return " ".join(text.split())


async def score_examples(llm: Any, prompts: dict[str, str], description: str, question: str, task: Task,
                         settings: Settings) -> dict[int, str] | None:
    """score -> example answer (the reasoning exemplars e_{p,q}), or None."""
    prompt = fill_prompt(prompts["score_examples"], persona=description, question=question, rubric=task.outline())
    examples, _ = await ask_parsed(llm, [Message("user", prompt)], parse_examples, purpose=f"personagym.examples.{task.key}",
                                   repair=prompts["repair_examples"], shape=EXAMPLES_SHAPE, max_tokens=settings.examples_tokens,
                                   temperature=settings.examples_temperature)
    return examples


def examples_text(examples: dict[int, str] | None) -> str:
    if not examples:
        return "(none could be generated)"
    return "\n".join(f"Score {n}: {examples[n]}" for n in sorted(examples))


async def grade(llm: Any, prompts: dict[str, str], description: str, question: str, response: str, task: Task,
                examples: dict[int, str] | None, settings: Settings) -> float | None:
    """One evaluator's score (1-5) of an answer with the completed rubric R_{t,q}, or None."""
    prompt = fill_prompt(prompts["grade"], title=task.title, description=task.description, criteria=task.criteria_lines(),
                         examples=examples_text(examples), persona=description, question=question,
                         response=response or "(no answer)")
    score, _ = await ask_parsed(llm, [Message("system", prompts["grade_system"]), Message("user", prompt)], parse_score,
                                purpose=f"personagym.grade.{task.key}", repair=prompts["repair_grade"], labels=SCORE_LABELS,
                                max_tokens=settings.grade_tokens, temperature=settings.judge_temperature)
    return score
