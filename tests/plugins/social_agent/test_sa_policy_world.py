"""A small world for the social-agent tests: agents on the in-memory platform, an LLM client over
the scripted test model (or any fake provider) that records every request. No tests here."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any, Callable

import numpy as np

from townsquare.components import Agent, Services, StepContext
from townsquare.embedding import EmbeddingCache
from townsquare.llm import LLMClient, LLMRequest, LLMResponse
from townsquare.persona import Persona
from townsquare.platforms.in_memory import InMemoryPlatform
from townsquare.plugins.embedders.hash import HashEmbedder
from townsquare.recommenders.chronological import Chronological
from townsquare.testing.scripted import ScriptedConfig, ScriptedLLM

START = datetime(2024, 1, 1, 8, 0)  # a Monday: simulated day 1

# Phrases that pick out each prompt of prompts/actions.toml (scripted rules match the last user message).
LIKE = r'exactly one of "like"'
FORWARD = r'exactly one of "forward"'
COMMENT = r'reply with "Comment content:"'
TOPICS = r"Suggest \d+ topics"
POST = r"Write one post"
REGENERATE = r"too close to something you posted"
SHORTEN = r"the limit is \d+"
PLAN = r"Make a rough plan"
FOLLOW = r"which user you want to follow"
SUMMARY = r"^Summarise"
COMBINED = r"Reply with one JSON object"

HIKER = Persona("Hiker", ["I love hiking in the mountains.", "I cook on a camping stove."],
                {"hobbies": "Hiking, Camping, Cooking"})
PIANIST = Persona("Pianist", ["I play jazz piano at night."])
FAN = Persona("Fan", ["I follow football every weekend."])


class Recorder:
    """A provider wrapper that keeps every request it answers."""

    def __init__(self, provider: Any):
        self.provider = provider
        self.name, self.model = provider.name, provider.model
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return await self.provider.complete(request)

    def purposes(self) -> list[str]:
        return [r.purpose for r in self.requests]

    def describe(self) -> dict[str, Any]:
        describe = getattr(self.provider, "describe", None)
        return describe() if describe is not None else {}


class FuncLLM:
    """A fake provider answering ``reply(request) -> str``."""

    name = "func"
    model = "func-test"

    def __init__(self, reply: Callable[[LLMRequest], str]):
        self.reply = reply

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(text=self.reply(request), model=self.model, provider=self.name)


def scripted(rules: dict[str, str]) -> ScriptedLLM:
    return ScriptedLLM(ScriptedConfig(rules=rules))


class World:
    def __init__(self, personas: list[Persona], provider: Any, recommender: Any = None, minutes: int = 60,
                 activity: float = 1.0):
        self.recorder = Recorder(provider)
        self.llm = LLMClient(self.recorder.complete, model=self.recorder.model)
        self.platform = InMemoryPlatform(recommender=recommender or Chronological())
        self.services = Services(platform=self.platform, embedder=EmbeddingCache(HashEmbedder()), llm=self.llm)
        self.minutes = minutes
        self.agents = []
        for i, persona in enumerate(personas):
            agent = Agent(f"a{i}", i, "pop", persona, activity, np.random.default_rng([7, i]))
            self.agents.append(agent)
            asyncio.run(self.platform.register_account(agent.id, persona.name, ""))

    def ctx(self, agent: Agent, round: int = 0) -> StepContext:
        return StepContext(agent=agent, round=round, now=START + timedelta(minutes=round * self.minutes),
                           minutes_per_round=self.minutes, services=self.services, llm=self.llm.for_agent(agent.id))

    async def post(self, agent: Agent, text: str, round: int = 0) -> str:
        from townsquare.actions import Action

        result = await self.platform.apply(Action(agent.id, "post", text=text), round, "t")
        return result.created_id

    async def apply(self, agent: Agent, actions: list, round: int = 0) -> list:
        applied = [(a, await self.platform.apply(a, round, "t")) for a in actions]
        for component in agent.components.values():
            if hasattr(component, "on_applied"):
                await component.on_applied(self.ctx(agent, round), applied)
        return applied
