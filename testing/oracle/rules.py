"""The oracle's rule book: purposes to rules, and shaping a rule's meaning into an answer.

A rule is ``rule(view: PromptView) -> answer``; the answer may be ``None`` (no opinion: the next
less specific rule answers), a ``str`` (a label, a text, or an answer that starts with an answer
prefix), or any JSON value (for a request with a ``json_schema``, sent as JSON).

Keys of a ``RULES`` dict: an exact purpose (``"importance"``), a prefix ending in ``.``
(``"plan."`` matches ``plan.day`` and ``plan.hourly``), or ``"*"`` (every purpose). The
longest matching key is tried first, then shorter ones, then ``"*"``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from ...llm_answers import ParseFailure, match_label
from .prompt_view import PromptView

Rule = Callable[[PromptView], Any]


class RuleBook:
    def __init__(self) -> None:
        self.rules: dict[str, Rule] = {}

    def add(self, rules: Mapping[str, Rule]) -> None:
        """Add ``rules``; a key already present is replaced (later modules are more specific)."""
        self.rules.update(rules)

    def candidates(self, purpose: str) -> list[Rule]:
        """The rules for ``purpose``, most specific first."""
        keys = [k for k in self.rules if k == purpose or (k.endswith(".") and purpose.startswith(k))]
        keys.sort(key=len, reverse=True)
        if "*" in self.rules:
            keys.append("*")
        return [self.rules[k] for k in keys]

    def answer(self, view: PromptView) -> str:
        for rule in self.candidates(view.purpose):
            value = rule(view)
            if value is not None:
                return shape(view, value)
        raise LookupError(f"the oracle has no rule for purpose {view.purpose!r}")


def shape(view: PromptView, value: Any) -> str:
    """``value`` spelt as the request demands: one of its labels, JSON for a schema, or text."""
    if view.labels:
        try:
            return match_label(str(value), view.labels)
        except ParseFailure:
            raise ValueError(f"oracle rule for {view.purpose!r} gave {value!r}, none of {list(view.labels)}") from None
    if view.json_schema is not None and not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
