"""The oracle's rules for PersonaGym (Samuel et al.): a careful reader who knows only its prompt.

* **environments**: the environments of the list that share the most words with the persona
  line (the list's order breaks ties); **questions**: the asked number of questions, each
  naming the environment; **score examples**: one plain example per score.
* **the persona's answer** (``personagym.answer``): it says what its prompt told it about
  itself: every line of the system prompt after the instruction (the persona as the design's
  ``persona.context`` rendered it) and every memory the user message carries, then the
  question restated. An agent whose prompt holds more of its persona answers with more of it.
* **the judge** (``personagym.grade``): per rubric, the share of the persona's content words
  (four letters or more, once each) that the answer uses, s, as the score 1 + floor(4 s): none
  1, all 5. It reads the persona and the answer off the rubric and nothing else; it is a
  stand-in for "the answer holds this persona", not a measure of quality.
"""

from __future__ import annotations

import re
from typing import Any

from .prompt_view import PromptView

_WORD = re.compile(r"[a-z]{4,}")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def environments(view: PromptView) -> Any:
    pool = ((view.json_schema or {}).get("properties", {}).get("environments", {}).get("items", {}) or {}).get("enum") or []
    persona = _words(view.section("Persona"))
    ranked = sorted(range(len(pool)), key=lambda i: (-len(persona & _words(pool[i])), i))
    return {"environments": [pool[i] for i in ranked[:1]]}


def questions(view: PromptView) -> Any:
    count = int(((view.json_schema or {}).get("properties", {}).get("questions", {}) or {}).get("minItems", 1))
    place = view.section("Environments") or "there"
    return {"questions": [f"Question {n + 1}: you are at {place}; what do you do first, and why?" for n in range(count)]}


def examples(view: PromptView) -> Any:
    count = int(((view.json_schema or {}).get("properties", {}).get("examples", {}) or {}).get("minItems", 1))
    return {"examples": [{f"score_{n}": f"An answer worth {n}." for n in range(1, 6)} for _ in range(count)]}


def answer(view: PromptView) -> str:
    system = view.text.split("\n\n" + view.last)[0] if view.last else view.text
    told = [line.strip() for line in system.splitlines()[1:] if line.strip()]
    remembered = [line.strip()[2:] for line in view.last.splitlines() if line.strip().startswith("- ")]
    question = [line.strip() for line in view.last.splitlines() if line.strip() and not line.strip().startswith("- ")][-1:]
    return " ".join([*told, *remembered, *(f"You ask: {q}" for q in question)]) or "I would think about it."


def score_of(persona: str, response: str) -> int:
    words = _words(persona)
    share = len(words & _words(response)) / len(words) if words else 0.0
    return 1 + int(4 * share + 1e-9)


def grades(view: PromptView) -> Any:
    blocks = re.split(r"\n(?=Rubric \d+:\n)", view.last)
    out = []
    for block in blocks:
        if not block.lstrip().startswith("Rubric "):
            continue
        persona = re.search(r"^Persona: (.*)$", block, re.MULTILINE)
        response = re.search(r"^Answer: (.*)$", block, re.MULTILINE)
        score = score_of(persona.group(1) if persona else "", response.group(1) if response else "")
        out.append({"evaluation": f"The answer uses the persona's own words. Therefore, the final score is {score}", "score": score})
    return {"evaluations": out}


RULES = {
    "personagym.environments": environments,
    "personagym.questions.": questions,
    "personagym.examples.": examples,
    "personagym.answer.": answer,
    "personagym.grade.": grades,
}
