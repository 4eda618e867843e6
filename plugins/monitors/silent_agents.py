"""Monitor ``silent_agents``: present agents that have done nothing for a while.

An agent is silent when it is present (between its population's start and end rounds), has
been present for ``window`` rounds, and none of its actions in the last ``window`` rounds
(24) was anything but ``browse``. The value is the share of present agents that are silent;
above ``threshold`` (0.5, ours) the run is flagged (a policy that never acts, a planner that
never wakes, a parser that always falls back to the safe default).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from townsquare.api import MetricSpec, RoundView, hookimpl

from .threshold import Alarm, MonitorConfig

PASSIVE = frozenset({"browse"})


class SilentAgentsConfig(MonitorConfig):
    threshold: float = Field(0.5, ge=0, le=1)
    window: int = Field(24, gt=0)


class SilentAgents:
    def __init__(self, config: SilentAgentsConfig, ctx: Any):
        self.config = config
        self.alarm = Alarm("silent_agents", config.threshold, hint="many agents have not acted for a while")
        self.last_acted: dict[str, int] = {}
        # per agent of the population (its position in ``view.agents``): start and end round,
        # and the last round it acted; made once per population, so a round is a numpy pass
        self._population: tuple[Any, ...] | None = None

    def _columns(self, agents: list[Any]) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
        key = (id(agents), len(agents))
        if self._population is None or self._population[0] != key:
            position = {agent.id: k for k, agent in enumerate(agents)}
            start = np.fromiter((a.start_round for a in agents), dtype=np.int64, count=len(agents))
            never = np.iinfo(np.int64).max
            end = np.fromiter((never if a.end_round is None else a.end_round for a in agents), dtype=np.int64, count=len(agents))
            last = start - 1  # "never acted" counts from the round before it arrived
            for agent_id, round in self.last_acted.items():
                k = position.get(agent_id)
                if k is not None:
                    last[k] = round
            self._population = (key, position, start, end, last)
        return self._population[1:]

    async def measure(self, view: RoundView) -> dict[str, float]:
        position, start, end, last = self._columns(view.agents)
        r = view.round
        for action in view.actions:
            if action["kind"] not in PASSIVE and action.get("ok", True):
                self.last_acted[action["agent_id"]] = r
                k = position.get(action["agent_id"])
                if k is not None:
                    last[k] = r
        window = self.config.window
        watched = (r >= start) & (r < end) & (r - start + 1 >= window)
        count = int(watched.sum())
        if not count:
            return {}
        silent = int((watched & (r - last >= window)).sum())
        out = self.alarm.check(view.round, silent / count, silent=silent)
        return {**out, "count": float(silent)}

    def get_state(self) -> dict[str, Any]:
        return {"alarm": self.alarm.get_state(),
                "last_acted": {"ids": list(self.last_acted), "rounds": np.fromiter(self.last_acted.values(), dtype=np.int32,
                                                                                   count=len(self.last_acted))}}

    def set_state(self, state: dict[str, Any]) -> None:
        self.alarm.set_state(state.get("alarm", {}))
        saved = state.get("last_acted", {})
        if "ids" in saved:
            self.last_acted = dict(zip(saved["ids"], np.asarray(saved["rounds"]).tolist()))
        else:  # checkpoints before the columns: {agent: round}
            self.last_acted = {k: int(v) for k, v in saved.items()}
        self._population = None


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("silent_agents", lambda config, ctx: SilentAgents(config or SilentAgentsConfig(), ctx),
                       config_model=SilentAgentsConfig, priority=50,
                       description="run health: share of present agents with no action but browsing for a window")]
