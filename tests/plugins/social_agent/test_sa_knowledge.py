"""Knowledge boundary (Zhou §3.1.1, T_k = 0.25 in §4.1) and its ablations: unbounded
knowledge (non-personalized: the paper's w/o KB, appendix G) and no knowledge at all."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from types import SimpleNamespace

import numpy as np
import pytest

from townsquare.components import Agent, BuildContext, Services, StepContext
from townsquare.errors import UsageError
from townsquare.knowledge import KnowledgeItem
from townsquare.persona import Persona
from townsquare.plugins.social_agent.persona import persona_schema as S
from townsquare.plugins.social_agent.knowledge.knowledge_boundary import (
    KnowledgeBoundary, KnowledgeBoundaryConfig, build_knowledge_boundary)
from townsquare.plugins.social_agent.knowledge.no_knowledge import NoKnowledge, build_no_knowledge
from townsquare.plugins.social_agent.tfidf import tfidf_cosine
from townsquare.plugins.social_agent.knowledge.unbounded_knowledge import UnboundedKnowledgeConfig, build_unbounded_knowledge

THEO_KNOWS = "Theo knows dog obedience training well. He understands old motorbike engines and jazz records."
THEO = Persona("Theo", ["I train dogs."], {S.KNOWLEDGE: THEO_KNOWS})
ABOVE = KnowledgeItem("k1", "Q: Which dog obedience training book covers old dogs? A: Old Dog Obedience")
BELOW = KnowledgeItem("k2", "Q: Which engines power old motorbike racers? A: two-stroke engines")
UNRELATED = KnowledgeItem("k3", "Q: What is the capital of Peru? A: Lima")
KNOWLEDGE_MODULES = [
    "townsquare.plugins.social_agent.knowledge.knowledge_boundary",
    "townsquare.plugins.social_agent.knowledge.unbounded_knowledge",
    "townsquare.plugins.social_agent.knowledge.no_knowledge",
]


class ListKnowledge:
    """A knowledge source returning its items in order (the 'best first' of a real one)."""

    def __init__(self, items):
        self.items = items
        self.asked: list[tuple[str, int]] = []

    async def search(self, query, k):
        self.asked.append((query, k))
        return self.items[:k]


def make_ctx(source, persona=THEO):
    services = Services(platform=None, embedder=None, knowledge=source)
    agent = Agent("a1", 0, "pop", persona, 1.0, np.random.default_rng(0))
    return StepContext(agent=agent, round=0, now=datetime(2024, 1, 1, 8), minutes_per_round=60, services=services)


def test_tfidf_numbers_of_the_fixture():
    assert tfidf_cosine(ABOVE.text, THEO_KNOWS) == pytest.approx(0.3142, abs=1e-4)
    assert tfidf_cosine(BELOW.text, THEO_KNOWS) == pytest.approx(0.2019, abs=1e-4)
    assert tfidf_cosine(UNRELATED.text, THEO_KNOWS) == 0.0


def test_boundary_adopts_above_t_k_and_rejects_below():
    source = ListKnowledge([ABOVE, BELOW, UNRELATED])
    component = KnowledgeBoundary()  # paper defaults: k = 3, T_k = 0.25
    adopted = asyncio.run(component.knowledge_for(make_ctx(source), "old dogs"))
    assert source.asked == [("old dogs", 3)]
    assert [item.id for item in adopted] == ["k1"]
    assert adopted[0].meta["knowledge_similarity"] == pytest.approx(0.3142, abs=1e-4)
    assert ABOVE.meta == {}  # the source's item is not changed
    assert component.get_state() == {"queries": 1, "retrieved": 3, "adopted": 1, "rejected": 2}


def test_boundary_is_strictly_greater_than_t_k():
    """No two texts have a TF-IDF cosine of exactly 0.25 under the pair-fitted IDF (the
    weight of a word found in one text only, 1 + ln 1.5, is irrational, and a search over
    texts sharing every word found no pair), so the boundary case sets T_k to the
    pair's own computed cosine: equal is rejected, the next float down adopts."""
    similarity = tfidf_cosine(ABOVE.text, THEO_KNOWS)
    ctx = make_ctx(ListKnowledge([ABOVE]))
    at = KnowledgeBoundary(KnowledgeBoundaryConfig(threshold=similarity))
    assert asyncio.run(at.knowledge_for(ctx, "t")) == []
    below = KnowledgeBoundary(KnowledgeBoundaryConfig(threshold=float(np.nextafter(similarity, 0.0))))
    assert [i.id for i in asyncio.run(below.knowledge_for(ctx, "t"))] == ["k1"]
    # T_k = 0 still rejects an item sharing no word (cosine exactly 0.0)
    zero = KnowledgeBoundary(KnowledgeBoundaryConfig(threshold=0.0))
    assert [i.id for i in asyncio.run(zero.knowledge_for(make_ctx(ListKnowledge([UNRELATED, BELOW])), "t"))] == ["k2"]


