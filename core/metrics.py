"""The metric protocol: measurements taken at the end of each round.

A metric returns ``{name: value}``; the engine stores each value in the run's ``metrics``
table with the round number. ``townsquare report`` and notebooks read them from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from .components import Agent
    from .platform import Platform


@dataclass
class RoundView:
    """What a metric sees at the end of a round. ``now`` is the round's simulated time (ISO);
    ``actions`` are the round's applied actions as stored (``agent_id``, ``kind``, ``ok``,
    ``target_post``, ``target_agent``, ``text``, ``post_ids``, ``created_id``, ``detail``); ``platform`` may be read with the platform's read
    methods. The keys a metric returns are stored as ``METRIC_NAME.KEY`` (a metric named
    ``post_count`` returning ``{"posts": 3}`` writes ``post_count.posts``)."""

    round: int
    now: str
    platform: "Platform"
    agents: list["Agent"]
    actions: list[dict[str, Any]]  # this round's applied actions, as stored
    #: the agents by id (the engine passes its own index; built from ``agents`` when not given)
    by_id: dict[str, "Agent"] = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.by_id is None:
            self.by_id = {agent.id: agent for agent in self.agents}


@runtime_checkable
class Metric(Protocol):
    async def measure(self, view: RoundView) -> dict[str, float]: ...

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...
