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
    """What an intervention may change: the ``world`` the run plays, its agents where their
    ``turns`` hold them, and the event log through ``record(round, now, action, result)`` (the
    round loop's: the ``actions``, ``posts`` and ``follows`` rows, ``townsquare_on_action_applied``)."""

    def __init__(self, world: Any, turns: Any, record: Callable[[int, str, Action, ActionResult], None]):
        self.world, self.turns, self.record = world, turns, record

    @property
    def platform(self) -> Any:
        return self.world.platform

    @property
    def agents(self) -> dict[str, Any]:
        """The run's agents by id (with their personas; their components may be in workers)."""
        return self.world.by_id

    def now(self, round: int) -> str:
        """Round ``round``'s simulated time (ISO)."""
        return self.world.now(round)

    async def apply(self, action: Action, round: int) -> ActionResult:
        """Apply ``action`` on the platform and record it (``actions``, ``posts``, ``follows``)
        as the round's first rows; ``townsquare_on_action_applied`` fires."""
        now = self.world.now(round)
        result = await self.world.platform.apply(action, round, now)
        self.record(round, now, action, result)
        return result

    async def on_agent(self, agent_id: str, change: Callable[[Any, Any, int], Any], round: int) -> None:
        """``await change(host, agent, round)`` where the agent is held (a picklable callable:
        :meth:`townsquare.turns.Turns.on_agent`)."""
        await self.turns.on_agent(agent_id, change, round)

    async def set_persona(self, agent_id: str, persona: Persona, round: int) -> None:
        """Replace an agent's persona: the agent (where it is held), its platform account and
        its row in the ``agents`` table."""
        agent = self.world.by_id[agent_id]
        agent.persona = persona
        await self.on_agent(agent_id, SetPersona(persona.to_dict()), round)
        await self.world.platform.register_account(agent_id, persona.name, " ".join(persona.sentences[:2]))
        self.world.store.update_persona(agent_id, persona.name, persona.to_dict())


@dataclass
class SetPersona:
    """A persona given to the agent where it is held (:meth:`RunSeams.set_persona`)."""

    persona: dict[str, Any]

    async def __call__(self, host: Any, agent: Any, r: int) -> None:
        agent.persona = Persona.from_dict(self.persona)
