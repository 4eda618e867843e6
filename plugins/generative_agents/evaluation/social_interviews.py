"""Park et al.'s social interviews (§7.1): information diffusion and relationship formation
asked of the agents themselves, as the paper measures them.

* Diffusion: each agent is asked whether it knows about ``topic`` (one yes/no decision from its
  persona and the memories it recalls for the question). As in the paper, a yes counts only
  when the agent's memory holds evidence (a record matching ``evidence``, a regular expression,
  of a kind in ``evidence_kinds`` or from its seed: by default, in a town, the conversation that
  conveyed it, as ``town_metrics`` counts); a yes without evidence is counted as a hallucination.
* Relationships: each agent is asked, for every other agent, whether it knows them; an edge
  needs a yes from both (the paper's mutual knowledge), density eta = 2|E| / (|V|(|V|-1)).

Each answer comes from the agent's persona and the 50 memories it recalls for the question (at
most 6,000 characters: ``k``, ``chars``), as the reference code's interviews retrieve 50 for each
line of the interviewer.

Every answer is kept per agent (:attr:`SocialInterviews.answers`). ``townsquare eval park RUN
--topic party`` runs them on a run's agents (a topic the run's ``town_metrics`` measures gives
the question and the evidence; ``--each-day``: from the checkpoint at the end of each simulated
day; no battery with ``--questions 0``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Collection, Sequence

from townsquare.api import agent_memory

from ..memory.memory_text import cut, memory_lines
from ..prompt_files import fill
from ..town_metrics import TownMetricsConfig, density

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
    #: per agent, in interview order: {"agent", "name", "knows_topic" ("yes"/"no"), "evidence"
    #: (its memory holds it), "knows" ({other agent: "yes"/"no"})}
    answers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def knows_share(self) -> float:
        return len(self.informed) / self.agents if self.agents else 0.0

    @property
    def density(self) -> float:
        return density({a: set(known) for a, known in self.acquaintances.items()})


#: memories an interview recalls per question: the reference code's interview (``open_convo_session``,
#: "analysis" mode) retrieves 50 for each line the interviewer says; at most this many characters of them
INTERVIEW_RECALL = 50
INTERVIEW_CHARS = 6000


async def _yes(ctx: Any, prompts: dict[str, str], name: str, query: str, purpose: str, k: int, chars: int,
               **values: str) -> bool:
    memory = agent_memory(ctx.agent)
    records = await memory.recall(ctx, query, k) if memory else []
    persona = ctx.agent.persona
    prompt = fill(prompts[name], name=persona.name, persona=cut(persona.text, 600), memories=memory_lines(records, k, chars),
                  **values)
    return await ctx.require_llm("social_interviews").choose(prompt, ["yes", "no"], purpose=purpose, default="no") == "yes"


async def interview_town(contexts: Sequence[Any], prompts: dict[str, str], topic: str, evidence: str, *,
                         k: int = INTERVIEW_RECALL, chars: int = INTERVIEW_CHARS, people: bool = True,
                         evidence_kinds: Collection[str] | None = None) -> SocialInterviews:
    """Ask every agent of ``contexts`` about ``topic`` and (``people``) about each other agent,
    each answer from the ``k`` memories (at most ``chars`` characters) its memory recalls for the
    question. ``evidence_kinds``: the record kinds (besides seed records) that back a yes; None: any."""
    pattern = re.compile(evidence, re.I)
    result = SocialInterviews(topic, agents=len(contexts))
    names = {ctx.agent.id: ctx.agent.persona.name for ctx in contexts}
    for ctx in contexts:
        me = ctx.agent.id
        said = await _yes(ctx, prompts, "knows_topic", topic, "eval.knows_topic", k, chars, topic=topic)
        backed = _backed(ctx.agent, pattern, evidence_kinds)
        if said:
            result.said_yes.append(me)
            (result.informed if backed else result.hallucinated).append(me)
        knows: dict[str, str] = {}
        if people:
            for other, name in names.items():
                if other != me:
                    knows[other] = "yes" if await _yes(ctx, prompts, "knows_person",
                                                       f"What is {names[me]}'s relationship with {name}?",
                                                       "eval.knows_person", k, chars, other=name) else "no"
            result.acquaintances[me] = [other for other, answer in knows.items() if answer == "yes"]
        result.answers.append({"agent": me, "name": names[me], "knows_topic": "yes" if said else "no", "evidence": backed,
                               "knows": knows})
    return result


def _backed(agent: Any, pattern: re.Pattern[str], kinds: Collection[str] | None) -> bool:
    """Whether the agent's memory (or its seed) holds a record about the topic."""
    if any(pattern.search(str(s)) for s in agent.persona.sentences):
        return True
    memory = agent_memory(agent)
    records = memory.since(None) if memory else []
    return any(pattern.search(r.text) for r in records
               if kinds is None or r.kind in kinds or (r.meta or {}).get("seed"))


#: the evidence of a free-text topic when none is given (the party of Park's §7.1)
DEFAULT_EVIDENCE = "valentine|party"


def topic_question(scenario: Any, topic: str, evidence: str | None) -> tuple[str, str, list[str] | None]:
    """(what to ask about, the evidence pattern, the record kinds that back a yes) for
    ``--topic``: a topic the run's ``town_metrics`` measures is asked about in its ``about``
    words, backed as the metric counts (its pattern, in its ``heard_kinds`` or the seed); any
    other text is asked as written, backed by any record matching ``evidence``."""
    if "town_metrics" in (scenario.metrics or []):
        config = TownMetricsConfig.model_validate(scenario.plugins.get("town_metrics", {}))
        if topic in config.topics:
            measured = config.topics[topic]
            return measured.about or topic, evidence or measured.pattern, list(config.heard_kinds)
    return topic, evidence or DEFAULT_EVIDENCE, None


def day_ends(start: datetime, minutes: int, last: int, kept: Sequence[int]) -> tuple[list[int], list[date]]:
    """The checkpoint that ends each simulated day of a run whose rounds ``0..last`` are done
    (round ``r`` starts at ``start + r * minutes``): per day, the latest of the ``kept`` rounds
    that start on it; and the days none of them does."""
    def day_of(round: int) -> date:
        return (start + timedelta(minutes=round * minutes)).date()

    days = sorted({day_of(r) for r in range(last + 1)})
    ends = {day_of(r): r for r in sorted(kept) if r <= last}
    return [ends[d] for d in days if d in ends], [d for d in days if d not in ends]
