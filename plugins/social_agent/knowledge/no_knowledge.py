"""Persona knowledge ``no_knowledge``: no outside knowledge at all.

Posts are then written from the persona alone (the paper's table 10 prompt rather than
table 9). Needs no knowledge source.

This is *not* Zhou et al.'s "w/o KB" ablation: appendix G removes the knowledge *boundary*
("when using ... non-personalized knowledge", tables 15-16), so its agents still get
knowledge, only not filtered by the persona; that is ``unbounded_knowledge``. ``no_knowledge``
is a further ablation of ours (no knowledge source), useful as a floor.
"""

from __future__ import annotations

from typing import Any

from townsquare.api import PersonaComponentSpec, hookimpl


class NoKnowledge:
    """Adopts nothing, asks nothing."""

    async def knowledge_for(self, ctx: Any, topic: str) -> list[Any]:
        return []

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_no_knowledge(config: None, ctx: Any) -> NoKnowledge:
    return NoKnowledge()


@hookimpl
def townsquare_register_persona_components():
    return [
        PersonaComponentSpec("no_knowledge", build_no_knowledge, persona_kind="knowledge",
                             description="no outside knowledge at all (not the paper's w/o KB: that is unbounded_knowledge)"),
    ]
