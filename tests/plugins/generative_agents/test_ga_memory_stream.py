"""Park et al.'s memory stream (§4.1): importance 1-10 from the LLM cached per text, numpy
storage grown by half its size, recall through the retrieval slot, seeds split at semicolons,
state round-trip."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ga_support import T0, FixedEmbedder, RuleLLM, at, make_ctx
from townsquare.api import Memory, MemoryRecord
from townsquare.plugins.generative_agents.memory.memory_stream import (
    IMPORTANCE_LABELS, MemoryStream, MemoryStreamConfig, seed_statements,
)
from townsquare.plugins.generative_agents.memory.park_retrieval import ParkRetrieval


def run(coro):
    return asyncio.run(coro)


def test_importance_labels_are_the_papers_scale():
    assert IMPORTANCE_LABELS == ("1", "2", "3", "4", "5", "6", "7", "8", "9", "10")


def test_seeds_are_the_persona_split_at_semicolons():
    persona = make_ctx(sentences=["Ada runs a bakery; she lives with her sister Bo", "She likes jazz"],
                       fields={"town": "Oakdale; near the river"}).agent.persona
    assert seed_statements(persona) == ["Ada runs a bakery", "she lives with her sister Bo", "She likes jazz",
                                        "town: Oakdale", "near the river"]


def test_remember_rates_once_per_text_and_stores_everything():
    llm = RuleLLM([("wedding", "9"), ("dishes", "2")])
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False))
    ctx = make_ctx(llm=llm)
    assert isinstance(stream, Memory)
    out = run(stream.remember(ctx, [MemoryRecord("Bo announced a wedding"), MemoryRecord("I washed the dishes"),
                                    MemoryRecord("I washed the dishes")]))
    assert out == []  # the last tier passes nothing on
    assert [r.importance for r in stream.records] == [9.0, 2.0, 2.0]
    assert [r.id for r in stream.records] == ["m0", "m1", "m2"]
    assert all(r.created == T0 and r.last_access == T0 and r.embedding is None for r in stream.records)
    assert llm.purposes().count("importance") == 2  # one call per distinct text
    run(stream.remember(ctx, [MemoryRecord("Bo announced a wedding")]))
    assert llm.purposes().count("importance") == 2  # cached
    run(stream.remember(ctx, [MemoryRecord("given rating", importance=7.0)]))
    assert stream.records[-1].importance == 7.0 and llm.purposes().count("importance") == 2


def test_an_idle_object_is_rated_1_without_a_call():
    llm = RuleLLM([("idle", "7")], label_default="5")
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False))
    run(stream.remember(make_ctx(llm=llm), [MemoryRecord("the piano is idle (Hobbs Cafe, cafe)"),
                                           MemoryRecord("the piano is being played (Hobbs Cafe, cafe)")]))
    assert [r.importance for r in stream.records] == [1.0, 5.0] and llm.purposes() == ["importance"]
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False, idle_importance=None))
    run(stream.remember(make_ctx(llm=llm), [MemoryRecord("the piano is idle (Hobbs Cafe, cafe)")]))
    assert stream.records[0].importance == 7.0  # rated like any other


def test_a_smallville_seed_gives_each_statement_once():
    from helpers import ROOT
    from townsquare.platforms.town.seed_files import persona_from_scratch, read_base

    isabella = persona_from_scratch(read_base(ROOT / "tests" / "data" / "smallville" / "base_mini").scratches[0])
    seeds = seed_statements(isabella)
    # `currently` is a sentence and a field: one memory; numbers (age, recency_decay) are no memories
    assert sum("Valentine's Day party" in s for s in seeds) == 1
    assert not [s for s in seeds if s.startswith(("age:", "recency_decay:", "currently:", "innate:", "first_name:"))]
    assert seeds[-1] == "living_area: the Ville:Isabella Rodriguez's apartment:main room" and len(seeds) == 6


def test_no_llm_gives_the_default_importance():
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False, default_importance=4))
    run(stream.remember(make_ctx(llm=None), [MemoryRecord("saw a cat")]))
    assert stream.records[0].importance == 4.0


def test_arrays_grow_by_half_their_size():
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False, initial_capacity=4))
    ctx = make_ctx()
    capacities = []
    for i in range(9):
        run(stream.remember(ctx, [MemoryRecord(f"event number {i}", importance=1)]))
        capacities.append(stream._vectors.shape[0])
    assert capacities == [4, 4, 4, 4, 6, 6, 9, 9, 9]
    assert stream._vectors.dtype == np.float32 and len(stream) == 9


def test_seeds_are_stored_at_first_use():
    stream = MemoryStream()
    ctx = make_ctx(llm=RuleLLM(label_default="5"), sentences=["I bake; I sing"])
    run(stream.recall(ctx, "anything", 3))
    assert [(r.text, r.importance, r.meta) for r in stream.records] == [("I bake", 5.0, {"seed": True}), ("I sing", 5.0, {"seed": True})]


def test_recall_uses_the_retrieval_slot_and_touches_what_it_returns():
    # relevance: "jazz" matches the query exactly, "hiking" is orthogonal, "mixed" halfway
    table = {"jazz night": [1, 0, 0], "hiking trip": [0, 1, 0], "mixed": [1, 1, 0], "query": [1, 0, 0]}
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False))
    ctx = make_ctx(embedder=FixedEmbedder(table))
    run(stream.remember(ctx, [MemoryRecord("jazz night", importance=1), MemoryRecord("hiking trip", importance=10),
                              MemoryRecord("mixed", importance=5)]))
    # relevance alone (no scorer): jazz (1.0), mixed (0.707), hiking (0)
    assert [r.text for r in run(stream.recall(at(ctx, 2), "query", 3))] == ["jazz night", "mixed", "hiking trip"]
    # with Park's scorer (recency equal for all -> 0.5 each): jazz 0+1, hiking 1+0, mixed 4/9+0.707/1
    ctx.agent.components["memory.retrieval"] = ParkRetrieval()
    found = run(stream.recall(at(ctx, 5), "query", 2))
    assert [r.text for r in found] == ["mixed", "jazz night"]
    assert all(r.last_access == ctx.now for r in found)
    assert stream.records[1].last_access == T0 + __import__("datetime").timedelta(hours=2)
    assert np.allclose(stream._access[:3] - stream._access[0], [0, -3, 0])


def test_records_that_say_the_same_fill_one_place_in_recall():
    # twelve copies of a routine note, more relevant than the invitation, which is rated higher
    table = {"Nothing new today.": [1, 0.2, 0], "party at the cafe at 5 pm": [0.6, 0.8, 0], "walked the dog": [0.5, 0, 0.87],
             "query": [1, 0, 0]}
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False))
    ctx = make_ctx(embedder=FixedEmbedder(table))
    ctx.agent.components["memory.retrieval"] = ParkRetrieval()
    run(stream.remember(ctx, [MemoryRecord("walked the dog", importance=2), MemoryRecord("party at the cafe at 5 pm", importance=8)]))
    for hour in range(1, 13):
        run(stream.remember(at(ctx, hour), [MemoryRecord("Nothing new today.", importance=3)]))
    crowded = MemoryStream(MemoryStreamConfig(seed_memories=False, distinct_recall=False))
    crowded.set_state(stream.get_state())
    found = run(stream.recall(at(ctx, 13), "query", 3))
    assert [r.text for r in found] == ["Nothing new today.", "party at the cafe at 5 pm", "walked the dog"]
    assert found[0] is stream.records[-1]  # the copy that scores best (the newest) stands for all
    assert sum(r.last_access == at(ctx, 13).now for r in stream.records) == 3  # only what was returned is touched
    # every copy competing for the top k, the copies crowd the invitation out
    assert [r.text for r in run(crowded.recall(at(ctx, 13), "query", 3))] == ["Nothing new today."] * 3
    # fewer distinct texts than k: each once
    assert len(run(stream.recall(at(ctx, 13), "query", 10))) == 3


def test_since_is_strictly_after_and_oldest_first():
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False))
    ctx = make_ctx()
    for h in (0, 1, 2):
        run(stream.remember(at(ctx, h), [MemoryRecord(f"at {h}", importance=1)]))
    assert [r.text for r in stream.since(None)] == ["at 0", "at 1", "at 2"]
    assert [r.text for r in stream.since(T0 + __import__("datetime").timedelta(hours=1))] == ["at 2"]


def test_state_round_trips():
    llm = RuleLLM(label_default="6")
    stream = MemoryStream()
    ctx = make_ctx(llm=llm)
    run(stream.remember(ctx, [MemoryRecord("a reflection", kind="reflection", evidence=("m0",))]))
    state = stream.get_state()
    assert [r["text"] for r in state["records"]][-1] == "a reflection"
    again = MemoryStream()
    again.set_state(state)
    assert again.get_state()["records"] == state["records"]
    assert np.array_equal(again.get_state()["vectors"], state["vectors"])
    run(again.remember(ctx, [MemoryRecord("a reflection")]))  # rating cache restored from the records
    assert llm.purposes().count("importance") == 2 and again.records[-1].id == "m2"


def test_mismatched_state_is_refused():
    stream = MemoryStream()
    with pytest.raises(ValueError, match="memory_stream"):
        stream.set_state({"records": [MemoryRecord("x").to_dict()], "vectors": np.zeros((0, 3), dtype=np.float32)})


def test_the_stream_keeps_its_own_copies():
    handed = MemoryRecord("kept by a tier before the stream", importance=2)
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False))
    run(stream.remember(make_ctx(), [handed]))
    assert handed.id == "" and handed.created is None and stream.records[0].id == "m0"
