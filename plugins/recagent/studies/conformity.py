"""User conformity (Wang et al., "Studying the user conformity phenomenon", fig. 5).

The paper: "we first let five agents with sufficient social connections watch a movie, and then
they may share opinions with their friends via one-to-one chatting or one-to-many
broadcasting ... After each system round, we ask each agent to score the movie in [1,10]."
Here the agents live their ordinary RecAgent lives (``recagent_policy``: the recommender, chats,
broadcasts), the movie's first watchers are set up by the scenario (their persona ``history``
holds their rating of it, which their policy writes into their memory before the first step:
``examples/conformity.toml`` gives it to the five best-connected agents), and at the end of every
round this metric asks every agent for its score.

Friends' opinions reach a rater only through what the rater has seen or been told: the prompt
``conformity`` of ``prompts/studies.toml`` holds the agent's profile, the movie, its previous
score and what its memory chain recalls for the movie's title (a chat or broadcast it received
went through its sensory, short- and long-term memory first). No friend's score is handed over.
Remove the memory (``-p no:short_term_memory -p no:long_term_memory``) and nothing of the
friends reaches the prompt. Asking is an interview inside the simulation: as in the reference
code, reading the memory marks the recalled long-term records as read. Answers are labels 1-10
(``LLMClient.choose``): repaired once, then the previous score.

From the score log,

    AC(i) = 1/(10 |U_i|) sum_{u in U_i} sum_{r in [1,10]} 1(s_{u,r-1} != s_{u,r})

with U_i the agents with i friends: the probability of an attitude change per round, by number
of friends (fig. 5b). Stored per round: ``mean`` (mean score), ``changed`` (the share of agents
whose score changed since the last round), ``scores.<s>`` (how many agents gave s, fig. 5a) and
``ac.<i>`` over the rounds so far (the first ``rounds_counted`` changes, 10 in the paper; while
fewer rounds have passed, the divisor is the number of changes seen, not 10), and ``rho``:
Spearman's rank correlation, over the agents, between each agent's number of friends and its
own attitude change AC_u (its score changes in those rounds), the single number of whether AC
rises with friends (0 while no agent has changed its score, or all have the same friends: the
correlation is then undefined), and ``rho_others``, the same over the agents who had not rated
the movie before the run (whose persona ``history`` does not hold it): the first watchers'
own rating anchors them, and where they are also the best connected it hides the relation.

``rater = "embedding"`` is an offline rule for agents without an LLM (``embedding_items``): the
first score is ``clip(round(5 + 10 cos(persona, item)), 1, 10)``; afterwards, with probability
``sway``, the agent takes the rounded mean of its score and the scores it was told of the movie
in messages it received (its inbox: chats and broadcasts naming the movie with "N/10").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import re
from datetime import datetime

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, ComponentError, Memory, MetricSpec, RoundView, StepContext, agent_memory, hookimpl
from townsquare.lib.stats import spearman

from ..prompts import fill, load_prompts
from ..unified_prompt import render_memories, render_profile

SCORES = tuple(str(n) for n in range(1, 11))
#: a score in a message: "8/10" or "8 out of 10"
TOLD_SCORE = re.compile(r"\b(10|[1-9])\s*(?:/|out of)\s*10\b")


class ConformityConfig(BaseModel):
    """``[plugins.conformity]`` settings."""

    model_config = ConfigDict(extra="forbid")

    item: str | None = Field(None, description="the item's id or title (default: the catalogue's first item)")
    rater: Literal["llm", "embedding"] = "llm"
    sway: float = Field(0.5, ge=0, le=1, description="embedding rater: chance of moving toward the scores it was told")
    recall_k: int = Field(5, ge=0, description="llm rater: memory records asked of each tier for the movie")
    rounds_counted: int = Field(10, ge=1, description="score changes counted by AC (r in [1, 10] in the paper)")
    profile_fields: list[str] = Field(default_factory=lambda: ["age", "gender", "traits", "interests", "features"])
    prompts_file: str | None = None


def attitude_change(scores: Mapping[str, Sequence[int]], friends: Mapping[str, int], rounds_counted: int = 10) -> dict[int, float]:
    """AC(i) for each friend count i: the share of score changes over the first
    ``rounds_counted`` round-to-round steps of each agent in U_i."""
    changes: dict[int, list[float]] = defaultdict(list)
    for user, changed in own_changes(scores, rounds_counted).items():
        changes[friends.get(user, 0)].append(changed / min(rounds_counted, len(scores[user]) - 1))
    return {i: float(np.mean(v)) for i, v in sorted(changes.items())}


def own_changes(scores: Mapping[str, Sequence[int]], rounds_counted: int = 10) -> dict[str, int]:
    """Per agent with two scores or more, its score changes over its first ``rounds_counted``
    round-to-round steps (AC_u times the steps)."""
    return {user: sum(1 for r in range(1, min(rounds_counted, len(series) - 1) + 1) if series[r] != series[r - 1])
            for user, series in scores.items() if len(series) > 1}


def first_watchers(agents: Sequence[Any], item: Any) -> set[str]:
    """The agents whose persona ``history`` holds ``item`` (by id or title): they rated it before the run."""
    def holds(entry: Any) -> bool:
        return isinstance(entry, Mapping) and (entry.get("id") == item.id or entry.get("title") == item.title)

    return {a.id for a in agents if any(holds(h) for h in (a.persona.fields.get("history") or ()))}


def details(item: Any) -> str:
    """The movie's genres and description, as the interviewer names them."""
    genres = "/".join(item.genres) or "no genre listed"
    return f"{genres}: {item.description}" if item.description else genres


