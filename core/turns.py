"""Where agents take their turns: the :class:`Turns` contract the round loop plays through.

Each round the loop (:mod:`townsquare.engine`) asks its turns for every present agent's
``(active, actions)`` (:meth:`Turns.take_turns`), applies the actions to the world's platform
itself, in agent order, tells the turns what the platform answered to each agent
(:meth:`Turns.applied`) and that the round's writes are done (:meth:`Turns.round_applied`),
takes the reflections the agents recorded (:meth:`Turns.take_reflections`) and, at a
checkpoint, what the checkpoint gets of the agents (:meth:`Turns.checkpoint`). Changes to an
agent from outside its turns (a branch's intervention) go through :meth:`Turns.on_agent`.

The agents of this process (:class:`townsquare.agent_host.AgentHost`, ``backend = "local"``)
and Ray actors (``scaleout``, ``backend = "ray"``) implement it; another backend is a plugin whose
``townsquare_engine_backend(name)`` returns a :class:`TurnsBackend`, written against
:mod:`townsquare.api` alone (docs/plugins.md). Every backend gives the local event log.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from .actions import Action, ActionResult
from .components import Agent

if TYPE_CHECKING:  # pragma: no cover
    from .world import World


@runtime_checkable
class Turns(Protocol):
    """The agents' turns of one run, wherever they are held."""

    async def take_turns(self, round: int, present: list[Agent], now: datetime) -> list[tuple[bool, list[Action]]]:
        """Every present agent's turn: ``(active, actions)`` per agent, in ``present``'s order.
        Platform reads happen here, writes do not (the loop applies the actions in order)."""

    async def applied(self, agent: Agent, round: int, now: datetime, applied: list[tuple[Action, ActionResult]]) -> None:
        """What the platform answered to ``agent``'s actions, told right after they were
        applied: its components' ``on_applied`` hear it (here, or where the agent is held)."""

    async def round_applied(self, round: int, named: list[int]) -> None:
        """Every write of the round is applied; ``named``: the indices of the agents an action
        named (a chat's partner), whose state may have changed."""

    def take_reflections(self) -> list[tuple]:
        """The reflections recorded since the last call, as ``(agent index, order, row)``."""

    async def on_agent(self, agent_id: str, change: Callable[[Any, Agent, int], Any], round: int) -> None:
        """``await change(host, agent, round)`` where the agent is held, before ``round``'s turns
        (a picklable callable: a branch's intervention)."""

    async def checkpoint(self, round: int) -> dict[str, Any]:
        """What round ``round``'s checkpoint gets of the agents: ``{"agents": entries}`` (each
        agent's ``"ID":{"components":{...}}``, in index order, written by the loop) or
        ``{"agent_parts": [file names]}`` (the turns wrote them: ``RunDir.write_agent_part``)."""

    async def processes(self) -> list[dict[str, Any]]:
        """The memory of every process besides this one that held agents
        (:func:`townsquare.process_usage.process_usage` each), for the manifest."""

    async def aclose(self) -> None:
        """Release what the turns hold (processes, actors); the world closes itself."""


@runtime_checkable
class TurnsBackend(Protocol):
    """What ``townsquare_engine_backend`` returns for ``[engine] backend = NAME``."""

    def connect(self, world: "World") -> Any:
        """Before the world is built: join or start what will hold the agents; what it
        returns (with a ``close()``, called if the build fails) is handed to :meth:`start`."""

    async def start(self, world: "World", connection: Any) -> Turns:
        """The run's turns, once ``world`` (built without agent components) is built."""

