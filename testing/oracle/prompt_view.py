"""What the oracle may read: the request's text, and helpers to find things in it.

Everything here is a pure function of the request (its messages, purpose, labels, schema and
answer prefixes): nothing of the run, the agent or the platform reaches the oracle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...llm import LLMRequest
from .dispositions import Dispositions, draw


@dataclass(frozen=True)
class PromptView:
    purpose: str
    #: every message's content, in order, joined by blank lines
    text: str
    #: the last user message (the question being asked)
    last: str
    labels: tuple[str, ...] | None = None
    json_schema: dict[str, Any] | None = None
    answer_prefixes: tuple[str, ...] | None = None
    #: how the oracle reads (its settings); never anything of the run
    dispositions: Dispositions = Dispositions()

    @classmethod
    def of(cls, request: LLMRequest, dispositions: Dispositions | None = None) -> "PromptView":
        users = [m.content for m in request.messages if m.role == "user"]
        # a repair request asks again for the same purpose: the rules answer the original one
        purpose = request.purpose[: -len(".repair")] if request.purpose.endswith(".repair") else request.purpose
        return cls(purpose=purpose, text="\n\n".join(m.content for m in request.messages),
                   last=users[-1] if users else "", labels=request.labels, json_schema=request.json_schema,
                   answer_prefixes=request.answer_prefixes, dispositions=dispositions or Dispositions())

    def draw(self, what: str) -> float:
        """This request's number in [0, 1) for the share-valued disposition ``what``."""
        return draw(self.text, what)

    def lines(self) -> list[str]:
        """The prompt's non-blank lines, stripped."""
        return [line.strip() for line in self.text.splitlines() if line.strip()]

    def section(self, heading: str) -> str:
        """The text after the line that starts with ``heading`` (case-insensitive) up to the next
        blank line; "" when there is no such line."""
        lines = self.text.splitlines()
        for i, line in enumerate(lines):
            if line.strip().lower().startswith(heading.lower()):
                rest = [line.strip()[len(heading):].strip(" :")]
                for more in lines[i + 1:]:
                    if not more.strip():
                        break
                    rest.append(more.strip())
                return "\n".join(part for part in rest if part)
        return ""

    def find_all(self, pattern: str, flags: int = re.IGNORECASE) -> list[str]:
        """Every match of ``pattern`` in the whole prompt (group 1 when it has groups)."""
        return [m.group(1) if m.groups() else m.group(0) for m in re.finditer(pattern, self.text, flags)]

    def mentions(self, *words: str) -> bool:
        """True when any of ``words`` appears in the prompt as a whole word (case-insensitive)."""
        return any(re.search(rf"\b{re.escape(w)}\b", self.text, re.IGNORECASE) for w in words)
