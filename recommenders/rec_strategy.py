"""Rec-Strategy (Wang et al., "Studying the information cocoon phenomenon", fig. 4a, c, d):
more randomness in the recommendations. From round ``from_round`` on, every ``every`` rounds,
``n`` items of each page of the run's item recommender are replaced by random items the
viewer has not watched (the paper: one of five every round from round 20 in fig. 4a; every 1,
5 or 10 rounds in fig. 4c; 1, 3 or 5 items in fig. 4d).

:class:`RecStrategy` wraps any :class:`~townsquare.api.ItemRecommender`. The scenario lists it
among its interventions (``interventions = ["rec_strategy"]``): when built it wraps the
platform's recommender; it acts in the rounds where pages are perturbed, and each round it
reports ``rec_strategy.active`` (1 in a round where pages are perturbed). The last
``n`` positions of each page are replaced (the paper does not say which; the best-ranked items
stay first), by items drawn uniformly with the viewer's generator from the candidates not
already in the ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, ComponentError, InterventionSpec, RoundView, RunSeams, UsageError, hookimpl
from townsquare.lib.items import Item, ItemInteractions

log = structlog.get_logger("townsquare.recommenders.rec_strategy")


class RecStrategyConfig(BaseModel):
    """``[plugins.rec_strategy]`` settings (defaults: the paper's fig. 4a)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="false: listed but off (a scenario's --set switch)")
    n: int = Field(1, ge=0, description="items of each page replaced by random ones")
    every: int = Field(1, ge=1, description="perturb pages every this many rounds")
    from_round: int = Field(20, ge=0, description="first round perturbed")
    page_size: int | None = Field(None, gt=0, description="items per page (default: the platform's)")


class RecStrategy:
    """An item recommender that perturbs ``base``'s pages; see the module docstring."""

    def __init__(self, base: Any, config: RecStrategyConfig | None = None, page_size: int = 5):
        self.base = base
        self.config = config or RecStrategyConfig()
        self.page_size = self.config.page_size or page_size
        self.round = 0

    def active(self, round: int) -> bool:
        cfg = self.config
        return cfg.enabled and cfg.n > 0 and round >= cfg.from_round and (round - cfg.from_round) % cfg.every == 0

    def on_round_start(self, round: int, now: datetime) -> Any:
        self.round = round
        observer = getattr(self.base, "on_round_start", None)
        return observer(round, now) if callable(observer) else None

    def rank_items(self, viewer: str, candidates: Sequence[Item], limit: int, rng: Any,
                   interactions: ItemInteractions) -> list[Item]:
        ranked = self.base.rank_items(viewer, candidates, limit, rng, interactions)
        if not self.active(self.round) or not ranked:
            return ranked
        return perturb(ranked, candidates, self.page_size, self.config.n, rng)

    def get_state(self) -> dict[str, Any]:
        return {"round": self.round}

    def set_state(self, state: dict[str, Any]) -> None:
        self.round = int(state.get("round", 0))


def perturb(ranked: list[Item], candidates: Sequence[Item], page_size: int, n: int, rng: Any) -> list[Item]:
    """``ranked`` with the last ``n`` items of each ``page_size`` page replaced by random
    candidates not in ``ranked`` (fewer when the candidates run out)."""
    taken = {item.id for item in ranked}
    pool = [item for item in candidates if item.id not in taken]
    picks = iter(pool[int(i)] for i in rng.permutation(len(pool))) if pool else iter(())
    out = list(ranked)
    for start in range(0, len(out), page_size):
        page = range(start, min(start + page_size, len(out)))
        for pos in list(page)[-n:]:
            replacement = next(picks, None)
            if replacement is None:
                return out
            out[pos] = replacement
    return out


class RecStrategyIntervention:
    """The intervention that installs :class:`RecStrategy`, acts in the rounds it perturbs the
    pages and reports it per round."""

    def __init__(self, config: RecStrategyConfig, platform: Any):
        self.wrapper = RecStrategy(platform.recommender, config, getattr(platform, "page_size", 5))
        platform.recommender = self.wrapper

    def acts_at(self, round: int) -> bool:
        return self.wrapper.active(round)

    async def intervene(self, seams: RunSeams, round: int) -> None:
        """The wrapper perturbs this round's pages (it is told the round before any turn)."""
        self.wrapper.round = round
        log.debug("rec_strategy.perturbing", round=round, n=self.wrapper.config.n)

    def on_round_start(self, round: int, now: datetime) -> None:
        # every round (where the turns run, a shard's copy too): the wrapper perturbs the pages
        # of a round it is active in; the base recommender hears the round from the engine itself
        self.wrapper.round = round

    async def measure(self, view: RoundView) -> dict[str, float]:
        return {"active": float(self.wrapper.active(view.round))}

    def get_state(self) -> dict[str, Any]:
        return self.wrapper.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.wrapper.set_state(state)


def build_rec_strategy(config: RecStrategyConfig | None, ctx: BuildContext) -> RecStrategyIntervention:
    platform = ctx.services.platform if ctx.services is not None else None
    if platform is None or not hasattr(platform, "recommender") or not hasattr(platform.recommender, "rank_items"):
        raise ComponentError("rec_strategy needs the platform 'recsys' with an item recommender")
    config = config or RecStrategyConfig()
    page = config.page_size or getattr(platform, "page_size", 5)
    if config.n > page:
        raise UsageError(f"plugins.rec_strategy.n = {config.n}: a page has {page} items; at most {page} can be replaced")
    rounds = ctx.scenario.rounds if getattr(ctx, "scenario", None) is not None else None
    if config.enabled and config.n > 0 and rounds is not None and config.from_round >= rounds:
        raise UsageError(f"plugins.rec_strategy.from_round = {config.from_round}: the run has rounds 0..{rounds - 1}, "
                         "so it would never act (set enabled = false for a control run)")
    return RecStrategyIntervention(config, platform)


@hookimpl
def townsquare_register_interventions():
    return [InterventionSpec("rec_strategy", build_rec_strategy, config_model=RecStrategyConfig,
                       description="Rec-Strategy (RecAgent fig. 4): n random items per page every k rounds from round R")]
