"""The LLM steps of PersonaGym (Samuel et al. §3.2, appendix A), each one call through a client
of the evaluation (its cache, budget, retries, concurrency limit and ``llm_calls`` rows):

* :func:`select_environments`: the environment selector Xi_e (A.1);
* :func:`generate_questions`: the question generator Xi_q (A.2);
* :func:`agent_answer`: the persona agent's answer, through its OWN persona component (the
  design's ``persona.context`` slot) and, when memory is in play, its memory chain (A.3);
* :func:`score_examples`: the examples generator Xi_r, one example per score 1-5 for each of a
  batch of questions (A.4);
* :func:`grade`: one evaluator's score 1-5 for each of a batch of answers (A.6).

Every answer with a structure is JSON of the schema declared beside its step
(:meth:`townsquare.api.LLMClient.json`: one repair request, then a recorded ``parse_failure``
and the step's fallback). Sampling and lengths follow the released code where the paper is
silent (:class:`Settings`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

import structlog

from townsquare.api import Message, agent_memory
from townsquare.lib.prompt_files import fill_prompt

from .answer_parsing import match_environments
from .benchmark_data import Task

log = structlog.get_logger("townsquare.plugins.personagym")


@dataclass(frozen=True)
class Settings:
    """Sampling, lengths and batching of the steps."""

    generator_temperature: float = 0.9   # §4.1 (environment selection and question generation)
    judge_temperature: float = 0.0       # §4.1
    answer_temperature: float = 0.9      # the released run_model's default (the paper gives none)
    examples_temperature: float = 0.0    # the released gen_score_examples (temperature 0)
    memories: int = 5                    # memories recalled for an answer, when memory is in play
    use_memories: bool = True            # False: the agent answers from its persona alone
    persona_chars: int = 1500            # persona description shown to the generator and the judges
    answer_tokens: int = 3000            # the released run_model's max_tokens
    max_tokens: int = 3000               # every other call (the released default)
    batch: int = 5                       # questions per score-examples and grading call (released score_answers)


# ---------------------------------------------------------------- schemas, beside the prompts they answer

#: longest string in a JSON answer (a question, a grade's reasoning; an example answer:
#: :data:`MAX_EXAMPLE_CHARS`): bounded, so a grammar-constrained model closes its JSON before
#: the token limit instead of being cut off mid-string
MAX_ITEM_CHARS = 600
MAX_EXAMPLE_CHARS = 300
SCORES = (1, 2, 3, 4, 5)


def environments_schema(pool: Sequence[str]) -> dict[str, Any]:
    """``select_environments``: ``{"environments": [names of the pool]}``."""
    return {"type": "object", "required": ["environments"],
            "properties": {"environments": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": list(pool)}}}}


def questions_schema(count: int) -> dict[str, Any]:
    """``generate_questions``: exactly ``count`` questions (the released code retries until it
    gets exactly 10)."""
    item = {"type": "string", "minLength": 10, "maxLength": MAX_ITEM_CHARS}
    return {"type": "object", "required": ["questions"],
            "properties": {"questions": {"type": "array", "minItems": count, "maxItems": count, "items": item}}}


def examples_schema(count: int) -> dict[str, Any]:
    """``score_examples``: one ``{"score_1": ..., "score_5": ...}`` per request, in order."""
    one = {"type": "object", "required": [f"score_{n}" for n in SCORES],
           "properties": {f"score_{n}": {"type": "string", "minLength": 1, "maxLength": MAX_EXAMPLE_CHARS} for n in SCORES}}
    return {"type": "object", "required": ["examples"],
            "properties": {"examples": {"type": "array", "minItems": count, "maxItems": count, "items": one}}}


def grades_schema(count: int) -> dict[str, Any]:
    """``grade``: one ``{"evaluation": reasoning, "score": 1-5}`` per rubric, in order (the
    reasoning first, as the released judge writes its evaluation before the final score)."""
    one = {"type": "object", "required": ["evaluation", "score"],
           "properties": {"evaluation": {"type": "string", "maxLength": MAX_ITEM_CHARS}, "score": {"type": "integer", "enum": list(SCORES)}}}
    return {"type": "object", "required": ["evaluations"],
            "properties": {"evaluations": {"type": "array", "minItems": count, "maxItems": count, "items": one}}}


def _list_of(value: Any, key: str, count: int | None = None) -> list[Any]:
    items = value.get(key) if isinstance(value, dict) else None
    if not isinstance(items, list) or not items:
        raise ValueError(f'expected {{"{key}": [...]}} with at least one item')
    if count is not None and len(items) != count:
        raise ValueError(f'"{key}" has {len(items)} items, expected {count}')
    return items


# ---------------------------------------------------------------- environments and questions

def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]{4,}", text.lower())}


def fallback_environments(description: str, pool: Sequence[str], count: int) -> list[str]:
    """When the selector's answer names no environment even after repair: the ``count``
    environments sharing the most words with the persona, ties in pool order (our choice; the
    paper has no fallback, the released code stops with an exception)."""
    words = _words(description)
    ranked = sorted(range(len(pool)), key=lambda i: (-len(words & _words(pool[i])), i))
    return [pool[i] for i in ranked[:count]]


async def select_environments(llm: Any, prompts: dict[str, str], description: str, pool: Sequence[str], count: int,
                              settings: Settings) -> tuple[list[str], str]:
    """(the first ``count`` environments the selector chose, ``"llm"``), or the fallback's
    choice and ``"fallback"``."""
    def chosen_of(value: Any) -> list[str]:
        chosen = match_environments([str(v) for v in _list_of(value, "environments")], pool)
        if not chosen:
            raise ValueError("none of the environments is in the list")
        return chosen

    prompt = fill_prompt(prompts["select_environments"], persona=description, environments=repr(list(pool)))
    chosen = await llm.json(prompt, environments_schema(pool), purpose="personagym.environments", default=None, validate=chosen_of,
                            max_tokens=settings.max_tokens, temperature=settings.generator_temperature)
    if chosen:
        return chosen[:count], "llm"
    return fallback_environments(description, pool, count), "fallback"


async def generate_questions(llm: Any, prompts: dict[str, str], description: str, environment: str, task: Task,
                             count: int, settings: Settings) -> list[str]:
    """Up to ``count`` questions for ``task`` in ``environment`` (none after a failed repair)."""
    def questions_of(value: Any) -> list[str]:
        found = [q for q in (" ".join(str(q).split()) for q in _list_of(value, "questions")) if q]
        if not found:
            raise ValueError("no question in the list")
        return found[:count]

    prompt = fill_prompt(prompts["generate_questions"], persona=description, environments=environment, task=task.title,
                         criteria=task.criteria, count=count)
    return await llm.json(prompt, questions_schema(count), purpose=f"personagym.questions.{task.key}", default=[],
                          validate=questions_of, max_tokens=settings.max_tokens, temperature=settings.generator_temperature)


# ---------------------------------------------------------------- the persona agent

async def agent_answer(ctx: Any, prompts: dict[str, str], question: str, task: str, settings: Settings) -> tuple[str, str]:
    """The agent's answer and a digest of the prompt it answered (two designs whose digests
    agree on every question asked their model the same thing): its ``persona.context``
    component rendered for the question (else the whole persona, its name first) in the system
    prompt; the question as the user message, after the memories its memory chain recalls for
    it when memory is in play."""
    agent = ctx.agent
    context = agent.components.get("persona.context")
    if context is not None:
        persona = await context.render(ctx, question)
    else:
        persona = agent.persona.text if agent.persona.name in agent.persona.text else f"Name: {agent.persona.name}\n{agent.persona.text}"
    memory = agent_memory(agent) if settings.use_memories and settings.memories else None
    records = await memory.recall(ctx, question, settings.memories) if memory else []
    lines = "\n".join(f"- {r.text}" for r in records if r.text.strip())
    system = fill_prompt(prompts["answer_system"], persona=persona)
    user = fill_prompt(prompts["answer_with_memories"], memories=lines, question=question) if lines \
        else fill_prompt(prompts["answer"], question=question)
    text = await ctx.llm.text([Message("system", system), Message("user", user)], purpose=f"personagym.answer.{task}",
                              max_tokens=settings.answer_tokens, temperature=settings.answer_temperature)
    digest = hashlib.sha256(json.dumps([system, user]).encode()).hexdigest()[:16]
    return " ".join(text.split()), digest


# ---------------------------------------------------------------- score examples and grades, in batches

async def score_examples(llm: Any, prompts: dict[str, str], items: Sequence[tuple[str, str]], task: Task,
                         settings: Settings) -> list[dict[int, str] | None]:
    """For each (persona description, question) of one task: score -> example answer (the
    reasoning exemplars e_{p,q}), all in one call; None each after a failed repair."""
    def examples_of(value: Any) -> list[dict[int, str]]:
        out = []
        for entry in _list_of(value, "examples", len(items)):
            if not isinstance(entry, dict) or any(not str(entry.get(f"score_{n}", "")).strip() for n in SCORES):
                raise ValueError("every entry needs score_1 to score_5")
            out.append({n: " ".join(str(entry[f"score_{n}"]).split()) for n in SCORES})
        return out

    requests = "\n\n".join(f"Request {i}:\n" + fill_prompt(prompts["example_request"], persona=persona, question=question,
                                                            rubric=task.outline())
                           for i, (persona, question) in enumerate(items, 1))
    prompt = fill_prompt(prompts["score_examples"], count=len(items), requests=requests)
    found = await llm.json(prompt, examples_schema(len(items)), purpose=f"personagym.examples.{task.key}", default=None,
                           validate=examples_of, max_tokens=settings.max_tokens, temperature=settings.examples_temperature)
    return found or [None] * len(items)


def examples_text(examples: dict[int, str] | None) -> str:
    if not examples:
        return "(none could be generated)"
    return "\n".join(f"Score {n}: {examples[n]}" for n in sorted(examples))


def rubric_text(prompts: dict[str, str], task: Task, persona: str, question: str, response: str,
                examples: dict[int, str] | None) -> str:
    """The completed rubric R_{t,q} of one answer (§3.1)."""
    return fill_prompt(prompts["rubric"], title=task.title, description=task.description, criteria=task.criteria_lines(),
                       examples=examples_text(examples), persona=persona, question=question, response=response or "(no answer)")


async def grade(llm: Any, prompts: dict[str, str], items: Sequence[tuple[str, str, str, dict[int, str] | None]], task: Task,
                settings: Settings) -> list[float | None]:
    """One evaluator's score (1-5) for each (persona, question, answer, examples) of one task,
    all in one call; None each after a failed repair."""
    def scores_of(value: Any) -> list[float]:
        out = []
        for entry in _list_of(value, "evaluations", len(items)):
            score = entry.get("score") if isinstance(entry, dict) else None
            if isinstance(score, str) and score.strip().isdigit():
                score = int(score.strip())
            if not isinstance(score, (int, float)) or isinstance(score, bool) or score not in SCORES:
                raise ValueError(f"score {score!r} is not 1, 2, 3, 4 or 5")
            out.append(float(score))
        return out

    rubrics = "\n\n".join(f"Rubric {i}:\n" + rubric_text(prompts, task, *item) for i, item in enumerate(items, 1))
    prompt = fill_prompt(prompts["grade"], count=len(items), rubrics=rubrics)
    found = await llm.json([Message("system", prompts["grade_system"]), Message("user", prompt)], grades_schema(len(items)),
                           purpose=f"personagym.grade.{task.key}", default=None, validate=scores_of,
                           max_tokens=settings.max_tokens, temperature=settings.judge_temperature)
    return found or [None] * len(items)
