"""Monitor ``homogenisation``: posts of different agents converging.

The value is the mean cosine similarity between posts of *different* authors among the posts
of the last ``window`` rounds (at most ``sample`` of the newest, so the cost stays bounded);
above ``threshold`` (0.8, ours) the run is flagged: everyone is saying the same thing.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
from pydantic import Field

from townsquare.api import MetricSpec, RoundView, hookimpl
from .blas import one_blas_thread

from .threshold import Alarm, MonitorConfig, new_posts


class HomogenisationConfig(MonitorConfig):
    threshold: float = Field(0.8, ge=-1, le=1)
    window: int = Field(3, gt=0)
    sample: int = Field(200, gt=1)


class Homogenisation:
    def __init__(self, config: HomogenisationConfig, ctx: Any):
        self.config = config
        self.embedder = ctx.services.embedder
        self.alarm = Alarm("homogenisation", config.threshold, hint="posts of different agents are converging")
        self.window: deque[list[tuple[str, str]]] = deque(maxlen=config.window)  # (author, text) per round

    async def measure(self, view: RoundView) -> dict[str, float]:
        posts = await new_posts(view, self.config.sample)
        self.window.append([(p.author_id, p.text) for p in posts])
        pool = [item for items in self.window for item in items][-self.config.sample:]
        authors = np.array([a for a, _ in pool])
        if len(set(authors.tolist())) < 2:
            return {}
        vectors = await self.embedder.embed([t for _, t in pool])
        with one_blas_thread():  # a few hundred rows: a second thread only spins (.blas)
            similarity = vectors @ vectors.T
        different = authors[:, None] != authors[None, :]
        return self.alarm.check(view.round, float(similarity[different].mean()))

    def get_state(self) -> dict[str, Any]:
        return {"alarm": self.alarm.get_state(), "window": [list(map(list, items)) for items in self.window]}

    def set_state(self, state: dict[str, Any]) -> None:
        self.alarm.set_state(state.get("alarm", {}))
        self.window = deque(([tuple(p) for p in items] for items in state.get("window", [])), maxlen=self.config.window)


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("homogenisation", lambda config, ctx: Homogenisation(config or HomogenisationConfig(), ctx),
                       config_model=HomogenisationConfig, priority=50,
                       description="run health: mean similarity of recent posts by different agents")]
