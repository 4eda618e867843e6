"""The town platform ``town`` (Park et al.'s Smallville in text): an environment tree of
sectors, arenas and objects with states; agents move, use objects, talk and wait.

``[platform] name = "town"`` with ``path`` (a Smallville base folder: the town is the union of
its agents' spatial memories, each agent knows its own and starts in its ``living_area``) or
``world`` (a JSON file holding one tree ``{world: {sector: {arena: [objects]}}}``; agents then
know the whole town unless their persona has a ``spatial_memory`` field).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from townsquare.api import BuildContext, PlatformSpec, UsageError, hookimpl

from . import world
from .platform import TOWN_ACTIONS, TownPlatform
from .seed_files import read_base

__all__ = ["TOWN_ACTIONS", "TownConfig", "TownPlatform", "build_town", "world"]


class TownConfig(BaseModel):
    """``[platform]`` settings of ``town``."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(None, description="a Smallville base folder (personas/<Name>/bootstrap_memory/)")
    world: str | None = Field(None, description="a JSON file with the town's tree, instead of path")
    att_bandwidth: int = Field(8, gt=0, description="sentences perceived per round, at most (the seed files' att_bandwidth)")

    @model_validator(mode="after")
    def _one_source(self) -> "TownConfig":
        if bool(self.path) == bool(self.world):
            raise ValueError("give exactly one of path (a Smallville base folder) or world (a JSON tree file)")
        return self


def _resolve(name: str, base_dir: str) -> Path:
    return Path(name) if Path(name).is_absolute() else Path(base_dir) / name


def build_town(config: TownConfig | None, ctx: BuildContext) -> TownPlatform:
    if config is None:
        raise UsageError("platform 'town' needs path (a Smallville base folder) or world (a JSON tree file)")
    if config.path:
        base = read_base(_resolve(config.path, ctx.base_dir))
        return TownPlatform(world.World(base.town()), base.spatial, base.homes(), config.att_bandwidth)
    path = _resolve(config.world or "", ctx.base_dir)
    try:
        tree = world.read_tree(json.loads(path.read_text(encoding="utf-8")), str(path))
        return TownPlatform(world.World(tree), att_bandwidth=config.att_bandwidth)
    except OSError as exc:
        raise UsageError(f"platform.world: {path}: cannot read: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"platform.world: {path}: {exc}") from None


@hookimpl
def townsquare_register_platforms():
    return [PlatformSpec("town", build_town, config_model=TownConfig, priority=-10,
                         description="Park et al.'s Smallville in text: sectors, arenas, objects; move, use, talk, wait")]
