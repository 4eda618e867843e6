"""The recommender-system platform ``recsys`` (RecAgent's sandbox): an item catalogue served
by the run's item recommender, plus one-to-one chat and broadcast to friends.

``[platform] name = "recsys"`` with ``catalogue = "movielens"`` and ``path`` (a MovieLens
folder: ml-latest-small, ml-100k or ml-1m), ``"recagent"`` (RecAgent's item.csv) or
``"synthetic"``; the recommender must be an item recommender (``item_popularity``,
``item_random``, ``item_mf``, ``item_embedding``).

Commands: ``townsquare eval recommenders SOURCE`` (Recall@K, NDCG@K, coverage, Gini and
popularity bias of every item recommender on a MovieLens folder or a run) and ``townsquare
recbole RUN`` (a run's interactions as RecBole atomic files).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, PlatformSpec, UsageError, hookimpl

from .catalogue import Catalogue, load_movielens, load_recagent_items, synthetic_catalogue
from .platform import RECSYS_ACTIONS, RecsysPlatform

__all__ = ["RECSYS_ACTIONS", "Catalogue", "RecsysConfig", "RecsysPlatform", "load_catalogue"]


class RecsysConfig(BaseModel):
    """``[platform]`` settings of ``recsys``."""

    model_config = ConfigDict(extra="forbid")

    catalogue: Literal["movielens", "recagent", "synthetic"] = "synthetic"
    path: str | None = Field(None, description="movielens: a MovieLens folder (ml-latest-small, ml-100k, ml-1m); recagent: item.csv")
    max_items: int | None = Field(None, gt=0, description="keep the first N items (small runs)")
    synthetic_items: int = Field(40, gt=0)
    page_size: int = Field(5, gt=0, description="items per page (5 in the paper)")
    reshow: bool = Field(False, description="false: an item once shown to a user (page or search) is never recommended to them again, as in the reference code")
    exclude_seen: bool = Field(True, description="never recommend an item the user watched in the run or rated before it (persona history)")
    history_in_log: bool = Field(True, description="personas' earlier ratings (field history) enter the interaction log the recommender learns from")


def load_catalogue(config: RecsysConfig, base_dir: str = ".") -> Catalogue:
    if config.catalogue == "synthetic":
        return synthetic_catalogue(config.synthetic_items)
    if not config.path:
        raise UsageError(f"platform.path: catalogue {config.catalogue!r} needs a path")
    from pathlib import Path

    path = Path(config.path) if Path(config.path).is_absolute() else Path(base_dir) / config.path
    if config.catalogue == "movielens":
        return load_movielens(path, config.max_items)
    return load_recagent_items(path, config.max_items)


def build_recsys(config: RecsysConfig | None, ctx: BuildContext) -> RecsysPlatform:
    config = config or RecsysConfig()
    recommender = ctx.services.recommender if ctx.services is not None else None
    return RecsysPlatform(load_catalogue(config, ctx.base_dir), recommender, config.page_size, reshow=config.reshow,
                          exclude_seen=config.exclude_seen, history_in_log=config.history_in_log)


@hookimpl
def townsquare_register_commands(cli):
    from .commands import register

    register(cli)


@hookimpl
def townsquare_register_platforms():
    return [PlatformSpec("recsys", build_recsys, config_model=RecsysConfig, priority=-10,
                         description="RecAgent's recommender-system sandbox: items, pages, search, watch, chat, broadcast")]
