"""Monitor ``silent_agents``: present agents that have done nothing for a while.

An agent is silent when it is present (between its population's start and end rounds), has
been present for ``window`` rounds, and none of its actions in the last ``window`` rounds
(24) was anything but ``browse``. The value is the share of present agents that are silent;
above ``threshold`` (0.5, ours) the run is flagged (a policy that never acts, a planner that
never wakes, a parser that always falls back to the safe default).
"""

from __future__ import annotations

from typing import Any

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

    async def measure(self, view: RoundView) -> dict[str, float]:
        for action in view.actions:
            if action["kind"] not in PASSIVE and action.get("ok", True):
                self.last_acted[action["agent_id"]] = view.round
        window = self.config.window
        watched = [a for a in view.agents if a.present(view.round) and view.round - a.start_round + 1 >= window]
        if not watched:
            return {}
        silent = sum(1 for a in watched if view.round - self.last_acted.get(a.id, a.start_round - 1) >= window)
        out = self.alarm.check(view.round, silent / len(watched), silent=silent)
        return {**out, "count": float(silent)}

    def get_state(self) -> dict[str, Any]:
        return {"alarm": self.alarm.get_state(), "last_acted": dict(self.last_acted)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.alarm.set_state(state.get("alarm", {}))
        self.last_acted = {k: int(v) for k, v in state.get("last_acted", {}).items()}


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("silent_agents", lambda config, ctx: SilentAgents(config or SilentAgentsConfig(), ctx),
                       config_model=SilentAgentsConfig, priority=50,
                       description="run health: share of present agents with no action but browsing for a window")]
