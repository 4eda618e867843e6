"""Reading a decision out of a model's answer: a label, or a JSON value.

Its own module because both the LLM port (:mod:`townsquare.llm`, which repairs or falls back)
and the fault classification (:mod:`townsquare.llm_faults`, which tells a cut-off decision from
a complete one) parse answers; neither imports the other for it.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Sequence


class ParseFailure(ValueError):
    """An answer did not fit the requested labels or JSON shape."""


def match_label(text: str, labels: Sequence[str]) -> str:
    """The label an answer gives: the whole answer (case, quotes and end punctuation aside), or
    its first words ("Like. It matches my hobbies"). Anything else, "I would not like this"
    included, raises :class:`ParseFailure`, so the caller repairs or falls back; a label merely
    mentioned somewhere is never taken for a decision."""
    cleaned = text.strip().strip("\"'`*").strip().lower()
    whole = cleaned.rstrip(".!")
    for low, label, opening in _label_patterns(tuple(labels)):
        if whole == low or opening(cleaned):
            return label
    raise ParseFailure(f"answer {text[:80]!r} is none of {list(labels)}")


@functools.lru_cache(maxsize=256)
def _label_patterns(labels: tuple[str, ...]) -> list[tuple[str, str, Any]]:
    """(lower-cased label, label, the match of the label as the answer's first word), longest first."""
    lowered = sorted(((label.lower(), label) for label in labels), key=lambda pair: -len(pair[0]))
    return [(low, label, re.compile(rf"{re.escape(low)}\b(?![-'])").match) for low, label in lowered]


def extract_json(text: str) -> Any:
    """The first JSON object or array in ``text`` (models like to wrap it in prose or fences)."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ParseFailure(f"no JSON in answer {text[:80]!r}")
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise ParseFailure(f"malformed JSON in answer: {exc}") from None
    return value
