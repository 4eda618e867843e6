"""The world: one assembled run (its agents, platform, recommender, metrics, interventions, LLM
with its journal), its state and its restore.

Whatever opens a scenario's agents opens a world: the round loop plays one
(:mod:`townsquare.engine`), an interview and an evaluation question one's agents at a round
(:meth:`World.open`), a branch restores one from another run's checkpoint, and a backend's worker
builds the part of one whose agents it holds (``build(held=...)``). A world plays nothing by
itself and fires no hook: its calls go to its :class:`~townsquare.llm_journal.LLMJournal`, whose
listeners the opener chooses (the round loop's ``townsquare_on_llm_call``; an evaluation none).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Callable, Iterable

from .agent_host import AgentHost
from .assembly import agent_rows, assemble
from .components import Agent, StepContext
from .llm_journal import LLMJournal
from .process_usage import rss_bytes
from .rundir import RunDir
from .scenario import ResolvedScenario
from .slots import notify_round_start, round_observers
from .store import EventStore

import structlog

log = structlog.get_logger("townsquare.world")


class World:
    """A scenario assembled into ``run_dir`` (see the module docstring).

    ``run_dir``: the folder (or its :class:`~townsquare.rundir.RunDir`); ``journal``: where its
    LLM calls go (default: a new :class:`LLMJournal`); ``llm_provider`` replaces the scenario's
    (a replay's; an estimate's stand-in, whose fallbacks warn nobody); ``llm_middleware`` links go
    inside the configured ones; ``events``: whether it keeps ``events.sqlite`` in ``run_dir``."""

    def __init__(self, scenario: ResolvedScenario, run_dir: RunDir | str, *, journal: LLMJournal | None = None,
                 llm_provider: Any = None, llm_middleware: list[Any] | None = None, events: bool = True):
        self.scenario = scenario
        self.model = scenario.model
        self.run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.journal = journal if journal is not None else LLMJournal()
        self.journal.warn_fallbacks = not getattr(llm_provider, "stand_in", False)
        #: the running totals (rounds, actions, posts, LLM calls...: :func:`townsquare.llm_journal.new_totals`)
        self.totals = self.journal.totals
        self.llm_provider = llm_provider
        self.llm_middleware = list(llm_middleware or [])
        self.events = events
        self.store: EventStore | None = None
        self.services: Any = None
        self.platform: Any = None
        self.provider: Any = None
        self.accounting: Any = None
        self.agents: list[Agent] = []
        self.by_id: dict[str, Agent] = {}
        self.metrics: list[tuple[str, Any]] = []
        self.interventions: list[tuple[str, Any]] = []
        #: the agents this process holds with their components (None: built without them)
        self.host: AgentHost | None = None
        #: the round of the checkpoint the world was restored from (None: as built)
        self.restored_from: int | None = None
        #: ``(population, slot)`` whose components kept the state they were built with at the restore
        self.fresh_slots: frozenset[tuple[str, str]] = frozenset()
        self.rss_before_build: int | None = None

    # ------------------------------------------------------------------ opening

    async def build(self, *, components: bool = True, held: dict[int, Any] | None = None,
                    on_phase: Callable[[str], None] | None = None) -> None:
        """Assemble the scenario (:func:`townsquare.assembly.assemble`: ``components=False``
        builds the agents' personas but not their components, a worker's ``held`` only the
        agents it is given; ``on_phase(text)`` hears what is being built). The ``agents`` table is filled when the world keeps events."""
        self.rss_before_build = rss_bytes()
        if self.events:
            self.store = EventStore(self.run_dir.events_path)
        built = await assemble(self.scenario, str(self.run_dir.path), llm_provider=self.llm_provider,
                               llm_middleware=self.llm_middleware, on_llm_call=self.journal.record,
                               current_round=self.journal.current_round, components=components, held=held,
                               on_phase=on_phase)
        self.services, self.platform, self.metrics, self.agents = built.services, built.services.platform, built.metrics, built.agents
        self.llm_middleware, self.interventions = built.llm_middleware, built.interventions
        self.provider, self.accounting = built.provider, built.accounting
        self.streams, self.population, self.levels, self.stages = built.streams, built.population, built.levels, built.stages
        self.by_id = {agent.id: agent for agent in self.agents}
        self.journal.order = {agent.id: agent.index for agent in self.agents}
        if not built.partial:
            self.host = self.agent_host(self.agents)

    def agent_host(self, agents: list[Agent]) -> AgentHost:
        """The local turns of ``agents`` (built here with their components): all of them, or a
        worker's own (:class:`~townsquare.agent_host.AgentHost`)."""
        return AgentHost(agents, population=self.population, levels=self.levels, streams=self.streams, services=self.services,
                         model=self.model, platform_name=self.scenario.platform.spec.name, stages=self.stages,
                         accounting=self.accounting)

    def record_agents(self) -> None:
        """The ``agents`` table's rows (id, index, population, persona, activity, presence)."""
        self.store.add_agents(agent_rows(self.agents))

    @classmethod
    async def open(cls, scenario: ResolvedScenario, folder: RunDir | str, *, state: dict[str, Any] | None = None, round: int = -1,
                   llm_provider: Any = None, llm_middleware: list[Any] | None = None, resume_command: str | None = None) -> "World":
        """A world to question, never played: built in ``folder`` (its ``events.sqlite`` keeps the
        calls' rows, its response cache the answers), set to ``state`` at ``round``
        (:meth:`question_at`); a budget stop names ``resume_command``. :meth:`write_calls`, then
        :meth:`aclose`."""
        world = cls(scenario, folder, llm_provider=llm_provider, llm_middleware=llm_middleware)
        try:
            await world.build()
            world.question_at(round, state)
            world.services.resume_command = resume_command
        except BaseException:
            await world.aclose()
            raise
        return world

    def question_at(self, round: int, state: dict[str, Any] | None = None) -> None:
        """Set an opened world to a checkpoint's ``state`` (None: as it is; its ``llm`` part left
        out) with its clock at ``round``, where the calls after are recorded."""
        if state is not None:
            self.set_state({key: value for key, value in state.items() if key != "llm"})
        self.journal.round = round

    # ------------------------------------------------------------------ time

    def time_of(self, round: int) -> datetime:
        """Round ``round``'s simulated time."""
        clock = self.model.clock
        return clock.start + timedelta(minutes=round * clock.minutes_per_round)

    def now(self, round: int) -> str:
        """Round ``round``'s simulated time (ISO), as the event store writes it."""
        return self.time_of(round).isoformat()

    def start_round(self, round: int) -> None:
        """Calls are recorded in ``round`` from now on, and the agents draw its random numbers."""
        self.journal.round = round
        self.streams.start_round(round)

    def round_observers(self, *, measures: bool, agents: list[Agent]) -> list[Any]:
        """The ``on_round_start`` methods of the platform, the recommender, (``measures``) the
        metrics and interventions, the LLM links and ``agents``' components, in that order."""
        run_wide = [*(m for _, m in self.metrics), *(i for _, i in self.interventions)] if measures else []
        return round_observers([self.platform, self.services.recommender, *run_wide, *self.llm_middleware,
                                *(c for a in agents for c in a.components.values())])

    async def notify_round_start(self, observers: list[Any], round: int) -> None:
        await notify_round_start(observers, round, self.time_of(round))

    def context(self, agent: Agent, round: int) -> StepContext:
        """``agent``'s step context at ``round`` (an interview's, an evaluation's: no feed stage,
        no reflections recorded)."""
        clock = self.model.clock
        llm = self.services.llm.for_agent(agent.id) if self.services.llm is not None else None
        return StepContext(agent=agent, round=round, now=self.time_of(round), minutes_per_round=clock.minutes_per_round,
                           services=self.services, llm=llm, start=clock.start)

    # ------------------------------------------------------------------ calls

    def take_in_calls(self, records: list[Any]) -> None:
        """LLM call records made elsewhere (a worker's), as if made here: the journal and the
        accounting's observers (the budget counts them)."""
        observers = getattr(self.accounting, "observers", ())
        record = self.journal.record
        for call in records:
            record(call)
            for observer in observers:
                observer(call)

    def write_calls(self) -> list[tuple]:
        """Write the ``llm_calls`` rows kept since the last write (calls that no round writes:
        an evaluation's, a build's); returns them."""
        return self.journal.write(self.store)

    # ------------------------------------------------------------------ state

    def get_state(self, round: int, agents: bool = True) -> dict[str, Any]:
        """The world's state after ``round`` (a checkpoint's content); ``agents=False`` leaves
        the agents out (a checkpoint writes them from its turns: :meth:`Turns.checkpoint`)."""
        state = {
            "version": 1,
            "round": round,
            "platform": self.platform.get_state(),
            "recommender": self.services.recommender.get_state(),
            "metrics": {name: metric.get_state() for name, metric in self.metrics},
            "interventions": {name: i.get_state() for name, i in self.interventions if hasattr(i, "get_state")},
            "llm": {_key(m): m.get_state() for m in self.llm_middleware if hasattr(m, "get_state")},
            "totals": dict(self.totals),
            "prompt_cache": self.journal.prefix_index.get_state(),
        }
        if agents and self.host is not None:
            # no generator state: an agent's draws come from the seed and the round (townsquare.random_streams)
            state["agents"] = {a.id: {"components": {s: c.get_state() for s, c in a.components.items()}} for a in self.agents}
        return state

    def changed_slots(self, written_by: list[dict[str, str]] | None) -> frozenset[tuple[str, str]]:
        """``(scope, slot)`` filled now by another component than in ``written_by`` (the slot
        table of the run that wrote a checkpoint; None: this run's own)."""
        if written_by is None:
            return frozenset()
        before = {(row["scope"], row["slot"]): row["component"] for row in written_by}
        now = {(row["scope"], row["slot"]): row["component"] for row in self.scenario.slot_table()}
        return frozenset(key for key, component in now.items() if before.get(key) != component)

    def set_state(self, state: dict[str, Any], restored_from: int | None = None) -> None:
        """Take a checkpoint's state (``restored_from``: its round). The agents are restored
        where they are held: here, or (a backend whose workers hold them) by the workers, from
        the checkpoint's files of ``restored_from``.

        A checkpoint another run wrote (a branch's start) names that run's slot table
        (``slot_table``): a component that differs now keeps the state it was built with, as
        does a metric or intervention the checkpoint has no state for."""
        self.restored_from = restored_from
        self.fresh_slots = changed = self.changed_slots(state.get("slot_table"))
        self.platform.set_state(state["platform"])
        if ("run", self.scenario.recommender.slot) not in changed:
            self.services.recommender.set_state(state["recommender"])
        if self.host is not None:
            agents = state["agents"]
            self.host.restore(lambda agent: agents[agent.id], changed)
        for part, components in (("metrics", self.metrics), ("interventions", self.interventions)):
            for name, component in components:
                if name in state.get(part, {}):
                    component.set_state(state[part][name])
        for m in self.llm_middleware:
            if hasattr(m, "set_state") and _key(m) in state.get("llm", {}):
                m.set_state(state["llm"][_key(m)])
        self.totals.update(state.get("totals", {}))
        if "prompt_cache" in state:  # a checkpoint written before the column starts an empty index
            self.journal.prefix_index.set_state(state["prompt_cache"])

    def changed(self, agents: Iterable[int]) -> None:
        """The agents with these indices (those held here) changed outside their turns: the next
        checkpoint reads them again."""
        if self.host is not None:
            self.host.changed(agents)

    # ------------------------------------------------------------------ closing

    async def aclose(self) -> None:
        """Close the store, the platform, the knowledge source, the embedder, every LLM link and
        the provider; one that fails to close is logged and the others are still closed."""
        if self.store is not None:
            self.store.close()
        services = self.services
        embedder = getattr(getattr(services, "embedder", None), "embedder", None)
        for obj in [self.platform, getattr(services, "knowledge", None), embedder, *self.llm_middleware, self.provider]:
            if obj is None:
                continue
            try:
                await close(obj)
            except Exception as exc:  # noqa: BLE001 - closing must reach every other resource
                log.warning("run.close_failed", component=type(obj).__name__, error=f"{type(exc).__name__}: {exc}")


def _key(middleware: Any) -> str:
    return type(middleware).__name__


async def close(obj: Any) -> None:
    """Await ``obj.aclose()`` when it has one."""
    method = getattr(obj, "aclose", None)
    if method is not None:
        await method()


async def close_each(objects: Any) -> None:
    """:func:`close` each object (providers, embedders a command built beside a world), in order."""
    for obj in objects:
        await close(obj)
