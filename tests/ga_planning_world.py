"""A small world for the generative-agents planning and dialogue tests: agents with a plain list
memory (the kernel's Memory protocol, word-overlap recall) and an LLM client over a fake
provider that answers by purpose and records every request. No tests here."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Callable

from test_sa_policy_world import START, FuncLLM, World  # noqa: F401  (re-exported)
from townsquare.api import LLMRequest, MemoryRecord

__all__ = ["START", "ListMemory", "World", "by_purpose"]


class ListMemory:
    """The Memory protocol at its simplest: a list, recall by shared words, newest first on ties."""

    def __init__(self):
        self.records: list[MemoryRecord] = []

    async def remember(self, ctx, records):
        for record in records:
            record.id = record.id or f"m{len(self.records)}"
            record.created = record.created or ctx.now
            self.records.append(record)
        return []

    async def recall(self, ctx, query, k):
        words = set(re.findall(r"\w+", query.lower()))
        scored = [(len(words & set(re.findall(r"\w+", r.text.lower()))), i, r) for i, r in enumerate(self.records)]
        return [r for score, _, r in sorted(scored, key=lambda t: (-t[0], -t[1])) if score][:k]

    def since(self, when: datetime | None):
        return [r for r in self.records if when is None or (r.created and r.created > when)]

    def get_state(self) -> dict[str, Any]:
        return {"records": [r.to_dict() for r in self.records]}

    def set_state(self, state):
        self.records = [MemoryRecord.from_dict(d) for d in state["records"]]


def by_purpose(answers: dict[str, Any], default: str = "ok") -> FuncLLM:
    """A provider answering by request purpose: a string, or a callable ``request -> str``."""

    def reply(request: LLMRequest) -> str:
        answer = answers.get(request.purpose, default)
        return answer(request) if callable(answer) else answer

    return FuncLLM(reply)


Reply = Callable[[LLMRequest], str]
