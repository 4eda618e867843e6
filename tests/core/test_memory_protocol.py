"""The kernel's memory contract: records round-trip, and a chain of tiers passes records on,
recalls from every tier and merges ``since`` (townsquare.memory)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta
from types import SimpleNamespace

from townsquare.api import MEMORY_TIERS, Memory, MemoryRecord, agent_memory

T0 = datetime(2024, 1, 1, 8, 0)


class ListTier:
    """Keeps what it gets; passes on the records whose text starts with ``pass_prefix``."""

    def __init__(self, name: str, pass_prefix: str | None = None):
        self.name, self.pass_prefix, self.records = name, pass_prefix, []

    async def remember(self, ctx, records):
        kept = []
        for r in records:
            r = replace(r, id=f"{self.name}{len(self.records)}", created=r.created or ctx.now)
            self.records.append(r)
            kept.append(r)
        return [r for r in kept if self.pass_prefix and r.text.startswith(self.pass_prefix)]

    async def recall(self, ctx, query, k):
        return [r for r in self.records if query in r.text][:k]

    def since(self, when):
        return [r for r in self.records if when is None or r.created > when]

    def get_state(self):
        return {"records": [r.to_dict() for r in self.records]}

    def set_state(self, state):
        self.records = [MemoryRecord.from_dict(d) for d in state["records"]]


def _agent(**slots):
    return SimpleNamespace(components=slots)


def test_record_round_trips_without_embedding():
    import numpy as np

    record = MemoryRecord("saw a post about jazz", kind="observation", created=T0, last_access=T0 + timedelta(hours=1),
                          importance=4.0, embedding=np.ones(3, dtype=np.float32), evidence=("m1", "m2"), meta={"post": "p9"}, id="m3")
    data = record.to_dict()
    assert "embedding" not in data
    back = MemoryRecord.from_dict(data)
    assert back.to_dict() == data and back.embedding is None and back.evidence == ("m1", "m2")


def test_tiers_are_protocol_instances_and_chain_order_is_fixed():
    tier = ListTier("s")
    assert isinstance(tier, Memory)
    chain = agent_memory(_agent(**{"memory.stream": ListTier("p"), "memory.sensory": tier, "policy": object()}))
    assert chain.slots == ["memory.sensory", "memory.stream"]
    assert MEMORY_TIERS.index("memory.sensory") < MEMORY_TIERS.index("memory.short_term") < MEMORY_TIERS.index("memory.long_term")
    assert not agent_memory(_agent(policy=object()))


def test_records_flow_to_the_next_filled_tier_and_recall_reads_every_tier():
    sensory, long_term = ListTier("s", pass_prefix="item"), ListTier("l")
    chain = agent_memory(_agent(**{"memory.sensory": sensory, "memory.long_term": long_term}))  # w/o short-term
    ctx = SimpleNamespace(now=T0)
    out = asyncio.run(chain.remember(ctx, [MemoryRecord("item: Heat (1995)"), MemoryRecord("weather is fine")]))
    assert out == []  # the last tier passes nothing on
    assert [r.text for r in sensory.records] == ["item: Heat (1995)", "weather is fine"]
    assert [r.text for r in long_term.records] == ["item: Heat (1995)"]
    recalled = asyncio.run(chain.recall(ctx, "item", 5))
    assert [r.id for r in recalled] == ["l0", "s0"]  # the lasting tier first


def test_since_merges_tiers_oldest_first():
    a, b = ListTier("a"), ListTier("b")
    a.records = [MemoryRecord("x", created=T0 + timedelta(hours=2), id="a0")]
    b.records = [MemoryRecord("y", created=T0 + timedelta(hours=1), id="b0"), MemoryRecord("z", created=T0, id="b1")]
    chain = agent_memory(_agent(**{"memory.short_term": a, "memory.long_term": b}))
    assert [r.id for r in chain.since(None)] == ["b1", "b0", "a0"]
    assert [r.id for r in chain.since(T0)] == ["b0", "a0"]
