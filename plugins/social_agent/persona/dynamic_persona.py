"""Persona context ``dynamic_persona``: only the persona information relevant to the action
(Zhou et al. §3.1.1, "Dynamic Persona Information").

"We set up the advanced attributes of persona as multiple internal retrieval items ... When
the agent actions, the action information is used as a query and each advanced attribute is
retrieved internally. The persona information that is most relevant to the current action in
each advanced attribute is obtained." So for every action :meth:`DynamicPersona.render`
embeds the action's text (the post being judged, the topic of a post to write) with the
run's embedder and takes, from EACH of the three advanced attributes, the item with the
highest cosine similarity; the prompt shows the basic information plus those three items
(the "Retrieved persona information" of appendix table 17).

Where the paper is silent, our choices:

* an item is one sentence of the attribute (:func:`persona_schema.advanced_items`);
* relevance is the cosine of the run's embedder (the paper names no retriever for this
  step); ``items_per_attribute`` (default 1, the paper's "most relevant") can widen it;
  ties go to the earlier sentence;
* the item vectors are computed once per agent and kept in the component (recomputed when
  the persona's attributes change, say after a branch edits a profile). Checkpoints leave
  them out: at 10,000 agents they would be hundreds of MB of JSON, and re-embedding after a
  resume is one batch per agent;
* a persona with no advanced attribute shows its basic information and sentences.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import PersonaComponentSpec, hookimpl

from . import persona_schema as S


class DynamicPersonaConfig(BaseModel):
    """``[plugins.dynamic_persona]`` settings."""

    model_config = ConfigDict(extra="forbid")

    items_per_attribute: int = Field(1, ge=1, description="items retrieved from each advanced attribute (paper: 1)")


class DynamicPersona:
    """Retrieves the most relevant item of each advanced attribute for each action."""

    def __init__(self, config: DynamicPersonaConfig | None = None):
        self.config = config or DynamicPersonaConfig()
        self._source: tuple[Any, ...] | None = None
        self._items: dict[str, list[str]] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self.renders = 0
        self.last: dict[str, list[str]] = {}

    async def _index(self, ctx: Any) -> None:
        persona = ctx.agent.persona
        source = tuple(persona.fields.get(key) for key in S.ADVANCED_KEYS)
        if self._source is not None and source == self._source:
            return
        self._items = {key: S.advanced_items(persona, key) for key in S.ADVANCED_KEYS}
        texts = [item for key in S.ADVANCED_KEYS for item in self._items[key]]
        matrix = await ctx.embedder.embed(texts) if texts else None
        self._vectors, start = {}, 0
        for key in S.ADVANCED_KEYS:
            n = len(self._items[key])
            self._vectors[key] = matrix[start:start + n] if n else np.zeros((0, 0), dtype=np.float32)
            start += n
        self._source = source

    async def retrieve(self, ctx: Any, query: str) -> dict[str, list[str]]:
        """The items of each advanced attribute most similar to ``query``, best first."""
        await self._index(ctx)
        if not any(self._items.values()):
            return {key: [] for key in S.ADVANCED_KEYS}
        q = np.asarray(await ctx.embedder.embed_one(query or ""), dtype=np.float32)
        chosen: dict[str, list[str]] = {}
        for key in S.ADVANCED_KEYS:
            items = self._items[key]
            if not items:
                chosen[key] = []
                continue
            scores = self._vectors[key] @ q
            order = np.argsort(-scores, kind="stable")[: self.config.items_per_attribute]
            chosen[key] = [items[i] for i in order]
        return chosen

    async def render(self, ctx: Any, query: str) -> str:
        chosen = await self.retrieve(ctx, query)
        self.renders += 1
        self.last = chosen
        return S.render(ctx.agent.persona, chosen)

    def get_state(self) -> dict[str, Any]:
        return {"renders": self.renders, "last": {k: list(v) for k, v in self.last.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        self.renders = int(state.get("renders", 0))
        self.last = {k: list(v) for k, v in state.get("last", {}).items()}
        self._source = None  # vectors are recomputed on the next render


def build_dynamic_persona(config: DynamicPersonaConfig | None, ctx: Any) -> DynamicPersona:
    return DynamicPersona(config)


@hookimpl
def townsquare_register_persona_components():
    return [
        PersonaComponentSpec(
            "dynamic_persona", build_dynamic_persona, config_model=DynamicPersonaConfig, persona_kind="context",
            priority=100, description="basic information + the advanced-attribute items most relevant to the action (Zhou §3.1.1)",
        )
    ]
