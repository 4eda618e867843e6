"""Helpers for the generative-agents tests: an agent context without an engine."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from types import SimpleNamespace

import numpy as np

from townsquare.api import EmbeddingCache, ParseFailure, Persona
from townsquare.llm_answers import extract_json
from townsquare.plugins.embedders.hash import HashEmbedder

T0 = datetime(2024, 1, 1, 8, 0)


class RuleLLM:
    """Answers from (regex, reply) rules on the prompt; counts calls per purpose."""

    def __init__(self, rules=(), label_default=None, text_default="nothing to add"):
        self.rules = [(re.compile(p, re.I | re.S), reply) for p, reply in rules]
        self.label_default = label_default
        self.text_default = text_default
        self.calls: list[tuple[str, str]] = []

    def _answer(self, prompt, fallback):
        for pattern, reply in self.rules:
            if pattern.search(prompt):
                return reply(prompt) if callable(reply) else reply
        return fallback

    async def choose(self, prompt, labels, *, purpose, default, **_):
        self.calls.append((purpose, prompt))
        answer = self._answer(prompt, self.label_default or default)
        return answer if answer in labels else default

    async def text(self, prompt, *, purpose="text", **_):
        self.calls.append((purpose, prompt))
        return self._answer(prompt, self.text_default)

    async def json(self, prompt, schema, *, purpose, default, validate=None, **_):
        """As ``LLMClient.json`` without the repair request: the first JSON in the rule's answer,
        checked by ``validate``; a parse failure is recorded and ``default`` returned."""
        self.calls.append((purpose, prompt))
        answer = self._answer(prompt, self.text_default)
        try:
            value = extract_json(answer)
            return validate(value) if validate else value
        except (ParseFailure, ValueError, TypeError, KeyError):
            self.report_parse_failure(purpose, answer)
            return default

    def report_parse_failure(self, purpose, answer):
        self.calls.append((f"{purpose}.parse_failure", answer))

    def purposes(self):
        return [p for p, _ in self.calls]


class FixedEmbedder:
    """Texts -> given unit vectors (hand-computable cosines); unknown texts -> hashed."""

    name, dim = "fixed", 3

    def __init__(self, table):
        self.table = {t: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for t, v in table.items()}

    async def embed(self, texts):
        return np.stack([self.table.get(t, np.array([0, 0, 1], dtype=np.float32)) for t in texts])


def make_ctx(components=None, llm=None, now=T0, embedder=None, name="Ada", sentences=("I hike.",), fields=None):
    agent = SimpleNamespace(id="a0", persona=Persona(name, list(sentences), dict(fields or {})), components=components or {})
    reflected: list[tuple] = []  # what StepContext.record_reflection would write to the reflections table
    return SimpleNamespace(agent=agent, now=now, llm=llm, round=0, embedder=EmbeddingCache(embedder or HashEmbedder()),
                           reflected=reflected, record_reflection=lambda source, kind, text="", ids=(): reflected.append((source, kind, text, list(ids))))


def at(ctx, hours):
    """The same agent context ``hours`` after T0."""
    ctx.now = T0 + timedelta(hours=hours)
    return ctx
