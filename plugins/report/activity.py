"""Per-round activity and the follower distribution.

``actions.<kind>``: this round's actions of each kind (every social action kind is reported,
zeros included, so each round has the same columns); ``actions.total``; ``actions.failed``
(those the platform refused, when the trace says so); ``agents.active``: distinct agents that
acted. ``followers.mean``, ``followers.max`` and ``followers.gini`` summarise follower counts
over all agents; the Gini coefficient tracks how concentrated attention becomes as the follow
graph grows (0: everyone has as many followers; near 1: one account holds them all).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from townsquare.api import MetricSpec, RoundView, hookimpl, SOCIAL_ACTIONS


def gini(values: Sequence[float]) -> float:
    """Gini coefficient of non-negative values: ``sum_i (2i - n - 1) x_(i) / (n sum x)`` over
    the values sorted ascending, i = 1..n. 0 when all are equal or all are zero."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    total = x.sum()
    if n == 0 or total <= 0:
        return 0.0
    ranks = np.arange(1, n + 1, dtype=np.float64)
    return float(np.dot(2 * ranks - n - 1, x) / (n * total))


async def follower_counts(view: RoundView) -> list[int]:
    """Every agent's follower count (agents without an account left out): in one call where the
    platform offers ``follower_counts(agent_ids)`` (the in-memory platform), else a profile each."""
    ids = [agent.id for agent in view.agents]
    bulk = getattr(view.platform, "follower_counts", None)
    if bulk is not None:
        return [n for n in await bulk(ids) if n is not None]
    counts = []
    for agent_id in ids:
        account = await view.platform.profile(agent_id)
        if account is not None:
            counts.append(account.followers)
    return counts


class ActivityMetric:
    """Counts actions and summarises followers at each round's end."""

    async def measure(self, view: RoundView) -> dict[str, float]:
        kinds = Counter(action["kind"] for action in view.actions)
        out: dict[str, float] = {f"actions.{kind}": 0.0 for kind in sorted(SOCIAL_ACTIONS)}
        out.update({f"actions.{kind}": float(n) for kind, n in kinds.items()})
        out["actions.total"] = float(len(view.actions))
        out["actions.failed"] = float(sum(1 for a in view.actions if a.get("ok", True) is False))
        out["agents.active"] = float(len({action["agent_id"] for action in view.actions}))

        counts = await follower_counts(view)
        out["followers.mean"] = float(np.mean(counts)) if counts else 0.0
        out["followers.max"] = float(max(counts)) if counts else 0.0
        out["followers.gini"] = gini(counts)
        return out

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_activity(config: None, ctx: Any) -> ActivityMetric:
    return ActivityMetric()


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("activity", build_activity, priority=100,
                       description="actions per kind, active agents, follower mean/max/Gini")]
