"""What of the persona and of outside knowledge a prompt shows (not a plugin).

The persona helper's components fill two slots: ``persona.context`` (``render(ctx, query)``:
the persona text for one action, Zhou et al. §3.1.1 dynamic persona) and ``persona.knowledge``
(``knowledge_for(ctx, topic)``: the knowledge the persona may use, the knowledge boundary).
Either slot may be empty (a scenario writes ``none``, or no plugin provides one): then prompts
show the whole persona (as ``full_persona`` would) and no knowledge. Topics and the plan always
use the whole persona: the paper generates topics "based on all persona information" (§3.1.2)
and plans from "persona information" (§3.1.3), with no action text to retrieve with.
"""

from __future__ import annotations

from typing import Any, Sequence

from townsquare.api import Persona

from .persona_schema import full_info


def full_persona_text(persona: Persona) -> str:
    """The whole persona, in the layout the persona components use
    (:func:`.persona_schema.full_info`: basic information, then each advanced attribute in
    full; a plain Personachat persona shows its sentences)."""
    return full_info(persona)


async def persona_text(ctx: Any, query: str) -> str:
    """The persona text for an action about ``query`` (a post's text, a topic)."""
    component = ctx.agent.components.get("persona.context")
    if component is not None and hasattr(component, "render"):
        return await component.render(ctx, query)
    return full_persona_text(ctx.agent.persona)


async def knowledge_items(ctx: Any, topic: str) -> list[Any]:
    """The knowledge the persona adopts for ``topic`` (none without a ``persona.knowledge``)."""
    component = ctx.agent.components.get("persona.knowledge")
    if component is not None and hasattr(component, "knowledge_for"):
        return list(await component.knowledge_for(ctx, topic) or [])
    return []


def format_knowledge(items: Sequence[Any]) -> str:
    """Knowledge items as the paper's example shows them: "Title: ... Text: ..." per item."""
    lines = []
    for item in items:
        title = getattr(item, "title", "") or ""
        text = getattr(item, "text", str(item))
        lines.append(f"Title: {title} Text: {text}" if title else f"Text: {text}")
    return "\n".join(lines)
