"""Persona knowledge ``knowledge_boundary``: outside knowledge only where the persona should
have it (Zhou et al. §3.1.1 "Addition of Personalized Knowledge", §3.1.2 posting, §4.1).

"We use the post topic as a query and use ColBERT to retrieve the relevant knowledge from
HotpotQA. The TF-IDF algorithm is then used to calculate the text similarity between the
retrieved knowledge and the "knowledge" item in persona information. When the text
similarity between the two is greater than the knowledge adoption threshold T_k, the
knowledge is used, otherwise, it is not used." T_k = 0.25 (§4.1).

:meth:`KnowledgeBoundary.knowledge_for` asks the run's knowledge source (the ``[knowledge]``
table, e.g. ``hotpotqa``) for the top ``k`` items on the topic and keeps an item only when
``tfidf_cosine(item.text, persona "knowledge") > threshold``: strictly greater, as the paper
says. Adopted items carry the similarity in ``meta["knowledge_similarity"]``. The paper does
not give k; we use 3. Retrieval is the knowledge source's (dense retrieval with the run's
embedder for ``hotpotqa``, where the paper used ColBERT). A persona without a "knowledge"
attribute is compared with its sentences.

The component counts what it retrieved, adopted and rejected (``get_state``; the report
uses it). It needs the run's knowledge source (``needs_knowledge``): without a ``[knowledge]``
table the kernel fills the slot with a component that needs none, and a scenario that names
this one stops with one line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import PersonaComponentSpec, UsageError, hookimpl

from ..persona import persona_schema as S
from ..tfidf import tfidf_cosine

log = structlog.get_logger("townsquare.plugins.social_agent.knowledge.knowledge_boundary")

SLOT = "persona.knowledge"


class KnowledgeBoundaryConfig(BaseModel):
    """``[plugins.knowledge_boundary]`` settings."""

    model_config = ConfigDict(extra="forbid")

    k: int = Field(3, gt=0, description="items retrieved per topic")
    threshold: float = Field(0.25, ge=0.0, le=1.0, description="T_k: adopt when TF-IDF cosine > threshold (Zhou §4.1)")


class RetrievedKnowledge:
    """Retrieves the top ``k`` items for a topic and keeps those :meth:`adopt` accepts.
    Subclasses decide; this class does the retrieval and the bookkeeping."""

    name = "retrieved_knowledge"

    def __init__(self, k: int):
        self.k = k
        self.queries = 0
        self.retrieved = 0
        self.adopted = 0
        self.rejected = 0

    def adopt(self, item: Any, reference: str) -> Any | None:
        return item

    async def knowledge_for(self, ctx: Any, topic: str) -> list[Any]:
        items = await ctx.services.knowledge.search(topic, self.k)
        reference = S.knowledge_text(ctx.agent.persona)
        kept = [a for a in (self.adopt(item, reference) for item in items) if a is not None]
        self.queries += 1
        self.retrieved += len(items)
        self.adopted += len(kept)
        self.rejected += len(items) - len(kept)
        log.debug("knowledge.for_topic", component=self.name, agent=ctx.agent.id, topic=topic[:80],
                  retrieved=len(items), adopted=len(kept))
        return kept

    def get_state(self) -> dict[str, Any]:
        return {"queries": self.queries, "retrieved": self.retrieved, "adopted": self.adopted, "rejected": self.rejected}

    def set_state(self, state: dict[str, Any]) -> None:
        for key in ("queries", "retrieved", "adopted", "rejected"):
            setattr(self, key, int(state.get(key, 0)))


class KnowledgeBoundary(RetrievedKnowledge):
    """Adopts an item when its TF-IDF cosine with the persona's knowledge exceeds T_k."""

    name = "knowledge_boundary"

    def __init__(self, config: KnowledgeBoundaryConfig | None = None):
        self.config = config or KnowledgeBoundaryConfig()
        super().__init__(self.config.k)

    def adopt(self, item: Any, reference: str) -> Any | None:
        similarity = tfidf_cosine(item.text, reference)
        if similarity > self.config.threshold:  # "greater than" T_k (§3.1.1)
            return replace(item, meta={**item.meta, "knowledge_similarity": round(similarity, 4)})
        return None


def require_source(ctx: Any, component: str) -> None:
    """One line when a knowledge component is built for a run without a knowledge source (the
    scenario resolver prevents it; this guards direct use)."""
    services = getattr(ctx, "services", None)
    if services is None or services.knowledge is None:
        raise UsageError(f"{SLOT} = {component!r} needs a knowledge source: add a [knowledge] table "
                         '(e.g. name = "hotpotqa", path = "...") or choose no_knowledge')


def build_knowledge_boundary(config: KnowledgeBoundaryConfig | None, ctx: Any) -> KnowledgeBoundary:
    require_source(ctx, "knowledge_boundary")
    return KnowledgeBoundary(config)


@hookimpl
def townsquare_register_persona_components():
    return [
        PersonaComponentSpec(
            "knowledge_boundary", build_knowledge_boundary, config_model=KnowledgeBoundaryConfig, persona_kind="knowledge",
            priority=100, needs_knowledge=True,
            description="outside knowledge adopted when TF-IDF cosine with the persona's knowledge > T_k (Zhou §3.1.1)",
        )
    ]
