"""Park et al.'s agent summary description (§4.3 and appendix A).

Many prompts start with a short description of the agent: its name and persona, then three
paragraphs, each answering one question from what the agent remembers:

* its core characteristics,
* its current daily occupation,
* its feeling about its recent progress in life.

For each, the agent's memory is asked for the ``k`` records that best match the question
(through :func:`townsquare.api.agent_memory`, so any memory design serves; see
:func:`memory_of`) and one LLM call condenses them. With no memory slot filled, or nothing
remembered yet, the persona's sentences stand in for the memories (the paper seeds each
agent's memory with them). The summary is cached and
refreshed once per simulated day (the paper caches it; it does not say how often it is redone,
we chose daily as the issue asks), so a day costs three calls per agent.

Not a plugin: ``day_plan`` and the dialogue keep one and persist it with their state.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import structlog

from townsquare.api import Agent, Memory, MemoryChain, StepContext, agent_memory

from ..prompt_files import fill

log = structlog.get_logger("townsquare.plugins.generative_agents.agent_summary")

#: (what is asked of the memory, the aspect named in the prompt); Park et al., appendix A
ASPECTS: tuple[tuple[str, str], ...] = (
    ("{name}'s core characteristics", "core characteristics"),
    ("{name}'s current daily occupation", "current daily occupation"),
    ("{name}'s feeling about their recent progress in life", "feeling about their recent progress in life"),
)


def memory_of(agent: Agent) -> MemoryChain:
    """The agent's memory tiers that implement the whole :class:`townsquare.api.Memory`
    protocol (a component that fills a memory slot for another purpose, such as an older
    action log without ``recall``, is left out rather than failing mid-run)."""
    return MemoryChain([(slot, tier) for slot, tier in agent_memory(agent).tiers if isinstance(tier, Memory)])


def statements(records: list[Any], fallback: list[str], k: int, budget: int) -> str:
    """Numbered memory texts (at most ``k``, at most ``budget`` characters in all), or the
    ``fallback`` sentences when there are none: every prompt built from memory stays bounded."""
    texts = [r.text for r in records][:k] or list(fallback)[:k]
    lines, used = [], 0
    for i, text in enumerate(texts, 1):
        line = f"{i}. {text.strip()}"
        if lines and used + len(line) > budget:
            break
        lines.append(line[:budget])
        used += len(line) + 1
    return "\n".join(lines) if lines else "(nothing remembered)"


class AgentSummary:
    """The cached summary of one agent; :meth:`describe` refreshes it on a new simulated day."""

    def __init__(self, prompts: dict[str, str], *, k: int = 10, budget: int = 1200, max_tokens: int = 120):
        self.prompts = prompts
        self.k, self.budget, self.max_tokens = k, budget, max_tokens
        self.day: date | None = None
        self.parts: list[str] = []
        self.refreshes = 0

    async def describe(self, ctx: StepContext, component: str = "day_plan") -> str:
        """The summary for ``ctx.now``'s day (three LLM calls the first time that day)."""
        today = ctx.now.date()
        if self.day != today or not self.parts:
            await self._refresh(ctx, component)
            self.day = today
        return self.text(ctx)

    def text(self, ctx: StepContext) -> str:
        persona = ctx.agent.persona
        head = f"Name: {persona.name}\nInnate traits: {' '.join(persona.sentences[:3]) or 'not stated'}"
        return "\n".join([head, *self.parts])

    async def _refresh(self, ctx: StepContext, component: str) -> None:
        llm = ctx.require_llm(component)
        memory = memory_of(ctx.agent)
        name = ctx.agent.persona.name
        parts = []
        for query, aspect in ASPECTS:
            question = fill(query, name=name)
            records = await memory.recall(ctx, question, self.k) if memory else []
            prompt = fill(self.prompts["summary"], name=name, aspect=aspect,
                          statements=statements(records, ctx.agent.persona.sentences, self.k, self.budget))
            answer = await llm.text(prompt, purpose="summary", max_tokens=self.max_tokens)
            parts.append(" ".join(answer.split())[: self.budget // 2] or f"{name}'s {aspect} are not known.")
        self.parts = parts
        self.refreshes += 1
        log.debug("summary.refreshed", agent=ctx.agent.id, day=str(ctx.now.date()))

    def get_state(self) -> dict[str, Any]:
        return {"day": self.day.isoformat() if self.day else None, "parts": list(self.parts), "refreshes": self.refreshes}

    def set_state(self, state: dict[str, Any]) -> None:
        self.day = date.fromisoformat(state["day"]) if state.get("day") else None
        self.parts = [str(p) for p in state.get("parts", [])]
        self.refreshes = int(state.get("refreshes", 0))
