"""Persona context ``full_persona``: all the persona information for every action.

The ablation "w/o PD" of Zhou et al. (appendix G, tables 15-16): "the agent uses all the
persona information instead of the dynamic persona information". The text has the same
layout as ``dynamic_persona``'s (basic information, then one line per advanced attribute),
with each attribute in full, so the ablation changes what is shown and nothing else.
"""

from __future__ import annotations

from typing import Any

from townsquare.api import PersonaComponentSpec, hookimpl

from . import persona_schema as S


class FullPersona:
    """Shows the whole persona whatever the action."""

    def __init__(self) -> None:
        self.renders = 0

    async def render(self, ctx: Any, query: str) -> str:
        self.renders += 1
        return S.full_info(ctx.agent.persona)

    def get_state(self) -> dict[str, Any]:
        return {"renders": self.renders}

    def set_state(self, state: dict[str, Any]) -> None:
        self.renders = int(state.get("renders", 0))


def build_full_persona(config: None, ctx: Any) -> FullPersona:
    return FullPersona()


@hookimpl
def townsquare_register_persona_components():
    return [
        PersonaComponentSpec(
            "full_persona", build_full_persona, persona_kind="context",
            description="all persona information for every action (Zhou appendix G, w/o PD)",
        )
    ]
