"""Structured answers: their declarations, and reading a decision out of a model's answer (a
label, an opening, a JSON value).

Its own module because both the LLM port (:mod:`townsquare.llm`, which repairs or falls back)
and the fault classification (:mod:`townsquare.llm_faults`, which tells a cut-off decision from
a complete one) parse answers; neither imports the other for it.

A design declares each structured purpose once, next to the prompt that asks for it: an
:class:`AnswerFormat` in Python, or an ``[answers.NAME]`` table in the prompt's TOML file
(:func:`townsquare.lib.prompt_files.load_answers`)::

    [answers.like]
    labels = ["like", "no operation"]
    default = "no operation"

    [answers.plan]
    schema = { type = "object", properties = { ... }, required = [ ... ] }

and asks with ``await llm.ask(prompt, answers["like"])``: the LLM layer holds the answer to the
declaration in the strongest mode the backend offers (:mod:`townsquare.llm_modes`).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence


class ParseFailure(ValueError):
    """An answer did not fit the requested labels or JSON shape."""


@dataclass(frozen=True)
class AnswerFormat:
    """The answer of one structured purpose: exactly one of a closed label set (``labels``), a
    JSON schema (``schema``) or fixed openings (``prefixes``: the answer starts with one of
    them, and one ending in ``:`` goes on in free text). ``default`` is what a caller gets
    when no answer fits (a label: one of ``labels``)."""

    purpose: str
    labels: tuple[str, ...] | None = None
    schema: dict[str, Any] | None = None
    prefixes: tuple[str, ...] | None = None
    default: Any = None

    def __post_init__(self) -> None:
        given = [name for name in ("labels", "schema", "prefixes") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"answer {self.purpose!r}: give exactly one of labels, schema, prefixes (got {', '.join(given) or 'none'})")
        for name in ("labels", "prefixes"):
            value = getattr(self, name)
            if value is not None:
                if not value or not all(isinstance(v, str) and v.strip() for v in value):
                    raise ValueError(f"answer {self.purpose!r}: {name} must be non-empty strings")
                object.__setattr__(self, name, tuple(value))
        if self.schema is not None and not isinstance(self.schema, dict):
            raise ValueError(f"answer {self.purpose!r}: schema must be a JSON schema object")
        if self.labels is not None and self.default is not None and self.default not in self.labels:
            raise ValueError(f"answer {self.purpose!r}: default {self.default!r} is not one of its labels")

    @property
    def kind(self) -> str:
        return "labels" if self.labels is not None else "prefixes" if self.prefixes is not None else "json"

    def with_labels(self, first: Sequence[str]) -> "AnswerFormat":
        """The same declaration with ``first`` put before its labels (a label set that is
        partly known only when asking: the follow decision's candidate ids)."""
        return replace(self, labels=(*first, *(self.labels or ())))

    def with_schema(self, **changes: Any) -> "AnswerFormat":
        """The same declaration with top-level schema keywords changed (``maxItems=2``)."""
        return replace(self, schema={**(self.schema or {}), **changes})

    @classmethod
    def from_table(cls, purpose: str, table: Mapping[str, Any]) -> "AnswerFormat":
        """From an ``[answers.NAME]`` TOML table (keys ``labels``, ``schema``, ``prefixes``,
        ``default``); ValueError naming the key otherwise."""
        unknown = sorted(set(table) - {"labels", "schema", "prefixes", "default"})
        if unknown:
            raise ValueError(f"answer {purpose!r}: unknown key {unknown[0]!r} (known: labels, schema, prefixes, default)")
        labels, prefixes = table.get("labels"), table.get("prefixes")
        return cls(purpose, labels=tuple(labels) if isinstance(labels, list) else labels, schema=table.get("schema"),
                   prefixes=tuple(prefixes) if isinstance(prefixes, list) else prefixes, default=table.get("default"))


def match_label(text: str, labels: Sequence[str]) -> str:
    """The label an answer gives: the whole answer (case, quotes and end punctuation aside), or
    its first words ("Like. It matches my hobbies"). Anything else, "I would not like this"
    included, raises :class:`ParseFailure`, so the caller repairs or falls back; a label merely
    mentioned somewhere is never taken for a decision."""
    cleaned = text.strip().strip("\"'`*").strip().lower()
    whole = cleaned.rstrip(".!")
    patterns, exact = _label_patterns(tuple(labels))
    if whole is cleaned or whole == cleaned:  # the bare label, as a constrained model answers: no opening to try
        label = exact.get(whole)
        if label is not None:  # no other label's opening can start a text this short (see _label_patterns)
            return label
    for low, label, opening in patterns:
        if whole == low or opening(cleaned):
            return label
    raise ParseFailure(f"answer {text[:80]!r} is none of {list(labels)}")


def match_prefix(text: str, prefixes: Sequence[str]) -> str:
    """The opening an answer starts with (case aside; a ``:`` may come after a space or be a
    full-width colon); an opening ending in ``:`` needs text after it. Raises
    :class:`ParseFailure` otherwise."""
    cleaned = text.strip().strip("`*").strip()
    for prefix, pattern in _prefix_patterns(tuple(prefixes)):
        match = pattern.match(cleaned)
        if match and (not prefix.endswith(":") or cleaned[match.end():].strip()):
            return prefix
    raise ParseFailure(f"answer {text[:80]!r} starts with none of {list(prefixes)}")


@functools.lru_cache(maxsize=64)
def _prefix_patterns(prefixes: tuple[str, ...]) -> list[tuple[str, Any]]:
    patterns = []
    for prefix in sorted(prefixes, key=len, reverse=True):
        body = re.escape(prefix.rstrip(":").strip())
        tail = r"\s*[:\uff1a]" if prefix.endswith(":") else r"\b"
        patterns.append((prefix, re.compile(body + tail, re.I)))
    return patterns


@functools.lru_cache(maxsize=256)
def _label_patterns(labels: tuple[str, ...]) -> tuple[list[tuple[str, str, Any]], dict[str, str]]:
    """(lower-cased label, label, the match of the label as the answer's first word), longest
    first; and each lower-cased label's label (the first in that order). An answer that is
    exactly a lower-cased label is that label: a longer label's opening cannot match a shorter
    text, nor an equally long one another label's."""
    lowered = sorted(((label.lower(), label) for label in labels), key=lambda pair: -len(pair[0]))
    exact: dict[str, str] = {}
    for low, label in lowered:
        exact.setdefault(low, label)
    return [(low, label, re.compile(rf"{re.escape(low)}\b(?![-'])").match) for low, label in lowered], exact


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
