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

#: what each behaviour feature means, in our words (Wang et al., "Profiling Module"): said to
#: the agent itself ("you rate...") and of another person ("rates...")
FEATURE_MEANINGS = {
    "Watcher": ("rate and give feedback on what you watch", "rates and gives feedback on what they watch"),
    "Explorer": ("search for movies you have heard of and describe your experiences in detail",
                 "searches for movies they have heard of and describes their experiences in detail"),
    "Critic": ("hold high standards and criticise both movies and the recommender",
               "holds high standards and criticises both movies and the recommender"),
    "Chatter": ("love private chats and trust your friends' recommendations", "loves private chats and trusts friends' recommendations"),
    "Poster": ("like posting publicly and sharing your views with friends", "likes posting publicly and sharing their views with friends"),
}
#: the profile fields a RecAgent profile may have, in the order they are rendered
PROFILE_FIELDS = ("age", "gender", "career", "traits", "interests", "favourites", "features", "history")
#: the latest earlier ratings a profile shows (a MovieLens user may have hundreds)
HISTORY_SHOWN = 10


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def render_profile(persona: Persona, fields: Sequence[str], person: str = "second") -> str:
    """The persona's ``fields`` as grammatical sentences, to the agent itself (``person =
    "second"``: "You are 31 years old and female. You work as a writer. ...") or about someone
    else (``"third"``: "31 years old and female; works as a writer; ...")."""
    data = persona.fields
    you = person == "second"
    parts: list[str] = []
    who = [f"{data['age']} years old" if "age" in fields and data.get("age") else "",
           f"aged {data['age_group']}" if "age" in fields and not data.get("age") and data.get("age_group") else "",
           str(data["gender"]) if "gender" in fields and data.get("gender") else ""]
    who = [w for w in who if w]
    if who:
        parts.append(("You are " if you else "") + " and ".join(who))
    for name in fields:
        value = data.get(name)
        if value in (None, "", []) or name in ("age", "gender"):
            continue
        if name == "career":
            parts.append(f"{'you work' if you else 'works'} as {_article(str(value))} {value}")
        elif name == "traits":
            parts.append(f"{'people describe you' if you else 'described'} as {', '.join(map(str, value))}")
        elif name == "interests":
            parts.append(f"{'you enjoy' if you else 'enjoys'} {', '.join(map(str, value))}")
        elif name == "favourites":
            parts.append(f"{'your' if you else 'their'} favourite movies include {', '.join(map(str, value))}")
        elif name == "features":
            meanings = [FEATURE_MEANINGS[f][0 if you else 1] if f in FEATURE_MEANINGS else str(f) for f in value]
            parts.append(("you " + "; you ".join(meanings)) if you else "; ".join(meanings))
        elif name == "history":
            shown = [h for h in value if isinstance(h, dict)][-HISTORY_SHOWN:]
            rated = ", ".join(f"<{h.get('title', h.get('id'))}> {h['rating']:g}/5" if h.get("rating") is not None
                              else f"<{h.get('title', h.get('id'))}>" for h in shown)
            parts.append(f"{'movies you rated' if you else 'movies they rated'} before, most recent last: {rated}")
        elif isinstance(value, (list, tuple)):
            parts.append(f"{name}: {', '.join(map(str, value))}")
        else:
            parts.append(f"{name}: {value}")
    if not parts:
        return " ".join(persona.sentences) or persona.name
    if you:
        return " ".join(part[0].upper() + part[1:] + "." for part in parts)
    return "; ".join(parts)


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
