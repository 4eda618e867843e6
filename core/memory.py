"""The memory contract: one record type and one protocol for every memory design.

Park et al.'s memory stream, RecAgent's sensory / short-term / long-term tiers and Zhou et al.'s
action memory all keep :class:`MemoryRecord` objects and implement :class:`Memory`, so any
policy runs with any memory design, and ablating a tier is one ``-p no:NAME``.

A policy never talks to the slots one by one: :func:`agent_memory` gives it the agent's memory
as one :class:`MemoryChain` over the memory slots that are filled, in the order
``memory.sensory`` -> ``memory.short_term`` -> ``memory.long_term`` -> ``memory.stream``.

- ``remember`` hands new records to the first tier; each tier stores what it keeps and returns
  the records the *next* tier should receive (RecAgent's sensory memory returns its compressed
  sentences, short-term memory returns the records it promotes with their insights; a terminal
  tier such as Park's stream returns nothing). With a tier ablated, records flow straight to the
  next one (RecAgent's "w/o short": sensory memories go to long-term memory).
- ``recall`` asks every tier for its top-``k`` records for the query and concatenates them
  (RecAgent's reading: the top-N long-term records plus all short-term records).
- ``since`` merges every tier's records created after a time, oldest first (reflection input).

The optional slot ``memory.retrieval`` holds a :class:`MemoryRetrieval` scorer (Park's
recency x importance x relevance); tiers that rank records consult it through
:func:`retrieval_of` and fall back to relevance alone when the slot is empty.

Times are the simulated clock (``StepContext.now``). Embeddings are the run embedder's
normalised vectors; a tier may keep them in its own arrays and leave ``embedding`` None on the
records it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .components import Agent, StepContext

#: Memory slots in the order records flow through them.
MEMORY_TIERS: tuple[str, ...] = ("memory.sensory", "memory.short_term", "memory.long_term", "memory.stream")

#: Record kinds the paper designs use; a component may add its own.
RECORD_KINDS: tuple[str, ...] = ("observation", "action", "reflection", "insight", "plan", "chat", "summary")


@dataclass
class MemoryRecord:
    """One memory. ``id`` is given by the memory that stores it (unique within the agent);
    ``evidence`` lists the ids a reflection or insight rests on, so reflections form a tree;
    ``meta`` holds JSON-serialisable extras (the post id observed, the item watched...)."""

    text: str
    kind: str = "observation"
    created: datetime | None = None
    last_access: datetime | None = None
    importance: float = 0.0
    embedding: "np.ndarray | None" = None
    evidence: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, without the embedding (tiers persist their vectors themselves)."""
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "created": self.created.isoformat() if self.created else None,
            "last_access": self.last_access.isoformat() if self.last_access else None,
            "importance": float(self.importance),
            "evidence": list(self.evidence),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MemoryRecord":
        def when(value: str | None) -> datetime | None:
            return datetime.fromisoformat(value) if value else None

        return cls(
            text=str(data["text"]),
            kind=str(data.get("kind", "observation")),
            created=when(data.get("created")),
            last_access=when(data.get("last_access")),
            importance=float(data.get("importance", 0.0)),
            evidence=tuple(data.get("evidence", ())),
            meta=dict(data.get("meta", {})),
            id=str(data.get("id", "")),
        )

    def without_embedding(self) -> "MemoryRecord":
        return replace(self, embedding=None)


@runtime_checkable
class Memory(Protocol):
    """Slots ``memory.sensory``, ``memory.short_term``, ``memory.long_term``, ``memory.stream``."""

    async def remember(self, ctx: "StepContext", records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """Store what this tier keeps of ``records`` (filling ``id``, ``created``, importance
        and embedding as the design does); return the records the next tier receives."""

    async def recall(self, ctx: "StepContext", query: str, k: int) -> list[MemoryRecord]:
        """The top-``k`` records for ``query`` at ``ctx.now``, best first. A design that ranks
        by recency updates ``last_access`` of what it returns."""

    def since(self, when: datetime | None) -> list[MemoryRecord]:
        """Records created after ``when`` (all when None), oldest first."""

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class MemoryRetrieval(Protocol):
    """Slot ``memory.retrieval``: scores candidate records for a query (higher is better)."""

    def score(self, records: Sequence[MemoryRecord], relevance: "np.ndarray", now: datetime) -> "np.ndarray":
        """``relevance[i]`` is the cosine of record i to the query; return one score per record."""

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...


class MemoryChain:
    """The agent's memory tiers seen as one :class:`Memory` (see the module docstring)."""

    def __init__(self, tiers: Sequence[tuple[str, Memory]]):
        self.tiers = list(tiers)

    def __bool__(self) -> bool:
        return bool(self.tiers)

    @property
    def slots(self) -> list[str]:
        return [slot for slot, _ in self.tiers]

    async def remember(self, ctx: "StepContext", records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        flowing = list(records)
        for _, tier in self.tiers:
            if not flowing:
                break
            flowing = list(await tier.remember(ctx, flowing))
        return flowing

    async def recall(self, ctx: "StepContext", query: str, k: int) -> list[MemoryRecord]:
        found: list[MemoryRecord] = []
        for _, tier in reversed(self.tiers):  # the lasting tiers first
            found += await tier.recall(ctx, query, k)
        return found

    def since(self, when: datetime | None) -> list[MemoryRecord]:
        merged = [record for _, tier in self.tiers for record in tier.since(when)]
        return sorted(merged, key=lambda r: (r.created or datetime.min, r.id))


def agent_memory(agent: "Agent") -> MemoryChain:
    """The agent's filled memory slots as one chain (empty, and falsy, when none is filled)."""
    return MemoryChain([(slot, agent.components[slot]) for slot in MEMORY_TIERS if agent.components.get(slot) is not None])


def retrieval_of(agent: "Agent") -> MemoryRetrieval | None:
    """The agent's ``memory.retrieval`` scorer, if the slot is filled."""
    return agent.components.get("memory.retrieval")
