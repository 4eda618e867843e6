"""Reading PersonaGym's answer formats (Samuel et al., appendix A), leniently.

* environment selection and question generation answer with a Python-style list of strings
  (A.1, A.2): :func:`parse_list` takes the first bracketed list (Python or JSON literal), else
  numbered or bulleted lines;
* score examples answer with one ``Score N: Response - ...`` line per score (A.4):
  :func:`parse_examples`;
* a judge ends its evaluation with "Therefore, the final score is N" (A.6):
  :func:`parse_score` takes the last such statement, else a last ``Score: N`` / ``N/5``.

Each raises :class:`AnswerFormatError` when nothing usable is found; the caller then sends one
repair request (:mod:`.llm_steps`) and, if that fails too, records a ``parse_failure``.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Sequence


class AnswerFormatError(ValueError):
    """An answer has none of the expected format."""


_BULLET = re.compile(r"^\s*(?:\d{1,3}\s*[.):]|[-*\u2022])\s+(.+?)\s*$")


def parse_list(text: str) -> list[str]:
    """The strings of the list an answer gives (see the module docstring)."""
    for start in [m.start() for m in re.finditer(r"\[", text)]:
        end = text.rfind("]")
        while end > start:
            chunk = text[start:end + 1]
            for reader in (ast.literal_eval, json.loads):
                try:
                    value = reader(chunk)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    continue
                items = [" ".join(str(v).split()) for v in value if isinstance(v, (str, int, float))] \
                    if isinstance(value, (list, tuple)) else []
                items = [i for i in items if i]
                if items:
                    return items
            end = text.rfind("]", start, end)
    lines = [m.group(1).strip().strip("\"'").strip() for m in map(_BULLET.match, text.splitlines()) if m]
    lines = [line for line in lines if line]
    if lines:
        return lines
    raise AnswerFormatError(f"no list in answer {text[:80]!r}")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def match_environments(items: Sequence[str], pool: Sequence[str]) -> list[str]:
    """The environments of ``pool`` that ``items`` name (case and punctuation aside), in the
    order named, each once; names outside the pool are dropped (the pool is the space E of §3.1)."""
    by_norm = {_norm(name): name for name in pool}
    chosen: list[str] = []
    for item in items:
        name = by_norm.get(_norm(item))
        if name is not None and name not in chosen:
            chosen.append(name)
    return chosen


def parse_environments(text: str, pool: Sequence[str]) -> list[str]:
    """The pool's environments an environment-selection answer names. A list is read first; an
    answer with no readable list, or a list naming none of the pool, is searched for the pool's
    names as written in the text (a model that answers in prose still chose)."""
    try:
        chosen = match_environments(parse_list(text), pool)
    except AnswerFormatError:
        chosen = []
    if chosen:
        return chosen
    lowered = f" {_norm(text)} "
    mentioned = sorted((lowered.find(f" {_norm(n)} "), n) for n in pool if f" {_norm(n)} " in lowered)
    if mentioned:
        return [name for _, name in mentioned]
    raise AnswerFormatError(f"answer {text[:80]!r} names none of the {len(pool)} environments")


def parse_questions(text: str) -> list[str]:
    """Questions from a question-generation answer: the list's items that are sentences."""
    questions = [q for q in parse_list(text) if len(q.split()) >= 3]
    if not questions:
        raise AnswerFormatError(f"no questions in answer {text[:80]!r}")
    return questions


_EXAMPLE = re.compile(r"Score\s*([1-5])\s*[:=.)-]\s*(?:Response\s*[-:\u2013\u2014]\s*)?(.*?)(?=\n?\s*Score\s*[1-5]\s*[:=.)-]|\Z)",
                      re.IGNORECASE | re.DOTALL)


def _json_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def parse_examples(text: str) -> dict[int, str]:
    """score -> example answer, for all five scores, from a score-examples answer (the
    ``Score N: Response - ...`` lines, or the repair's JSON ``{"score_N": ...}``)."""
    found: dict[int, str] = {}
    shaped = _json_object(text)
    if shaped is not None:
        text = "\n".join(f"Score {k[-1]}: {v}" for k, v in shaped.items()
                         if isinstance(v, str) and re.fullmatch(r"score_[1-5]", str(k)))
    for number, example in _EXAMPLE.findall(text):
        cleaned = " ".join(example.replace("-" * 5, " ").split()).strip(" -\"'")
        if cleaned and int(number) not in found:
            found[int(number)] = cleaned
    missing = [n for n in range(1, 6) if n not in found]
    if missing:
        raise AnswerFormatError(f"no example for score {missing[0]} in answer {text[:80]!r}")
    return found


_FINAL = re.compile(r"final\s+score\s*(?:is|:|=|of)?\s*[:=]?\s*\**\s*([1-5](?:\.\d+)?)(?!\d)", re.IGNORECASE)
_FALLBACKS = (re.compile(r"\bscore\s*(?:is|:|=|of)\s*\**\s*([1-5](?:\.\d+)?)(?!\d)", re.IGNORECASE),
              re.compile(r"(?<![\d.])([1-5](?:\.\d+)?)\s*(?:/|out of)\s*5\b", re.IGNORECASE))


def parse_score(text: str) -> float:
    """The score (1 to 5) a judge's evaluation ends with: the last "final score is N", else the
    last "score: N" or "N/5", or an answer that is the number alone (the repair's). A value
    outside 1-5 is no score."""
    alone = re.fullmatch(r"\s*\**([1-5](?:\.\d+)?)\**\.?\s*", text)
    if alone:
        return float(alone.group(1))
    for pattern in (_FINAL, *_FALLBACKS):
        found = pattern.findall(text)
        if found:
            value = float(found[-1])
            if 1 <= value <= 5:
                return value
    raise AnswerFormatError(f"no final score in evaluation {text[-80:]!r}")
