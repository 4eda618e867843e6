"""RecAgent's social behaviours (Wang et al., "Simulator": one-to-one chatting and one-to-many
broadcasting). Not a plugin: the policy calls :func:`chat` and :func:`broadcast`.

A chat alternates lines between the agent and a friend, each line written with that
speaker's profile, memories and the items it may mention (watched or heard of: the paper's
agents only talk about items they know). The conversation ends when a speaker ends its line
with ``[END]`` or after ``turn_cap`` lines. The friend's side reads the friend's memories
created before this round, read-only (so the friend's own concurrent step cannot change what
this chat sees: runs stay reproducible), and its items from the platform and its policy.
Titles written as ``<Title>`` are matched to the catalogue; the chat action carries the items
mentioned, and the friend hears of them when it next reads its inbox.
"""

from __future__ import annotations

import re
from typing import Any

from townsquare.api import Action, Agent, Memory, StepContext, agent_memory

from .choices import Choice
from .prompts import fill
from .unified_prompt import render_memories

END = "[END]"
_TITLE = re.compile(r"<([^<>]{1,200})>")


def mentioned_items(platform: Any, text: str) -> list[str]:
    """Catalogue ids of the ``<Title>``s in ``text``, in order, without repeats."""
    found: list[str] = []
    for title in _TITLE.findall(text):
        item = platform.catalogue.find_title(title)
        if item is not None and item.id not in found:
            found.append(item.id)
    return found


def partner_memories(partner: Agent, before: Any, count: int) -> str:
    records = [r for _, tier in agent_memory(partner).tiers if isinstance(tier, Memory)
               for r in tier.since(None) if r.created is not None and r.created < before]
    records.sort(key=lambda r: (r.created, r.id))
    return render_memories(records[-count:])


async def chat(policy: Any, ctx: StepContext, partner_id: str, known_ids: list[str], partner_ids: list[str]) -> Action:
    """The chat between the agent and ``partner_id``; ``known_ids`` and ``partner_ids`` are the
    items each side watched or heard of. Items a speaker names without knowing them are kept in
    ``detail["unknown_items"]`` (the prompt forbids it; the count shows how well a model obeys)."""
    platform = ctx.platform
    known_items, partner_items = policy.titles(ctx, known_ids), policy.titles(ctx, partner_ids)
    me, partner = ctx.agent, platform.members[partner_id]
    config, prompts = policy.config, policy.prompts
    my_memory = render_memories(await policy.read_memory(ctx, f"{partner.persona.name} {known_items}"))
    their_memory = partner_memories(partner, ctx.now, config.partner_memories)
    sides = [
        (me, partner, my_memory, their_memory, known_items),
        (partner, me, their_memory, my_memory, partner_items),
    ]
    allowed = [set(known_ids), set(partner_ids)]
    unknown: list[str] = []
    turns: list[tuple[str, str]] = []
    ended = False
    for t in range(config.turn_cap):
        speaker, other, _, other_memory, items = sides[t % 2]
        transcript = "\n".join(f"[{who}]: {line}" for who, line in turns) or "(nobody has spoken yet)"
        instruction = fill(prompts["chat_turn"], other=other.persona.name,
                           other_profile=await policy.profile(ctx, "social", other.persona, person="third"),
                           other_memory=other_memory.replace("\n", " "), transcript=transcript, known_items=items)
        prompt = fill(prompts["frame"], name=speaker.persona.name,
                      profile=await policy.profile(ctx, "social", speaker.persona),
                      memory=sides[t % 2][2], context=f"It is {ctx.now:%A, %H:%M}. {speaker.persona.name} is chatting with {other.persona.name}.",
                      instruction=instruction)
        if speaker is me:
            line = await policy.decider.decide(ctx, Choice("chat_turn", prompt, (), default=END))
        else:
            line = " ".join((await ctx.require_llm("recagent_policy").text(prompt, purpose="recagent.chat_turn")).split())
        ended = END in line
        line = line.replace(END, "").strip()
        if line:
            turns.append((speaker.persona.name, line))
            unknown += [i for i in mentioned_items(platform, line) if i not in allowed[t % 2] and i not in unknown]
            allowed[(t + 1) % 2].update(mentioned_items(platform, line))  # the listener has now heard of them
        if ended:
            break
    text = "\n".join(f"[{who}]: {line}" for who, line in turns)
    return Action(me.id, "chat", target_agent=partner_id, text=text,
                  detail={"turns": len(turns), "ended": ended, "items": mentioned_items(platform, text), "unknown_items": unknown})


async def broadcast(policy: Any, ctx: StepContext, known_items: str) -> Action | None:
    prompt = await policy.prompt(ctx, "broadcast", "movies I watched and what I think of them",
                                 "You are thinking of posting a message to all your friends.",
                                 fill(policy.prompts["broadcast"], known_items=known_items))
    text = await policy.decider.decide(ctx, Choice("broadcast", prompt, (), default=""))
    if not text:
        return None
    return Action(ctx.agent.id, "broadcast", text=text, detail={"items": mentioned_items(ctx.platform, text)})
