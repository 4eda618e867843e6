"""User conformity (Wang et al., "Studying the user conformity phenomenon", fig. 5).

Every round each agent scores one fixed item 1-10 after seeing its friends' scores of the
previous round (metric ``conformity``). From the score log,

    AC(i) = 1/(10 |U_i|) sum_{u in U_i} sum_{r in [1,10]} 1(s_{u,r-1} != s_{u,r})

with U_i the agents with i friends: the probability of an attitude change per round, by number
of friends (fig. 5b). Stored per round: ``mean`` (mean score), ``changed`` (the share of agents
whose score changed since the last round), ``scores.<s>`` (how many agents gave s, fig. 5a) and
``ac.<i>`` over the rounds so far (the first ``rounds_counted`` changes, 10 in the paper; while
fewer rounds have passed, the divisor is the number of changes seen, not 10).

Raters: ``llm`` (the paper: the agent's profile, the item, its previous score and its friends'
latest scores in the prompt ``conformity`` of ``prompts/studies.toml``; answers outside 1-10 are
repaired once, then keep the previous score) or ``embedding`` (offline, our rule: the first score
is ``clip(round(5 + 10 cos(persona, item)), 1, 10)``, then with probability ``sway`` the agent
takes the rounded mean of its score and its friends' mean). The paper first lets five agents
watch the movie and spread opinions; here every agent scores from round 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, ComponentError, MetricSpec, RoundView, hookimpl

from ..prompts import fill, load_prompts
from ..unified_prompt import render_profile

SCORES = tuple(str(n) for n in range(1, 11))


class ConformityConfig(BaseModel):
    """``[plugins.conformity]`` settings."""

    model_config = ConfigDict(extra="forbid")

    item: str | None = Field(None, description="the item's id or title (default: the catalogue's first item)")
    rater: Literal["llm", "embedding"] = "llm"
    sway: float = Field(0.5, ge=0, le=1, description="embedding rater: chance of moving toward the friends' mean")
    rounds_counted: int = Field(10, ge=1, description="score changes counted by AC (r in [1, 10] in the paper)")
    profile_fields: list[str] = Field(default_factory=lambda: ["age", "gender", "traits", "interests"])
    prompts_file: str | None = None


def attitude_change(scores: Mapping[str, Sequence[int]], friends: Mapping[str, int], rounds_counted: int = 10) -> dict[int, float]:
    """AC(i) for each friend count i: the share of score changes over the first
    ``rounds_counted`` round-to-round steps of each agent in U_i."""
    changes: dict[int, list[float]] = defaultdict(list)
    for user, series in scores.items():
        steps = min(rounds_counted, len(series) - 1)
        if steps < 1:
            continue
        changed = sum(1 for r in range(1, steps + 1) if series[r - 1] != series[r])
        changes[friends.get(user, 0)].append(changed / steps)
    return {i: float(np.mean(v)) for i, v in sorted(changes.items())}


class Conformity:
    def __init__(self, config: ConformityConfig, ctx: BuildContext):
        self.config = config
        self.services = ctx.services
        if config.rater == "llm" and (ctx.services is None or ctx.services.llm is None):
            raise ComponentError('conformity: rater "llm" needs an LLM ([llm] or --llm); rater = "embedding" runs offline')
        self.prompt = load_prompts("studies", {"conformity": frozenset({"name", "profile", "item", "previous", "opinions"})},
                                   config.prompts_file, ctx.base_dir)["conformity"]
        self.rng = np.random.default_rng([ctx.seed, 51])
        self.scores: dict[str, list[int]] = {}

    def item(self, platform: Any) -> Any:
        catalogue = getattr(platform, "catalogue", None)
        if catalogue is None:
            raise ComponentError("conformity needs the platform 'recsys'")
        wanted = self.config.item
        found = catalogue.items[0] if wanted is None else (catalogue.get(wanted) or catalogue.find_title(wanted))
        if found is None:
            raise ComponentError(f"plugins.conformity.item: no item {wanted!r} in the catalogue")
        return found

    async def score(self, agent: Any, item: Any, opinions: list[tuple[str, int]]) -> int:
        previous = self.scores.get(agent.id, [])
        if self.config.rater == "embedding":
            if not previous:
                embedder = self.services.embedder
                persona, line = await embedder.embed_one(agent.persona.text), await embedder.embed_one(item.line())
                return int(np.clip(round(5 + 10 * float(persona @ line)), 1, 10))
            if opinions and self.rng.random() < self.config.sway:
                return int(round((previous[-1] + np.mean([s for _, s in opinions])) / 2))
            return previous[-1]
        text = "\n".join(f"- {name}: {s}/10" for name, s in opinions) or "- none of your friends has said anything yet"
        prompt = fill(self.prompt, name=agent.persona.name, profile=render_profile(agent.persona, self.config.profile_fields),
                      item=item.title, previous=f"{previous[-1]}/10" if previous else "none yet", opinions=text)
        default = str(previous[-1]) if previous else "5"
        answer = await self.services.llm.for_agent(agent.id).choose(prompt, SCORES, purpose="recagent.conformity", default=default)
        return int(answer)

    async def measure(self, view: RoundView) -> dict[str, float]:
        platform = view.platform
        item = self.item(platform)
        names = {a.id: a.persona.name for a in view.agents}
        last = {a: s[-1] for a, s in self.scores.items() if s}
        fresh = {}
        for agent in view.agents:
            opinions = [(names.get(f, f), last[f]) for f in platform.friends(agent.id) if f in last]
            fresh[agent.id] = await self.score(agent, item, opinions)
        changed = [fresh[a] != last[a] for a in fresh if a in last]
        for a, s in fresh.items():
            self.scores.setdefault(a, []).append(s)
        out = {"mean": float(np.mean(list(fresh.values()))) if fresh else 0.0,
               "changed": float(np.mean(changed)) if changed else 0.0}
        out.update({f"scores.{s}": float(sum(1 for v in fresh.values() if v == s)) for s in range(1, 11)})
        friends = {a.id: len(platform.friends(a.id)) for a in view.agents}
        out.update({f"ac.{i}": v for i, v in attitude_change(self.scores, friends, self.config.rounds_counted).items()})
        return out

    def get_state(self) -> dict[str, Any]:
        return {"scores": {a: list(s) for a, s in self.scores.items()}, "rng": self.rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        self.scores = {a: [int(x) for x in s] for a, s in state.get("scores", {}).items()}
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]


def build_conformity(config: ConformityConfig | None, ctx: BuildContext) -> Conformity:
    return Conformity(config or ConformityConfig(), ctx)


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("conformity", build_conformity, config_model=ConformityConfig,
                       description="recsys: each agent scores one item 1-10 every round after its friends' scores; AC(i) (RecAgent fig. 5)")]