class Conformity:
    def __init__(self, config: ConformityConfig, ctx: BuildContext):
        self.config = config
        self.services = ctx.services
        if config.rater == "llm" and (ctx.services is None or ctx.services.llm is None):
            raise ComponentError('conformity: rater "llm" needs an LLM ([llm] or --llm); rater = "embedding" runs offline')
        self.prompt = load_prompts("studies", {"conformity": frozenset({"name", "profile", "memory", "item", "details", "previous"})},
                                   config.prompts_file, ctx.base_dir)["conformity"]
        clock = getattr(ctx.scenario, "clock", None) if ctx.scenario is not None else None
        self.minutes_per_round = getattr(clock, "minutes_per_round", 60)
        self.rng = np.random.default_rng([ctx.seed, 51])
        self.scores: dict[str, list[int]] = {}
        self.inbox_seen: dict[str, int] = {}
        self.told: dict[str, list[int]] = {}

    def item(self, platform: Any) -> Any:
        catalogue = getattr(platform, "catalogue", None)
        if catalogue is None:
            raise ComponentError("conformity needs the platform 'recsys'")
        wanted = self.config.item
        found = catalogue.items[0] if wanted is None else (catalogue.get(wanted) or catalogue.find_title(wanted))
        if found is None:
            raise ComponentError(f"plugins.conformity.item: no item {wanted!r} in the catalogue")
        return found

    async def remembered(self, agent: Any, item: Any, view: RoundView) -> str:
        """What the agent's memory chain recalls for the movie's title (nothing without tiers)."""
        chain = agent_memory(agent)
        chain.tiers = [(slot, tier) for slot, tier in chain.tiers if isinstance(tier, Memory)]
        if not chain or self.config.recall_k == 0:
            return render_memories([])
        ctx = StepContext(agent=agent, round=view.round, now=datetime.fromisoformat(view.now),
                          minutes_per_round=self.minutes_per_round, services=self.services,
                          llm=self.services.llm.for_agent(agent.id) if self.services.llm is not None else None)
        return render_memories(await chain.recall(ctx, item.title, self.config.recall_k))

    def heard(self, platform: Any, agent_id: str, item: Any) -> list[int]:
        """Scores of the movie in the messages the agent received so far (the offline rater)."""
        messages = platform.inbox(agent_id, self.inbox_seen.get(agent_id, 0))
        self.inbox_seen[agent_id] = self.inbox_seen.get(agent_id, 0) + len(messages)
        for message in messages:
            if item.id in message.get("items", ()) or f"<{item.title}>" in message.get("text", ""):
                self.told.setdefault(agent_id, []).extend(int(m) for m in TOLD_SCORE.findall(message.get("text", "")))
        return self.told.get(agent_id, [])

    async def score(self, agent: Any, item: Any, view: RoundView) -> int:
        previous = self.scores.get(agent.id, [])
        if self.config.rater == "embedding":
            told = self.heard(view.platform, agent.id, item)
            if not previous:
                embedder = self.services.embedder
                persona, line = await embedder.embed_one(agent.persona.text), await embedder.embed_one(item.line())
                return int(np.clip(round(5 + 10 * float(persona @ line)), 1, 10))
            if told and self.rng.random() < self.config.sway:
                return int(round((previous[-1] + np.mean(told)) / 2))
            return previous[-1]
        prompt = fill(self.prompt, name=agent.persona.name, profile=render_profile(agent.persona, self.config.profile_fields),
                      memory=await self.remembered(agent, item, view), item=item.title, details=details(item),
                      previous=f"{previous[-1]}/10" if previous else "none yet")
        default = str(previous[-1]) if previous else "5"
        answer = await self.services.llm.for_agent(agent.id).choose(prompt, SCORES, purpose="recagent.conformity", default=default)
        return int(answer)

    async def measure(self, view: RoundView) -> dict[str, float]:
        platform = view.platform
        item = self.item(platform)
        last = {a: s[-1] for a, s in self.scores.items() if s}
        fresh = {agent.id: await self.score(agent, item, view) for agent in view.agents}
        changed = [fresh[a] != last[a] for a in fresh if a in last]
        for a, s in fresh.items():
            self.scores.setdefault(a, []).append(s)
        out = {"mean": float(np.mean(list(fresh.values()))) if fresh else 0.0,
               "changed": float(np.mean(changed)) if changed else 0.0}
        out.update({f"scores.{s}": float(sum(1 for v in fresh.values() if v == s)) for s in range(1, 11)})
        friends = {a.id: len(platform.friends(a.id)) for a in view.agents}
        out.update({f"ac.{i}": v for i, v in attitude_change(self.scores, friends, self.config.rounds_counted).items()})
        changes = own_changes(self.scores, self.config.rounds_counted)
        first = first_watchers(view.agents, item)
        for key, agents in (("rho", [a for a in friends if a in changes]), ("rho_others", [a for a in friends if a in changes and a not in first])):
            out[key] = spearman([friends[a] for a in agents], [changes[a] for a in agents]) or 0.0
        return out

    def get_state(self) -> dict[str, Any]:
        return {"scores": {a: list(s) for a, s in self.scores.items()}, "rng": self.rng.bit_generator.state,
                "inbox_seen": dict(self.inbox_seen), "told": {a: list(s) for a, s in self.told.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        self.scores = {a: [int(x) for x in s] for a, s in state.get("scores", {}).items()}
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]
        self.inbox_seen = {a: int(n) for a, n in state.get("inbox_seen", {}).items()}
        self.told = {a: [int(x) for x in s] for a, s in state.get("told", {}).items()}


def build_conformity(config: ConformityConfig | None, ctx: BuildContext) -> Conformity:
    return Conformity(config or ConformityConfig(), ctx)


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("conformity", build_conformity, config_model=ConformityConfig,
                       description="recsys: each agent scores one item 1-10 every round from what it remembers; AC(i) (RecAgent fig. 5)")]
