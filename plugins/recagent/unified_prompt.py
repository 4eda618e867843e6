"""The unified four-part prompt of RecAgent's action module (Wang et al., "Action Module").
Not a plugin.

Every prompt joins (1) the profile filtered to the behaviour, (2) the memories read for it
(the agent's memory chain: top-N long-term records for the query plus all short-term ones),
(3) the context (simulated time and the agent's situation) and (4) the behaviour's
instruction. The paper filters the profile with ChatGPT for each behaviour; the policy does
that too with ``profile_filter = "llm"`` (once per agent and behaviour: a profile does not
change, so the filtered text is kept in the policy's state), or by default keeps, per
behaviour, the fields its ``profile_fields`` setting lists (no LLM call).
"""

from __future__ import annotations

from typing import Any, Sequence

from townsquare.api import Memory, MemoryRecord, Persona, StepContext, agent_memory

from .prompts import fill

#: what each behaviour feature means, in our words (Wang et al., "Profiling Module")
FEATURE_MEANINGS = {
    "Watcher": "rates and gives feedback on what you watch",
    "Explorer": "searches for movies you have heard of and describes your experiences in detail",
    "Critic": "holds high standards and criticises both movies and the recommender",
    "Chatter": "loves private chats and trusts friends' recommendations",
    "Poster": "likes posting publicly and sharing your views with friends",
}


def render_profile(persona: Persona, fields: Sequence[str]) -> str:
    """The persona's ``fields`` as one line ("31 years old; female; traits: curious, warm")."""
    parts = []
    data = persona.fields
    for name in fields:
        value = data.get(name)
        if value in (None, "", []):
            continue
        if name == "age":
            parts.append(f"{value} years old")
        elif name == "gender":
            parts.append(str(value))
        elif name == "features":
            parts.append("you " + "; you ".join(FEATURE_MEANINGS.get(f, f) for f in value))
        elif isinstance(value, (list, tuple)):
            parts.append(f"{name}: {', '.join(str(v) for v in value)}")
        else:
            parts.append(f"{name}: {value}")
    return "; ".join(parts) or " ".join(persona.sentences) or persona.name


def memory_tiers(ctx: StepContext) -> Any:
    """The agent's memory chain, keeping only tiers that implement the memory protocol."""
    chain = agent_memory(ctx.agent)
    chain.tiers = [(slot, tier) for slot, tier in chain.tiers if isinstance(tier, Memory)]
    return chain


def render_memories(records: Sequence[MemoryRecord]) -> str:
    seen: set[str] = set()
    lines = []
    for record in records:
        if record.text not in seen:
            seen.add(record.text)
            lines.append(f"- {record.text}")
    return "\n".join(lines) or "- (nothing comes to mind)"


def situation(ctx: StepContext, where: str) -> str:
    return f"It is {ctx.now:%A, %H:%M} (round {ctx.round}). {where}"


async def unified_prompt(ctx: StepContext, prompts: dict[str, str], profile: str, query: str, k: int,
                         where: str, instruction: str) -> str:
    records = await memory_tiers(ctx).recall(ctx, query, k) if k > 0 else []
    return fill(prompts["frame"], name=ctx.agent.persona.name, profile=profile,
                memory=render_memories(records), context=situation(ctx, where), instruction=instruction)
