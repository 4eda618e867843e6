"""Persona context: dynamic retrieval of the advanced attributes (Zhou §3.1.1) and the full
persona ablation (appendix G, w/o PD)."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

import numpy as np
import pytest

from townsquare.components import Agent, Services, StepContext
from townsquare.embedding import EmbeddingCache
from townsquare.persona import Persona
from townsquare.plugins.embedders.hash import HashEmbedder
from townsquare.plugins.social_agent.persona import persona_schema as S
from townsquare.plugins.social_agent.persona.full_persona import FullPersona
from townsquare.plugins.social_agent.persona.dynamic_persona import DynamicPersona, DynamicPersonaConfig

DOG_H = "Mara trained her puppy to fetch a ball in the park."
CAR_H = "Mara rebuilt the engine of a vintage car in her garage."
JAZZ_H = "Mara plays jazz saxophone in a band on Friday nights."
DOG_P = "Mara shares photos of her puppy and dog training tips."
CAR_P = "Mara follows car restoration channels and engine repair videos."
JAZZ_P = "Mara posts jazz playlists and saxophone concert recordings."
DOG_K = "Mara knows how to train a puppy with clicker training."
CAR_K = "Mara understands car engines, gearboxes and vintage car restoration."
JAZZ_K = "Mara knows jazz history and saxophone technique."
MARA = Persona("Mara Lind", ["I train my puppy."], {
    "name": "Mara Lind", "age": 31, "gender": "Female", "nationality": "Swedish", "personality": "Curious, Patient",
    "hobbies": "Dog training, Car restoration, Jazz saxophone",
    S.HISTORY: " ".join([DOG_H, CAR_H, JAZZ_H]),
    S.PREFERENCES: " ".join([DOG_P, CAR_P, JAZZ_P]),
    S.KNOWLEDGE: " ".join([DOG_K, CAR_K, JAZZ_K]),
})
PUPPY, CAR, JAZZ = "Training a puppy at the park", "Vintage car engine restoration", "A jazz saxophone solo"


class CountingEmbedder(HashEmbedder):
    def __init__(self):
        super().__init__()
        self.texts = 0

    async def embed(self, texts):
        self.texts += len(texts)
        return await super().embed(texts)


def make_ctx(persona=MARA, embedder=None):
    services = Services(platform=None, embedder=EmbeddingCache(embedder or HashEmbedder()))
    agent = Agent("a1", 0, "pop", persona, 1.0, np.random.default_rng(0))
    return StepContext(agent=agent, round=0, now=datetime(2024, 1, 1, 8), minutes_per_round=60, services=services)


def test_hash_similarities_behind_the_retrieval():
    """The numbers the retrieval rests on: hash-embedder cosines of each item (rows: dog, car,
    jazz) with the three queries (columns)."""
    embedder = HashEmbedder()
    queries = asyncio.run(embedder.embed([PUPPY, CAR, JAZZ]))
    for items, diagonal in (([DOG_H, CAR_H, JAZZ_H], [0.270, 0.342, 0.372]),
                            ([DOG_P, CAR_P, JAZZ_P], [0.248, 0.390, 0.248]),
                            ([DOG_K, CAR_K, JAZZ_K], [0.405, 0.540, 0.270])):
        sims = asyncio.run(embedder.embed(items)) @ queries.T
        assert np.diag(sims) == pytest.approx(diagonal, abs=1e-3)
        # each query's own item beats the other two
        assert list(np.argmax(sims, axis=0)) == [0, 1, 2]


@pytest.mark.parametrize("query, expected", [
    (PUPPY, [DOG_H, DOG_P, DOG_K]),
    (CAR, [CAR_H, CAR_P, CAR_K]),
    (JAZZ, [JAZZ_H, JAZZ_P, JAZZ_K]),
])
def test_retrieved_items_follow_the_query(query, expected):
    component = DynamicPersona()
    ctx = make_ctx()
    chosen = asyncio.run(component.retrieve(ctx, query))
    assert [chosen[key] for key in S.ADVANCED_KEYS] == [[item] for item in expected]
    text = asyncio.run(component.render(ctx, query))
    assert text == S.basic_info(MARA) + "\n" + "\n".join(f"{S.LABELS[k]}: {item}" for k, item in zip(S.ADVANCED_KEYS, expected))
    others = {DOG_H, CAR_H, JAZZ_H, DOG_K, CAR_K, JAZZ_K} - set(expected)
    assert not any(item in text for item in others)


def test_vectors_are_cached_per_agent_and_rebuilt_when_the_persona_changes():
    embedder = CountingEmbedder()
    ctx = make_ctx(Persona(MARA.name, list(MARA.sentences), dict(MARA.fields)), embedder)
    component = DynamicPersona()
    asyncio.run(component.render(ctx, PUPPY))
    assert embedder.texts == 9 + 1  # nine items, one query
    asyncio.run(component.render(ctx, CAR))
    assert embedder.texts == 11  # only the new query
    ctx.agent.persona.fields[S.KNOWLEDGE] = "Mara knows the rules of chess openings. " + CAR_K
    assert asyncio.run(component.retrieve(ctx, "chess openings"))[S.KNOWLEDGE] == ["Mara knows the rules of chess openings."]


def test_items_per_attribute_and_state_round_trip():
    component = DynamicPersona(DynamicPersonaConfig(items_per_attribute=2))
    ctx = make_ctx()
    chosen = asyncio.run(component.retrieve(ctx, CAR))
    assert chosen[S.HISTORY][0] == CAR_H and len(chosen[S.HISTORY]) == 2
    asyncio.run(component.render(ctx, CAR))
    state = json.loads(json.dumps(component.get_state()))
    assert state["renders"] == 1 and state["last"][S.KNOWLEDGE][0] == CAR_K
    again = DynamicPersona(DynamicPersonaConfig(items_per_attribute=2))
    again.set_state(state)
    assert again.get_state() == state
    assert asyncio.run(again.render(ctx, CAR)) == asyncio.run(component.render(ctx, CAR))


def test_plain_persona_and_empty_query():
    plain = Persona("Bo", ["I like jazz.", "I fix bikes."])
    assert asyncio.run(DynamicPersona().render(make_ctx(plain), "jazz")) == "Name: Bo\nAbout: I like jazz. I fix bikes."
    # an empty query scores every item 0: the first sentence of each attribute
    chosen = asyncio.run(DynamicPersona().retrieve(make_ctx(), ""))
    assert [chosen[k] for k in S.ADVANCED_KEYS] == [[DOG_H], [DOG_P], [DOG_K]]


def test_full_persona_shows_everything_whatever_the_query():
    component = FullPersona()
    ctx = make_ctx()
    texts = {asyncio.run(component.render(ctx, q)) for q in (PUPPY, CAR, JAZZ)}
    assert texts == {S.full_info(MARA)}
    for item in (DOG_H, CAR_H, JAZZ_H, DOG_P, CAR_P, JAZZ_P, DOG_K, CAR_K, JAZZ_K):
        assert item in S.full_info(MARA)
    state = json.loads(json.dumps(component.get_state()))
    fresh = FullPersona()
    fresh.set_state(state)
    assert fresh.get_state() == {"renders": 3}


def test_registration(make_plugins):
    plugins = make_plugins(enable=["townsquare.plugins.social_agent.persona.dynamic_persona", "townsquare.plugins.social_agent.persona.full_persona"],
                           strict=False)
    registry = plugins.registry
    assert registry.auto("persona.context").name == "dynamic_persona"
    assert registry.get("persona.context", "full_persona").priority < 100
