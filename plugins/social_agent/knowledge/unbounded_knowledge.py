"""Persona knowledge ``unbounded_knowledge``: every retrieved item is used.

Zhou et al.'s "w/o KB" ablation (appendix G, tables 15-16: KB is the knowledge *boundary*,
and the text describes the ablated agent as "using ... non-personalized knowledge"): the
agent draws on the knowledge source with no knowledge boundary, like agents that "directly
retrieve it from knowledge datasets" (§1). Same retrieval as ``knowledge_boundary`` (top
``k`` items for the topic from the run's ``[knowledge]`` source), no TF-IDF filter.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import PersonaComponentSpec, hookimpl

from .knowledge_boundary import RetrievedKnowledge, require_source


class UnboundedKnowledgeConfig(BaseModel):
    """``[plugins.unbounded_knowledge]`` settings."""

    model_config = ConfigDict(extra="forbid")

    k: int = Field(3, gt=0, description="items retrieved per topic")


class UnboundedKnowledge(RetrievedKnowledge):
    """Uses every item the knowledge source returns."""

    name = "unbounded_knowledge"


def build_unbounded_knowledge(config: UnboundedKnowledgeConfig | None, ctx: Any) -> UnboundedKnowledge:
    config = config or UnboundedKnowledgeConfig()
    require_source(ctx, "unbounded_knowledge")
    return UnboundedKnowledge(config.k)


@hookimpl
def townsquare_register_persona_components():
    return [
        PersonaComponentSpec(
            "unbounded_knowledge", build_unbounded_knowledge, config_model=UnboundedKnowledgeConfig, persona_kind="knowledge",
            priority=50, needs_knowledge=True,
            description="every retrieved knowledge item, no boundary (Zhou appendix G, w/o KB: non-personalized knowledge)",
        )
    ]