def test_boundary_k_and_persona_without_knowledge_attribute():
    source = ListKnowledge([BELOW, ABOVE])
    component = KnowledgeBoundary(KnowledgeBoundaryConfig(k=1, threshold=0.1))
    assert [i.id for i in asyncio.run(component.knowledge_for(make_ctx(source), "motorbikes"))] == ["k2"]
    assert source.asked == [("motorbikes", 1)]
    # no "knowledge" attribute: the sentences stand in for it
    plain = Persona("Bo", ["I race old motorbike engines."])
    adopted = asyncio.run(KnowledgeBoundary().knowledge_for(make_ctx(ListKnowledge([BELOW]), plain), "t"))
    assert adopted and adopted[0].meta["knowledge_similarity"] == pytest.approx(tfidf_cosine(BELOW.text, plain.sentences[0]), abs=1e-4)


def test_state_round_trip():
    component = KnowledgeBoundary()
    for _ in range(2):
        asyncio.run(component.knowledge_for(make_ctx(ListKnowledge([ABOVE, BELOW])), "t"))
    state = json.loads(json.dumps(component.get_state()))
    assert state == {"queries": 2, "retrieved": 4, "adopted": 2, "rejected": 2}
    fresh = KnowledgeBoundary()
    fresh.set_state(state)
    assert fresh.get_state() == state


def test_unbounded_uses_everything_and_no_knowledge_nothing():
    source = ListKnowledge([ABOVE, BELOW, UNRELATED, ABOVE])
    build = BuildContext(services=Services(platform=None, embedder=None, knowledge=source), seed=0)
    unbounded = build_unbounded_knowledge(UnboundedKnowledgeConfig(), build)
    assert [i.id for i in asyncio.run(unbounded.knowledge_for(make_ctx(source), "t"))] == ["k1", "k2", "k3"]
    assert unbounded.get_state() == {"queries": 1, "retrieved": 3, "adopted": 3, "rejected": 0}
    none = build_no_knowledge(None, BuildContext(services=Services(platform=None, embedder=None), seed=0))
    assert asyncio.run(none.knowledge_for(make_ctx(source), "t")) == []
    assert len(source.asked) == 1 and none.get_state() == {}
    NoKnowledge().set_state({})


def _build_ctx(slots=None, knowledge=None):
    scenario = None if slots is None else SimpleNamespace(populations=[SimpleNamespace(name="users", slots=slots)])
    return BuildContext(services=Services(platform=None, embedder=None, knowledge=knowledge), seed=0,
                        scenario=scenario, population="users")


def test_building_without_a_source_is_one_line():
    """The resolver never builds these without a knowledge source; built by hand, one line."""
    with pytest.raises(UsageError, match=r"^persona.knowledge = 'knowledge_boundary' needs a knowledge "
                                         r"source: add a \[knowledge\] table"):
        build_knowledge_boundary(None, _build_ctx({"persona.knowledge": "knowledge_boundary"}))
    with pytest.raises(UsageError, match="'unbounded_knowledge' needs a knowledge source"):
        build_unbounded_knowledge(None, _build_ctx({"persona.knowledge": "unbounded_knowledge"}))


def test_in_a_run(write_scenario, run_scenario, make_plugins):
    plugins = make_plugins(enable=KNOWLEDGE_MODULES, strict=False)
    assert plugins.registry.auto("persona.knowledge").name == "knowledge_boundary"
    assert [plugins.registry.get("persona.knowledge", n).priority for n in ("knowledge_boundary", "unbounded_knowledge", "no_knowledge")] == [100, 50, 0]
    text = """
name = "kb"
rounds = 1
[[populations]]
name = "users"
count = 2
slots = { policy = "embedding_baseline" SLOT }
personas = { name = "inline", items = [{ name = "A", sentences = ["I like jazz."] }] }
"""
    run_scenario(write_scenario(text.replace("SLOT", "")), plugins=plugins)  # the baseline uses no knowledge slot
    with pytest.raises(UsageError, match="needs a knowledge source"):
        run_scenario(write_scenario(text.replace("SLOT", ', "persona.knowledge" = "knowledge_boundary"')), plugins=plugins)
    run_scenario(write_scenario(text.replace("SLOT", ', "persona.knowledge" = "no_knowledge"')), plugins=plugins)
