"""The shared part of every monitor: a threshold crossed once logs one warning line."""

from __future__ import annotations

from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict

log = structlog.get_logger("townsquare.plugins.monitors")


class MonitorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Alarm:
    """``above=True``: the value is bad when it exceeds ``threshold`` (else when it falls
    below). Warns once per run; the flag is part of the checkpoint, so a resume stays quiet."""

    def __init__(self, name: str, threshold: float, above: bool = True, hint: str = ""):
        self.name, self.threshold, self.above, self.hint = name, threshold, above, hint
        self.warned = False

    def check(self, round: int, value: float | None, **detail: Any) -> dict[str, float]:
        if value is None:
            return {}
        bad = value > self.threshold if self.above else value < self.threshold
        if bad and not self.warned:
            self.warned = True
            log.warning(f"monitor.{self.name}", round=round, value=round_(value), threshold=self.threshold,
                        hint=self.hint, **detail)
        return {"value": float(value), "alert": float(bad)}

    def get_state(self) -> dict[str, Any]:
        return {"warned": self.warned}

    def set_state(self, state: dict[str, Any]) -> None:
        self.warned = bool(state.get("warned", False))


def round_(value: float) -> float:
    return float(f"{value:.4g}")


async def new_posts(view: Any, limit: int) -> list[Any]:
    """This round's original posts and comments (no reblogs), oldest first, from the platform's
    public timeline; none on a platform without one (the recsys platform)."""
    timeline = getattr(view.platform, "public_timeline", None)
    if timeline is None:
        return []
    posts = [p for p in await timeline(limit) if p.round == view.round and not p.reblog_of and p.text.strip()]
    return list(reversed(posts))
