"""Soc-Strategy (Wang et al., "Studying the information cocoon phenomenon", fig. 4a, b): at the
start of round ``from_round``, each agent gets ``n`` new friends with different interests (the
paper: one in fig. 4a; 1, 3 or 5 in fig. 4b), so that their chats and broadcasts bring other
kinds of items.

"Different interests" is not defined in the paper. We compare agents by the genres of what they
watched so far (a genre histogram per agent, an item counting once per genre); an agent that
watched nothing yet is described by its persona's ``interests`` that name catalogue genres. For
each agent, in agent order, the ``n`` agents it is not yet friends with whose histograms have the
lowest cosine similarity to its own become its friends (ties broken at random with the run's
seed). Friendship is mutual, so an agent may end with more than ``n`` new friends.

The scenario lists ``soc_strategy`` among its interventions (``interventions =
["soc_strategy"]``); it acts at the start of round ``from_round`` and each round reports
``soc_strategy.added``, the friendships added so far.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, ComponentError, InterventionSpec, RoundView, RunSeams, UsageError, hookimpl

log = structlog.get_logger("townsquare.plugins.recagent.studies.soc_strategy")


class SocStrategyConfig(BaseModel):
    """``[plugins.soc_strategy]`` settings (defaults: the paper's fig. 4a)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="false: listed but off (a scenario's --set switch)")
    n: int = Field(1, ge=0, description="friends with different interests added to each agent")
    from_round: int = Field(20, ge=0, description="the round at whose start they are added")


def interest_vectors(platform: Any, agent_ids: list[str]) -> np.ndarray:
    """One genre histogram per agent (watched items, else persona interests naming genres)."""
    genres = {g: k for k, g in enumerate(platform.catalogue.genres)}
    out = np.zeros((len(agent_ids), max(1, len(genres))))
    for row, agent_id in enumerate(agent_ids):
        for item in platform.watched(agent_id):
            for g in item.genres:
                out[row, genres[g]] += 1
        if not out[row].any():
            member = platform.members.get(agent_id)
            for text in (member.persona.fields.get("interests") or ()) if member is not None else ():
                genre = platform.catalogue.genre_of(str(text))
                if genre is not None:
                    out[row, genres[genre]] += 1
    return out


def pick_different(vectors: np.ndarray, n: int, friends: list[set[int]], rng: Any) -> list[tuple[int, int]]:
    """For each row in order, the ``n`` rows (not itself, not yet friends) least similar to it;
    returns the new pairs and updates ``friends`` (mutual)."""
    norms = np.linalg.norm(vectors, axis=1)
    unit = vectors / np.where(norms == 0, 1.0, norms)[:, None]
    similarity = unit @ unit.T
    pairs = []
    for u in range(len(vectors)):
        others = [v for v in range(len(vectors)) if v != u and v not in friends[u]]
        jitter = rng.random(len(others))
        order = np.lexsort((jitter, similarity[u, others]))
        for k in order[:n]:
            v = others[int(k)]
            friends[u].add(v)
            friends[v].add(u)
            pairs.append((u, v))
    return pairs


class SocStrategy:
    """The intervention: new friends with different interests at the start of ``from_round``."""

    def __init__(self, config: SocStrategyConfig, seed: int):
        self.config = config
        self.seed = seed
        self.added = 0

    def acts_at(self, round: int) -> bool:
        cfg = self.config
        return cfg.enabled and cfg.n > 0 and round == cfg.from_round

    async def intervene(self, seams: RunSeams, round: int) -> None:
        platform = seams.platform
        ids = sorted(platform.accounts)
        index = {a: k for k, a in enumerate(ids)}
        friends = [{index[f] for f in platform.friends(a) if f in index} for a in ids]
        pairs = pick_different(interest_vectors(platform, ids), self.config.n, friends, np.random.default_rng([self.seed, 41]))
        for u, v in pairs:
            platform.add_friend(ids[u], ids[v])
        self.added += len(pairs)
        log.info("soc_strategy.applied", round=round, friendships=len(pairs))

    async def measure(self, view: RoundView) -> dict[str, float]:
        return {"added": float(self.added)}

    def get_state(self) -> dict[str, Any]:
        return {"added": self.added}

    def set_state(self, state: dict[str, Any]) -> None:
        self.added = int(state.get("added", 0))


def build_soc_strategy(config: SocStrategyConfig | None, ctx: BuildContext) -> SocStrategy:
    platform = ctx.services.platform if ctx.services is not None else None
    if platform is None or not hasattr(platform, "add_friend"):
        raise ComponentError("soc_strategy needs the platform 'recsys'")
    config = config or SocStrategyConfig()
    scenario = getattr(ctx, "scenario", None)
    agents = sum(pop.count for pop in scenario.populations) if scenario is not None else None
    if agents is not None and config.n >= agents:
        raise UsageError(f"plugins.soc_strategy.n = {config.n}: the run has {agents} agents, so each can get at most "
                         f"{agents - 1} new friends")
    if config.enabled and config.n > 0 and scenario is not None and config.from_round >= scenario.rounds:
        raise UsageError(f"plugins.soc_strategy.from_round = {config.from_round}: the run has rounds 0..{scenario.rounds - 1}, "
                         "so it would never act (set enabled = false for a control run)")
    return SocStrategy(config, ctx.seed)


@hookimpl
def townsquare_register_interventions():
    return [InterventionSpec("soc_strategy", build_soc_strategy, config_model=SocStrategyConfig,
                       description="Soc-Strategy (RecAgent fig. 4): n friends with different interests per agent from round R")]
