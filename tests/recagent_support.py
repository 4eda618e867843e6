"""Shared pieces of the RecAgent tests: a step context with a hand-made embedder (so cosine
similarities are chosen, not hashed) and the scripted test model."""

from __future__ import annotations

import asyncio
from datetime import datetime

import numpy as np

from townsquare.api import Agent, EmbeddingCache, Persona, Services, StepContext
from townsquare.testing.llm_chain import build_chain
from townsquare.testing.scripted import ScriptedConfig, ScriptedLLM

T0 = datetime(2024, 1, 1, 8, 0)


class TopicEmbedder:
    """Texts that mention a topic word point along that topic's axis (several topics: the
    normalised sum); others along a last axis of their own."""

    name = "topics"

    def __init__(self, topics: list[str]):
        self.topics = topics
        self.dim = len(topics) + 1

    async def embed(self, texts):
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            hits = [j for j, t in enumerate(self.topics) if t in text.lower()]
            for j in hits or [self.dim - 1]:
                rows[i, j] = 1.0
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def make_ctx(topics=("heat", "jazz", "cooking"), rules=None, now=T0, seed=0, name="Ada", components=None, platform=None):
    chain = build_chain(ScriptedLLM(ScriptedConfig(rules=rules or {})))
    agent = Agent("users-0001", 0, "users", Persona(name), 1.0, np.random.default_rng(seed))
    agent.components.update(components or {})
    services = Services(platform=platform, embedder=EmbeddingCache(TopicEmbedder(list(topics))), llm=chain.client)
    ctx = StepContext(agent=agent, round=0, now=now, minutes_per_round=60, services=services, llm=chain.client)
    ctx.calls = chain.records  # type: ignore[attr-defined]
    return ctx


def run(coro):
    return asyncio.run(coro)
