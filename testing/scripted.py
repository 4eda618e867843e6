"""A scripted language model and a minimal LLM feed policy, FOR TESTS ONLY.

Neither is a default or an entry point: a run gets them only when a test (or a benchmark of
framework overhead) loads this module explicitly, e.g. ``-p townsquare.testing.scripted``,
and the run then logs a loud warning. The scripted model answers deterministically from a
hash of the request, so tests are reproducible without any model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any, ClassVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from ..actions import Action
from ..llm import LLMRequest, LLMResponse
from ..markers import hookimpl
from ..specs import LLMProviderSpec, PolicySpec

log = structlog.get_logger("townsquare.testing")


class ScriptedConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    machinery_settings: ClassVar[frozenset[str]] = frozenset({"latency_ms"})
    #: regex -> reply; the first pattern found in the last user message wins.
    rules: dict[str, str] = Field(default_factory=dict)
    latency_ms: float = Field(0.0, ge=0)
    text_reply: str = "a scripted reply about {topic}"
    #: probability weight of the first label (``like`` in a like/skip decision), 0..1.
    first_label_share: float = Field(0.5, ge=0, le=1)
    policy_post_probability: float = Field(0.3, ge=0, le=1)
    policy_feed_size: int = Field(10, gt=0)


class ScriptedLLM:
    """Deterministic stand-in for a language model. Not a language model: tests only."""

    name = "scripted"
    model = "scripted-test-model"

    def __init__(self, config: ScriptedConfig | None = None, ctx: Any = None):
        self.config = config or ScriptedConfig()
        self.calls = 0
        self._rules = [(re.compile(p, re.IGNORECASE), reply) for p, reply in self.config.rules.items()]
        log.warning("llm.scripted", message="using the SCRIPTED TEST MODEL: answers are canned, not generated")

    def describe(self) -> dict[str, Any]:
        """Labels by construction (a rule's reply aside): mode ``scripted``; JSON and openings
        are canned text the client parses and repairs."""
        return {"name": self.name, "model": self.model, "structured": {"labels": ["scripted"]}}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        if self.config.latency_ms:
            await asyncio.sleep(self.config.latency_ms / 1000)
        prompt = request.messages[-1].content
        digest = int.from_bytes(hashlib.blake2b(prompt.encode(), digest_size=8).digest(), "big")
        text = self._reply(request, prompt, digest)
        prompt_tokens = sum(len(m.content.split()) for m in request.messages)
        return LLMResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=len(text.split()),
                           model=self.model, provider=self.name, meta=_mode_meta(request, "scripted" if request.labels else None))

    def _reply(self, request: LLMRequest, prompt: str, digest: int) -> str:
        for pattern, reply in self._rules:
            if pattern.search(prompt):
                return reply
        if request.labels:
            labels = request.labels
            if (digest % 10_000) / 10_000 < self.config.first_label_share:
                return labels[0]
            return labels[1 + digest % max(1, len(labels) - 1)] if len(labels) > 1 else labels[0]
        if request.json_schema is not None:
            return json.dumps({key: "scripted" for key in request.json_schema.get("properties", {})})
        words = re.findall(r"[a-z]{5,}", prompt.lower())
        topic = words[digest % len(words)] if words else "things"
        return self.config.text_reply.format(topic=topic)


def _mode_meta(request: LLMRequest, mode: str | None) -> dict[str, Any]:
    """``{"mode": ...}`` for a structured request: the test model's own mode, or ``prompt``."""
    if not (request.labels or request.json_schema is not None or request.answer_prefixes):
        return {}
    return {"mode": mode or "prompt"}


class ScriptedFeedPolicy:
    """Test-only policy: read a feed, ask the LLM like/skip for each post, sometimes post.

    It exercises the whole LLM path (one call per post, as an LLM agent would) without any
    paper logic; the lifecycle, resume and engine-throughput tests use it.
    """

    def __init__(self, config: ScriptedConfig | None, ctx: Any):
        self.config = config or ScriptedConfig()
        self.posted = 0

    async def step(self, ctx) -> list[Action]:
        llm = ctx.require_llm("scripted_feed")
        agent = ctx.agent
        feed = await ctx.home_timeline(self.config.policy_feed_size)
        actions = [Action(agent.id, "browse", post_ids=tuple(p.id for p in feed))] if feed else []
        for post in feed:
            decision = await llm.choose(
                f"You are {agent.persona.name}. Post: {post.text}\nLike or skip?", ["like", "skip"],
                purpose="like", default="skip",
            )
            if decision == "like":
                actions.append(Action(agent.id, "like", target_post=post.id))
        if ctx.rng.random() < self.config.policy_post_probability:
            text = await llm.text(f"Write a short post as {agent.persona.name}: {agent.persona.text}", purpose="post")
            actions.append(Action(agent.id, "post", text=text))
            self.posted += 1
        return actions

    def get_state(self) -> dict[str, Any]:
        return {"posted": self.posted}

    def set_state(self, state: dict[str, Any]) -> None:
        self.posted = state["posted"]


@hookimpl
def townsquare_register_llm_providers():
    return [LLMProviderSpec("scripted", ScriptedLLM, config_model=ScriptedConfig, description="TEST ONLY: canned answers")]


@hookimpl
def townsquare_register_policies():
    return [PolicySpec("scripted_feed", ScriptedFeedPolicy, config_model=ScriptedConfig, description="TEST ONLY: like/skip per post via the LLM")]
