"""Monitor ``repetition``: agents repeating their own posts.

Each new post is compared (cosine of the run embedder's vectors) with the same author's last
``memory`` posts; it counts as a repeat when the highest similarity reaches ``similarity``
(0.9). The value is the share of repeats among the posts of the last ``window`` rounds; above
``threshold`` (0.3) the run is flagged. Defaults are ours.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
from pydantic import Field

from townsquare.api import MetricSpec, RoundView, hookimpl

from .threshold import Alarm, MonitorConfig, new_posts


class RepetitionConfig(MonitorConfig):
    threshold: float = Field(0.3, ge=0, le=1)
    similarity: float = Field(0.9, gt=0, le=1)
    memory: int = Field(10, gt=0)
    window: int = Field(6, gt=0)
    max_posts: int = Field(500, gt=0)


class Repetition:
    def __init__(self, config: RepetitionConfig, ctx: Any):
        self.config = config
        self.embedder = ctx.services.embedder
        self.alarm = Alarm("repetition", config.threshold, hint="agents keep posting what they posted before")
        self.recent: dict[str, list[np.ndarray]] = {}
        self.rounds: deque[tuple[int, int]] = deque(maxlen=config.window)  # (posts, repeats) per round

    async def measure(self, view: RoundView) -> dict[str, float]:
        posts = await new_posts(view, self.config.max_posts)
        repeats = 0
        if posts:
            vectors = await self.embedder.embed([p.text for p in posts])
            for post, vector in zip(posts, vectors):
                earlier = self.recent.setdefault(post.author_id, [])
                if earlier and float(np.max(np.stack(earlier) @ vector)) >= self.config.similarity:
                    repeats += 1
                earlier.append(np.asarray(vector, dtype=np.float32))
                del earlier[:-self.config.memory]
        self.rounds.append((len(posts), repeats))
        total = sum(n for n, _ in self.rounds)
        share = sum(r for _, r in self.rounds) / total if total else 0.0
        return self.alarm.check(view.round, share, repeats=repeats)

    def get_state(self) -> dict[str, Any]:
        return {"alarm": self.alarm.get_state(), "rounds": list(self.rounds),
                "recent": {a: np.stack(v) for a, v in self.recent.items() if v}}

    def set_state(self, state: dict[str, Any]) -> None:
        self.alarm.set_state(state.get("alarm", {}))
        self.rounds = deque((tuple(r) for r in state.get("rounds", [])), maxlen=self.config.window)
        self.recent = {a: list(np.asarray(v, dtype=np.float32)) for a, v in state.get("recent", {}).items()}


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("repetition", lambda config, ctx: Repetition(config or RepetitionConfig(), ctx), config_model=RepetitionConfig,
                       priority=50, description="run health: share of posts that repeat the author's own recent posts")]
