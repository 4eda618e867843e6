"""Components and what they receive.

An agent is a persona plus a dictionary ``slot -> component`` (Concordia's shape). Every
component implements ``get_state()``/``set_state(state)``, which must round-trip: checkpoints,
``resume`` and branching rely on it. Factories get a :class:`BuildContext`; each time an agent
is active its components get a :class:`StepContext`.

The protocols below are the kernel's whole contract with a component. Optional methods are
looked up with ``getattr``: a component implements only what its slot needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

from .actions import Action, ActionResult
from .persona import Persona

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .embedding import EmbeddingCache
    from .random_streams import AgentRandom
    from .knowledge import KnowledgeSource
    from .llm import LLMClient
    from .platform import Platform


@runtime_checkable
class Component(Protocol):
    """Every component, in every slot: its state as JSON-ready data (numpy arrays are fine),
    and back. ``set_state(get_state())`` must restore it exactly: checkpoints, ``resume`` and
    ``branch`` rely on it."""

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...


class Policy(Component, Protocol):
    """Slot ``policy``: decides what an active agent does this round."""

    async def step(self, ctx: "StepContext") -> list[Action]: ...


class Planner(Component, Protocol):
    """Slot ``planner``: asked every round whether the agent is active.

    Return True or False to decide, or None to leave it to the activity model. A planner may
    (re)build its plan inside this call (an LLM call is fine: planners run concurrently).
    Optional: ``async plan_turn(ctx) -> PlannedTurn``, asked instead of ``is_active`` when a
    planner offers it: the verdict and what the planner read for the turn (Zhou's session),
    which the turn's context hands the policy as ``ctx.plan`` (the plan is read once a turn).
    """

    async def is_active(self, ctx: "StepContext") -> bool | None: ...


@dataclass(frozen=True)
class PlannedTurn:
    """A planner's answer for one turn (:meth:`Planner.plan_turn`): whether the agent is active
    (None: the activity model decides) and the plan it read, for the policy (``ctx.plan``)."""

    active: bool | None
    plan: Any = None


class Reflector(Component, Protocol):
    """Slot ``reflector``: asked every round, active or not; keeps its own cadence and may
    return actions (a follow decided on reflection), applied after the policy's actions."""

    async def reflect(self, ctx: "StepContext") -> list[Action]: ...


class PersonaContext(Component, Protocol):
    """Slot ``persona.context``: the persona text a prompt shows for one action. ``query`` is
    the action's text (the post being judged, the topic of a post to write); a dynamic
    component retrieves only what is relevant to it (Zhou et al. §3.1.1)."""

    async def render(self, ctx: "StepContext", query: str) -> str: ...


class PersonaKnowledge(Component, Protocol):
    """Slot ``persona.knowledge``: the outside knowledge this agent may use on ``topic``
    (Zhou et al.'s knowledge boundary)."""

    async def knowledge_for(self, ctx: "StepContext", topic: str) -> list[Any]: ...


# Memory slots (memory.sensory, memory.short_term, memory.long_term, memory.stream) and the
# retrieval scorer (memory.retrieval) share one contract, kept in townsquare.memory (which
# names Agent and StepContext from here: this module imports nothing of it). What a design
# needs of a slot beyond its protocol it declares itself (ComponentSpec.requires: Zhou et al.'s
# duplicate check, townsquare.plugins.social_agent.memory.short_term_needs).


class ObservesResults(Protocol):
    """Optional for any component: told what the platform answered to its agent's actions."""

    async def on_applied(self, ctx: "StepContext", applied: list[tuple[Action, ActionResult]]) -> None: ...


class ObservesRounds(Protocol):
    """Optional for any component, run-wide (platform, recommender, metric, LLM middleware) or
    of an agent: called at the start of every round with the round number and its simulated
    time, after the ``townsquare_on_round_start`` hook (see :mod:`townsquare.slots`). May be
    ``async``. An age-based recommender keeps ``now`` from here."""

    def on_round_start(self, round: int, now: datetime) -> None: ...


@dataclass
class Services:
    """Run-wide services components may use. ``llm`` and ``knowledge`` may be None when the
    scenario configures none; a component that needs one fails at build time, naming itself."""

    platform: "Platform"
    embedder: "EmbeddingCache"
    recommender: Any = None
    llm: "LLMClient | None" = None
    knowledge: "KnowledgeSource | None" = None
    run_dir: str | None = None
    #: the command that continues this work after a clean stop (a budget): an evaluation names
    #: its own; None means a run's ``townsquare resume RUN_DIR``
    resume_command: str | None = None


@dataclass
class Agent:
    id: str
    index: int
    population: str
    persona: Persona
    activity: float
    #: the agent's random numbers: in a run, its generator of the current round
    #: (:class:`townsquare.random_streams.AgentRandom`: common random numbers across variants,
    #: nothing to checkpoint); any ``numpy.random.Generator`` elsewhere
    rng: "np.random.Generator | AgentRandom"
    components: dict[str, Any] = field(default_factory=dict)
    start_round: int = 0
    end_round: int | None = None

    def component(self, slot: str) -> Any | None:
        return self.components.get(slot)

    def present(self, round: int) -> bool:
        return round >= self.start_round and (self.end_round is None or round < self.end_round)


@dataclass
class BuildContext:
    """What a factory receives. ``agent`` is None for run-wide components (platform,
    recommender, metrics); for agent components it is the agent being built, whose
    ``components`` already holds the slots built before this one (see ``AGENT_SLOTS``).
    ``base_dir`` is the scenario file's folder: relative paths in configs resolve against it.
    Run-wide components are built in this order: embedder, LLM, knowledge, recommender,
    platform (whose ``services.platform`` is still None), metrics; then the agents."""

    services: Services | None
    seed: int
    base_dir: str = "."
    agent: Agent | None = None
    population: str | None = None
    #: the validated scenario (a ``townsquare.scenario.ScenarioModel``): engine settings such
    #: as ``scenario.engine.concurrency`` size connection pools.
    scenario: Any = None


@dataclass
class StepContext:
    """What a component sees while its agent acts. ``platform`` must only be read: writes go
    through returned :class:`Action` records."""

    agent: Agent
    round: int
    now: datetime
    minutes_per_round: int
    services: Services
    llm: "LLMClient | None" = None
    #: accounts whose posts this agent's feed may show now (its population's feed stage);
    #: None: every account
    feed_authors: "frozenset[str] | None" = None
    #: the simulated time of round 0
    start: datetime | None = None
    #: what the agent's planner read for this turn (its :class:`PlannedTurn`'s ``plan``: Zhou's
    #: session), so the policy reads the plan once per turn; None: no planner gave one
    plan: Any = None
    #: where :meth:`record_reflection` puts its rows (the agent host's; None: not recorded, as
    #: in an interview or an evaluation)
    reflections: "list[tuple] | None" = None

    def record_reflection(self, source: str, kind: str, text: str = "", ids: Sequence[str] = ()) -> None:
        """Say that this agent reflected: ``source`` the component, ``kind`` the reflection's
        kind (``reflection``, ``insight``, ``follow``), ``text`` what it wrote, ``ids`` what it
        produced by id (memory records, an account). One row of the run's ``reflections`` table,
        written with the round (in agent order, then in the order the agent reflected)."""
        if self.reflections is not None:
            row = (self.agent.id, source, kind, text, json.dumps(list(ids)) if ids else None)
            self.reflections.append((self.agent.index, len(self.reflections), row))

    @property
    def platform(self) -> "Platform":
        return self.services.platform

    async def home_timeline(self, limit: int) -> list[Any]:
        """This agent's feed: the platform's home timeline with the agent's generator and its
        population's feed stage applied. Policies should read feeds through this."""
        return await self.services.platform.home_timeline(self.agent.id, limit, rng=self.agent.rng, author_filter=self.feed_authors)

    @property
    def embedder(self) -> "EmbeddingCache":
        return self.services.embedder

    @property
    def rng(self) -> "np.random.Generator":
        return self.agent.rng

    def require_llm(self, component: str) -> "LLMClient":
        if self.llm is None:
            from .errors import ComponentError

            raise ComponentError(f"component {component!r} needs an LLM: add an [llm] table to the scenario")
        return self.llm
