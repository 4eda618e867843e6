"""Park et al.'s controlled evaluation (§6): interview agents under four architectures and rank
the architectures by judges' orderings of the answers.

* **Interview battery**: five categories (self-knowledge, memory, plans, reactions,
  reflections), five questions each, in our own words; ``{name}`` is the interviewed agent,
  ``{other}`` another agent of the run (the paper's memory questions name a fellow resident).
* **Architectures** (§6.1): as in the paper, the same agents with access to memory types cut:
  ``full``; ``no_reflection``; ``no_reflection_no_planning``; ``no_observation_reflection_planning``
  (no memory at all: the persona alone). Observations are the records of kinds
  ``observation``, ``action`` and ``chat``; plans ``plan``; reflections ``reflection``. (The
  issue suggested toggling plugins on the same seed; the paper interviews the same agents
  with memory access removed, which keeps the rest of the run identical, so we follow it.)
* **Judges**: any LLM clients (an ensemble of two or more when given); each ranks the four
  anonymised answers to a question (letters shuffled per question). Orderings become pairwise
  wins, ranked with Bradley–Terry (:mod:`.ranking`) with bootstrap intervals.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

import structlog

from townsquare.api import agent_memory

from ..memory.memory_text import cut, memory_lines
from ..prompt_files import fill, load_prompts

log = structlog.get_logger("townsquare.plugins.generative_agents.controlled_eval")

REQUIRED = {"answer": frozenset({"name", "persona", "memories", "question"}),
            "judge": frozenset({"name", "persona", "question", "answers", "letters"})}

#: category -> five questions (our wording; ``{name}`` and ``{other}`` are filled in)
BATTERY: dict[str, tuple[str, ...]] = {
    "self-knowledge": (
        "Tell me about yourself, {name}.",
        "What does an ordinary weekday look like for you?",
        "What do you do for a living, and what do you like about it?",
        "Which three words describe you best?",
        "What matters most to you these days?",
    ),
    "memory": (
        "Who is {other}?",
        "What have you talked about with people recently?",
        "Has anything surprising happened in town lately?",
        "Is there an event coming up that people are talking about?",
        "Who did you see yesterday, and where?",
    ),
    "plans": (
        "What will you be doing at 10 am tomorrow?",
        "What are you planning for this evening?",
        "What is the most important thing on your schedule this week?",
        "Where will you be at lunchtime tomorrow?",
        "Is there anything you are preparing for?",
    ),
    "reactions": (
        "The food you are cooking starts to burn. What do you do?",
        "A neighbour asks you for help moving a sofa right now. How do you answer?",
        "You find that your usual place of work is closed today. What do you do?",
        "{other} invites you to a gathering tonight. Do you go?",
        "It starts pouring with rain while you are out. What do you do?",
    ),
    "reflections": (
        "Which person you met recently would you like to spend more time with, and why?",
        "What have you learned about yourself lately?",
        "If you could change one thing about your week, what would it be?",
        "Whom in town do you trust most, and why?",
        "What do you think {other} cares about most?",
    ),
}

OBSERVATION_KINDS = frozenset({"observation", "action", "chat"})
#: architecture -> memory kinds it may recall (None: every kind)
ARCHITECTURES: dict[str, frozenset[str] | None] = {
    "full": None,
    "no_reflection": OBSERVATION_KINDS | {"plan"},
    "no_reflection_no_planning": OBSERVATION_KINDS,
    "no_observation_reflection_planning": frozenset(),
}
RANKING_SCHEMA = {"type": "object", "properties": {"ranking": {"type": "array", "items": {"type": "string"}}},
                  "required": ["ranking"]}


@dataclass
class Judgement:
    agent: str
    category: str
    question: str
    answers: dict[str, str]
    orderings: list[list[str]] = field(default_factory=list)  # one per judge that answered


def questions_for(name: str, other: str, per_category: int = 5) -> list[tuple[str, str]]:
    return [(category, fill(q, name=name, other=other)) for category, qs in BATTERY.items() for q in qs[:per_category]]


async def interview(ctx: Any, question: str, architecture: str, prompts: dict[str, str], *, k: int = 5,
                    memory_chars: int = 1200, persona_chars: int = 600) -> str:
    """The agent's answer with recall limited to the architecture's memory kinds."""
    allowed = ARCHITECTURES[architecture]
    memory = agent_memory(ctx.agent)
    records: list[Any] = []
    if memory and allowed != frozenset():
        found = await memory.recall(ctx, question, k * 4 if allowed is not None else k)
        records = [r for r in found if allowed is None or r.kind in allowed][:k]
    persona = ctx.agent.persona
    prompt = fill(prompts["answer"], name=persona.name, persona=cut(persona.text, persona_chars), question=question,
                  memories=memory_lines(records, k, memory_chars))
    answer = await ctx.require_llm("controlled_eval").text(prompt, purpose=f"eval.answer.{architecture}", max_tokens=200)
    return " ".join(answer.split()) or "(no answer)"


def _ordering(letters: list[str]):
    def validate(value: Any) -> list[str]:
        ranking = value.get("ranking") if isinstance(value, dict) else value
        if not isinstance(ranking, list):
            raise ValueError('expected {"ranking": [letters]}')
        cleaned = [str(x).strip().strip("()").upper()[:1] for x in ranking]
        if sorted(cleaned) != sorted(letters):
            raise ValueError(f"the ranking must list each of {', '.join(letters)} once")
        return cleaned
    return validate


async def judge(llm: Any, prompts: dict[str, str], ctx: Any, question: str, answers: dict[str, str], rng: Any,
                persona_chars: int = 600) -> list[str] | None:
    """One judge's ordering of the architectures (best first), or None when it gave none."""
    architectures = list(answers)
    shuffled = [architectures[i] for i in rng.permutation(len(architectures))]
    letters = [chr(ord("A") + i) for i in range(len(shuffled))]
    listed = "\n".join(f"{letter}) {answers[a]}" for letter, a in zip(letters, shuffled))
    persona = ctx.agent.persona
    prompt = fill(prompts["judge"], name=persona.name, persona=cut(persona.text, persona_chars), question=question,
                  count=len(letters), answers=listed, letters=", ".join(f'"{x}"' for x in letters))
    order = await llm.json(prompt, RANKING_SCHEMA, purpose="eval.judge", default=None, validate=_ordering(letters),
                           max_tokens=60)
    if order is None:
        return None
    by_letter = dict(zip(letters, shuffled))
    return [by_letter[x] for x in order]


async def evaluate(contexts: Sequence[Any], judges: Sequence[Any], rng: Any, *, per_category: int = 5,
                   architectures: Sequence[str] = tuple(ARCHITECTURES), prompts: dict[str, str] | None = None,
                   k: int = 5) -> list[Judgement]:
    """Interview every agent (``contexts``: one step context each) with the battery under each
    architecture, and have every judge order the answers to each question."""
    prompts = prompts or load_prompts("evaluation", REQUIRED)
    names = [ctx.agent.persona.name for ctx in contexts]
    out: list[Judgement] = []
    for i, ctx in enumerate(contexts):
        other = names[(i + 1) % len(names)] if len(names) > 1 else "your neighbour"
        for category, question in questions_for(ctx.agent.persona.name, other, per_category):
            texts = await asyncio.gather(*(interview(ctx, question, a, prompts, k=k) for a in architectures))
            item = Judgement(ctx.agent.id, category, question, dict(zip(architectures, texts)))
            for llm in judges:
                order = await judge(llm, prompts, ctx, question, item.answers, rng)
                if order is not None:
                    item.orderings.append(order)
            out.append(item)
        log.info("eval.agent_done", agent=ctx.agent.id, questions=len(out))
    return out
