"""The knowledge-source protocol: an external knowledge base agents may draw on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class KnowledgeItem:
    id: str
    text: str
    title: str = ""
    score: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class KnowledgeSource(Protocol):
    async def search(self, query: str, k: int) -> list[KnowledgeItem]:
        """The ``k`` items most relevant to ``query``, best first."""
