"""Park et al.'s social interviews (§7.1): information diffusion and relationship formation
asked of the agents themselves, as the paper measures them.

* Diffusion: each agent is asked whether it knows about ``topic`` (one yes/no decision from its
  persona and the memories it recalls for the question). As in the paper, a yes counts only
  when the agent's memory holds evidence (a record matching ``evidence``, a regular
  expression); a yes without evidence is counted as a hallucination.
* Relationships: each agent is asked, for every other agent, whether it knows them; an edge
  needs a yes from both (the paper's mutual knowledge), density eta = 2|E| / (|V|(|V|-1)).

``townsquare eval park RUN --topic "Isabella's Valentine's Day party" --evidence "valentine|party"``
runs them on a run's agents (no battery with ``--questions 0``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from townsquare.api import agent_memory

from ..memory.memory_text import cut, memory_lines
from ..prompt_files import fill
from ..town_metrics import density

REQUIRED = {"knows_topic": frozenset({"name", "persona", "memories", "topic"}),
            "knows_person": frozenset({"name", "persona", "memories", "other"})}


@dataclass
class SocialInterviews:
    topic: str
    said_yes: list[str] = field(default_factory=list)
    informed: list[str] = field(default_factory=list)  # yes, with evidence in memory
    hallucinated: list[str] = field(default_factory=list)  # yes, without evidence
    acquaintances: dict[str, list[str]] = field(default_factory=dict)
    agents: int = 0

    @property
    def knows_share(self) -> float:
        return len(self.informed) / self.agents if self.agents else 0.0

    @property
    def density(self) -> float:
        return density({a: set(known) for a, known in self.acquaintances.items()})


async def _yes(ctx: Any, prompts: dict[str, str], name: str, query: str, purpose: str, k: int, **values: str) -> bool:
    memory = agent_memory(ctx.agent)
    records = await memory.recall(ctx, query, k) if memory else []
    persona = ctx.agent.persona
    prompt = fill(prompts[name], name=persona.name, persona=cut(persona.text, 600), memories=memory_lines(records, k, 1200),
                  **values)
    return await ctx.require_llm("social_interviews").choose(prompt, ["yes", "no"], purpose=purpose, default="no") == "yes"


async def interview_town(contexts: Sequence[Any], prompts: dict[str, str], topic: str, evidence: str, *,
                         k: int = 5, people: bool = True) -> SocialInterviews:
    pattern = re.compile(evidence, re.I)
    result = SocialInterviews(topic, agents=len(contexts))
    names = {ctx.agent.id: ctx.agent.persona.name for ctx in contexts}
    for ctx in contexts:
        me = ctx.agent.id
        if await _yes(ctx, prompts, "knows_topic", topic, "eval.knows_topic", k, topic=topic):
            result.said_yes.append(me)
            memory = agent_memory(ctx.agent)
            backed = bool(memory) and any(pattern.search(r.text) for r in memory.since(None))
            (result.informed if backed else result.hallucinated).append(me)
        if people:
            result.acquaintances[me] = [other for other, name in names.items() if other != me and await _yes(
                ctx, prompts, "knows_person", f"What is {names[me]}'s relationship with {name}?", "eval.knows_person", k,
                other=name)]
    return result
