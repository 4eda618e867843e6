"""Monitor ``persona_drift``: agents' recent posts moving away from their persona.

For each agent, the similarity of a post to its persona is the cosine between the post's and
the persona text's vectors (the run embedder). An agent's baseline is the mean over its first
``window`` posts, its recent level the mean over its last ``window`` posts; its drift is
baseline minus recent. The value is the mean drift over the agents with at least
``2 * window`` posts; above ``threshold`` (0.15, ours) the run is flagged. A drop relative
to the agent's own start, not an absolute level, because absolute cosines depend on the
embedder.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from townsquare.api import MetricSpec, RoundView, hookimpl

from .threshold import Alarm, MonitorConfig, new_posts


class PersonaDriftConfig(MonitorConfig):
    threshold: float = Field(0.15, ge=0, le=2)
    window: int = Field(3, gt=0)
    max_posts: int = Field(500, gt=0)


class PersonaDrift:
    def __init__(self, config: PersonaDriftConfig, ctx: Any):
        self.config = config
        self.embedder = ctx.services.embedder
        self.alarm = Alarm("persona_drift", config.threshold, hint="agents' posts are moving away from their personas")
        self.first: dict[str, list[float]] = {}
        self.last: dict[str, list[float]] = {}
        self.counts: dict[str, int] = {}

    async def measure(self, view: RoundView) -> dict[str, float]:
        posts = await new_posts(view, self.config.max_posts)
        personas: dict[str, str] = {}  # the authors' alone: a population may be a million agents
        for post in posts:
            author = view.by_id.get(post.author_id)
            if author is not None and post.author_id not in personas:
                personas[post.author_id] = author.persona.text
        posts = [p for p in posts if personas.get(p.author_id)]
        if posts:
            vectors = await self.embedder.embed([p.text for p in posts])
            persona_vectors = await self.embedder.embed([personas[p.author_id] for p in posts])
            for post, sim in zip(posts, np.sum(vectors * persona_vectors, axis=1)):
                first = self.first.setdefault(post.author_id, [])
                if len(first) < self.config.window:
                    first.append(float(sim))
                self.counts[post.author_id] = self.counts.get(post.author_id, 0) + 1
                recent = self.last.setdefault(post.author_id, [])
                recent.append(float(sim))
                del recent[:-self.config.window]
        drifts = [np.mean(self.first[a]) - np.mean(self.last[a]) for a in self.first
                  if self.counts.get(a, 0) >= 2 * self.config.window]
        if not drifts:
            return {}
        return self.alarm.check(view.round, float(np.mean(drifts)), agents=len(drifts))

    def get_state(self) -> dict[str, Any]:
        return {"alarm": self.alarm.get_state(), "first": self.first, "last": self.last, "counts": self.counts}

    def set_state(self, state: dict[str, Any]) -> None:
        self.alarm.set_state(state.get("alarm", {}))
        self.first = {k: [float(x) for x in v] for k, v in state.get("first", {}).items()}
        self.last = {k: [float(x) for x in v] for k, v in state.get("last", {}).items()}
        self.counts = {k: int(v) for k, v in state.get("counts", {}).items()}


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("persona_drift", lambda config, ctx: PersonaDrift(config or PersonaDriftConfig(), ctx),
                       config_model=PersonaDriftConfig, priority=50,
                       description="run health: mean drop of post-to-persona similarity from an agent's first posts to its last")]
