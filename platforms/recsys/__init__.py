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

from townsquare.api import BuildContext, PlatformSpec, hookimpl

from .catalogue import Catalogue, RecsysConfig, load_catalogue
from .platform import RECSYS_ACTIONS, RecsysPlatform

__all__ = ["RECSYS_ACTIONS", "Catalogue", "RecsysConfig", "RecsysPlatform", "load_catalogue"]


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
