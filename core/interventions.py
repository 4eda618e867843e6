"""The intervention slot: run-wide components that change the run at the start of chosen rounds.

A scenario lists them in ``interventions = [...]`` (none by default); a plugin registers them
through ``townsquare_register_interventions`` (:class:`~townsquare.specs.InterventionSpec`).
At the start of every round, before ``townsquare_on_round_start`` fires, the engine asks each
one, in the listed order, whether it acts in that round (``acts_at``) and, if so, awaits
``intervene(seams, round)``. An intervention changes the run only through the
:class:`RunSeams` it is handed: an action applied on the platform and recorded in the
``actions`` table, a change made to an agent where its components are held (here or in a
shard), an agent's persona replaced (the agent, its account and the ``agents`` table). Its
``get_state``/``set_state`` go into checkpoints; one with ``measure(view)`` is measured at
round ends as a metric is (``NAME.KEY`` rows in the ``metrics`` table).

RecAgent's Rec-Strategy and Soc-Strategy and a branch's changes (``townsquare branch``) are
interventions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

from .actions import Action, ActionResult
from .persona import Persona


@runtime_checkable
class Intervention(Protocol):
    def acts_at(self, round: int) -> bool: ...

    async def intervene(self, seams: "RunSeams", round: int) -> None: ...


class RunSeams:
    """What an intervention may change, through the engine that plays the run
    (``simulation``: the :class:`townsquare.engine.Simulation`)."""

    def __init__(self, simulation: Any):
        self._sim = simulation

    @property
    def platform(self) -> Any:
        return self._sim.platform

    @property
    def agents(self) -> dict[str, Any]:
        """The run's agents by id (with their personas; their components may be in shards)."""
        return self._sim._by_id

    def now(self, round: int) -> str:
        """Round ``round``'s simulated time (ISO)."""
        return self._sim.now(round)

    async def apply(self, action: Action, round: int) -> ActionResult:
        """Apply ``action`` on the platform and record it (``actions``, ``posts``, ``follows``)
        as the round's first rows; ``townsquare_on_action_applied`` fires."""
        sim, now = self._sim, self._sim.now(round)
        result = await sim.platform.apply(action, round, now)
        sim._record_action(round, now, action, result, [])
        sim.hook.townsquare_on_action_applied(run=sim.info, round=round, action=action, result=result)
        return result

    async def on_agent(self, agent_id: str, change: Callable[[Any, Any, int], Any], round: int) -> None:
        """``await change(host, agent, round)`` where the agent is held (a picklable callable:
        :meth:`townsquare.engine.Simulation.on_agent`)."""
        await self._sim.on_agent(self._sim._by_id[agent_id], change, round)

    async def set_persona(self, agent_id: str, persona: Persona, round: int) -> None:
        """Replace an agent's persona: the agent (where it is held), its platform account and
        its row in the ``agents`` table."""
        agent = self._sim._by_id[agent_id]
        agent.persona = persona
        await self.on_agent(agent_id, SetPersona(persona.to_dict()), round)
        await self._sim.platform.register_account(agent_id, persona.name, " ".join(persona.sentences[:2]))
        self._sim.store.update_persona(agent_id, persona.name, persona.to_dict())


@dataclass
class SetPersona:
    """A persona given to the agent where it is held (:meth:`RunSeams.set_persona`)."""

    persona: dict[str, Any]

    async def __call__(self, host: Any, agent: Any, r: int) -> None:
        agent.persona = Persona.from_dict(self.persona)
