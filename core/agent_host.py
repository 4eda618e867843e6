"""The agents one process holds: the local :class:`~townsquare.turns.Turns`.

In one process the world (:class:`~townsquare.world.World`) holds every agent in one host, and
the round loop plays its turns here. On Ray (:mod:`townsquare.scaleout.ray_backend`) each shard
holds a host of its own agents, and the driver none (it keeps each agent's id, index, population
and persona: what ordering, the platform and the metrics need), unless the platform hands agents
to each other (``members``), where the driver holds every agent too, for the metrics and the
checkpoints.

A host plays round ``r`` of the agents it is given (:meth:`take_turns`, the engine's step 2),
tells their components what the platform answered to their actions (:meth:`applied`),
and keeps each agent's checkpoint entry encoded between checkpoints, encoding again only the
agents whose components may have changed (:meth:`entries`). Arrays over the run's agents (the
activity draw, who may take the batch path) are indexed by agent index over the whole run, so a
shard's draws equal the single process's.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from . import state
from .activity import active_agents, active_probabilities, hour_weight
from .actions import Action, ActionResult
from .batch_turns import batch_eligible, check_actions, take_turns_batch
from .components import Agent, StepContext
from .errors import RunStopped
from .llm_faults import LLMFault
from .platform import platform_actions


class AgentHost:
    """The local turns (:class:`~townsquare.turns.Turns`). ``agents``: the agents held here, in
    index order; ``population``: how many agents the run has; ``levels``: every agent's activity
    level, by index (:func:`townsquare.assembly.assemble`)."""

    def __init__(self, agents: list[Agent], *, population: int, levels: np.ndarray, streams: Any, services: Any,
                 model: Any, platform_name: str, stages: dict[str, list], accounting: Any = None):
        self.agents = agents
        self.population = population
        self.levels = levels
        self.streams = streams
        self.services = services
        self.model = model
        self.platform_name = platform_name
        self.stages = stages
        #: the LLM client's accounting link (refuses new calls when a turn fails); None without an LLM
        self.accounting = accounting
        self.by_id = {agent.id: agent for agent in agents}
        #: an agent's position among ``agents`` by its index (-1: not held here)
        self.position = np.full(population, -1, dtype=np.int64)
        self.position[[agent.index for agent in agents]] = np.arange(len(agents))
        self._activity: tuple[int, np.ndarray] | None = None
        self._probabilities: tuple[list[float], np.ndarray] | None = None
        self._eligible: np.ndarray | None = None
        self._entries: list[str] | None = None
        #: per position: the agent's checkpoint entry must be encoded again
        self._stale: np.ndarray | None = None
        #: the reflections recorded since :meth:`take_reflections` (:meth:`StepContext.record_reflection`)
        self.reflections: list[tuple] = []

    # ------------------------------------------------------------------ what a turn reads

    def feed_authors(self, population: str, round: int) -> frozenset[str] | None:
        """The authors a population's feeds may show in ``round`` (None: everyone)."""
        for start, end, authors in self.stages.get(population, ()):
            if round >= start and (end is None or round < end):
                return authors
        return None

    def activity_drawn(self, r: int) -> np.ndarray:
        """Whether each agent of the run (by index) is active in round ``r`` by the activity model
        (:func:`townsquare.activity.active_agents`); a planner may overrule it. One numpy pass a round."""
        if self._activity is None or self._activity[0] != r:
            clock, populations = self.model.clock, self.model.populations
            start = clock.start + timedelta(minutes=r * clock.minutes_per_round)
            weights = [hour_weight((p.activity or self.model.activity).hourly, start, clock.minutes_per_round) for p in populations]
            if self._probabilities is None or self._probabilities[0] != weights:
                rates = self.levels * np.repeat(weights, [p.count for p in populations])
                self._probabilities = (weights, active_probabilities(rates, clock.minutes_per_round))
            self._activity = (r, active_agents(self.streams.activity_uniforms(r), self._probabilities[1]))
        return self._activity[1]

    def batch_eligible(self) -> np.ndarray:
        """Per agent of the run (by index): whether its turn may take the batch path
        (:func:`townsquare.batch_turns.batch_eligible`; False for agents not held here)."""
        if self._eligible is None:
            self._eligible = batch_eligible(self.agents, self.population)
        return self._eligible

    def context(self, agent: Agent, r: int, now: Any, *, feed: bool = True) -> StepContext:
        llm = self.services.llm
        return StepContext(agent=agent, round=r, now=now, minutes_per_round=self.model.clock.minutes_per_round,
                           services=self.services, llm=llm.for_agent(agent.id) if llm else None,
                           feed_authors=self.feed_authors(agent.population, r) if feed else None, start=self.model.clock.start,
                           reflections=self.reflections)

    def take_reflections(self) -> list[tuple]:
        """The reflections recorded since the last call, as ``(index, seq, row)``."""
        taken, self.reflections[:] = list(self.reflections), []
        return taken

    # ------------------------------------------------------------------ a round

    async def take_turns(self, r: int, present: list[Agent], now: Any) -> list[tuple[bool, list[Action]]]:
        """Step 2 of a round: every present agent's turn, concurrently (at most
        ``engine.concurrency`` at once); ``(active, actions)`` per agent, in ``present``'s order.
        Platform reads happen here, writes do not: the caller applies the actions in order."""
        accepted = platform_actions(self.services.platform)
        drawn_by_index = self.activity_drawn(r)

        async def turn(agent: Agent) -> tuple[bool, list[Action]]:
            ctx = self.context(agent, r, now)
            drawn = bool(drawn_by_index[agent.index])
            planner = agent.components.get("planner")
            verdict = None
            if planner is not None:
                plan_turn = getattr(planner, "plan_turn", None)
                if plan_turn is not None:  # the verdict and what the planner read, for the policy
                    planned = await plan_turn(ctx)
                    verdict, ctx.plan = planned.active, planned.plan
                else:
                    verdict = await planner.is_active(ctx)
            active = drawn if verdict is None else bool(verdict)
            actions: list[Action] = []
            if active:
                actions += await agent.components["policy"].step(ctx) or []
            reflector = agent.components.get("reflector")
            if reflector is not None:
                actions += await reflector.reflect(ctx) or []
            check_actions(agent, actions, accepted, self.platform_name)
            return active, actions

        results = await take_turns_batch(self, r, present, now)  # None: the agent takes its turn alone
        await run_turns(turn, present, results, self.model.engine.concurrency, self._settle)
        return results

    async def _settle(self, workers: list[asyncio.Future], exc: BaseException) -> None:
        """One turn failed or the run is interrupted: refuse new LLM calls, let the calls in
        flight land (their paid answers go to the cache, for the resumed round) and wait for
        the turns under way, so none outlives the round. Interrupted turns are cancelled."""
        if self.accounting is not None:
            self.accounting.refuse = f"the run is stopping ({stop_reason(exc)})"
        if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
            for worker in workers:
                worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    def ran(self, present: list[Agent], results: list[tuple[bool, list[Action]]]) -> list[Agent]:
        """The agents whose components ran in a round's turns: every present agent off the batch
        path, the active ones on it (an idle batch-path agent runs nothing; see townsquare.batch_turns)."""
        eligible = self.batch_eligible()
        return [a for a, (active, _) in zip(present, results) if active or not eligible[a.index]]

    async def applied(self, agent: Agent, r: int, now: Any, applied: list[tuple[Action, ActionResult]]) -> None:
        """Tell ``agent``'s components (``on_applied``) what the platform answered to its actions."""
        ctx = None
        for component in agent.components.values():
            on_applied = getattr(component, "on_applied", None)
            if on_applied is not None:
                ctx = ctx or self.context(agent, r, now, feed=False)
                await on_applied(ctx, applied)

    async def round_applied(self, r: int, named: list[int]) -> None:
        """An agent an action named may have changed (a chat's partner)."""
        self.changed(named)

    async def on_agent(self, agent_id: str, change: Callable[["AgentHost", Agent, int], Any], r: int) -> None:
        """``await change(self, agent, r)`` on a held agent (an intervention); its entry is encoded again."""
        agent = self.by_id[agent_id]
        await change(self, agent, r)
        self.changed([agent.index])

    async def checkpoint(self, r: int) -> dict[str, Any]:
        """The held agents' entries, for the loop to write (:meth:`entries`)."""
        return {"agents": self.entries()}

    async def processes(self) -> list[dict[str, Any]]:
        return []  # the agents are this process's

    async def aclose(self) -> None:
        """Nothing to release: the world closes the components' services."""

    # ------------------------------------------------------------------ state

    def changed(self, agents: Iterable[int]) -> None:
        """The agents with these indices (those held here) may have changed outside their own
        turns (an action named them, a branch's intervention): their entries are encoded again."""
        if self._stale is None:
            return
        positions = self.position[np.fromiter(agents, dtype=np.int64)]
        self._stale[positions[positions >= 0]] = True

    def entries(self) -> Iterator[str]:
        """Each held agent's checkpoint entry (``"ID":{"components":{...}}``), in ``agents``'
        order, made as they are taken (a checkpoint writes each before the next is made). A
        batch-path agent's entry is kept encoded between checkpoints and encoded again only
        after a round it was active in or an action named it (:mod:`townsquare.batch_turns`):
        an inactive batch-path agent runs no component, so at a million agents a checkpoint
        encodes the round's active fifth, not everyone. Every other agent's entry is made anew
        each time and not kept (its components run every round: agents with memory streams
        would otherwise hold a second copy of their memories as text)."""
        if self._entries is None or self._stale is None:
            self._entries = [""] * len(self.agents)
            self._stale = np.ones(len(self.agents), dtype=bool)
        kept = self.batch_eligible()[[a.index for a in self.agents]] if self.agents else np.zeros(0, dtype=bool)
        entries, stale, encode = self._entries, self._stale, state.encoder().encode
        for position, agent in enumerate(self.agents):
            if stale[position] or not kept[position]:
                components = {slot: c.get_state() for slot, c in agent.components.items()}
                entry = f"{encode(agent.id)}:{encode({'components': components})}"
                entries[position] = entry if kept[position] else ""
                yield entry
            else:
                yield entries[position]
        stale[:] = False

    def entry_lines(self) -> Iterator[str]:
        """:meth:`entries` as the lines of a checkpoint's agent part: ``INDEX<tab>ENTRY``
        (:meth:`townsquare.rundir.RunDir.write_agent_part`)."""
        for agent, entry in zip(self.agents, self.entries()):
            yield f"{agent.index}\t{entry}"

    def restore(self, saved: Callable[[Agent], dict[str, Any] | None], fresh_slots: frozenset[tuple[str, str]] = frozenset()) -> None:
        """Set every held agent's components from its saved entry (``saved(agent)``: the
        checkpoint's ``{"components": {...}}``; None: the agent was not saved and keeps its
        built state); a slot in ``fresh_slots`` (``(population, slot)``: the component a branch
        changed) keeps the state it was built with."""
        self._entries = self._stale = None  # every entry is encoded again at the next checkpoint
        for agent in self.agents:
            entry = saved(agent)
            if entry is not None:
                restore_agent(agent, entry, fresh_slots)


def restore_agent(agent: Agent, saved: dict[str, Any], fresh_slots: frozenset[tuple[str, str]] = frozenset()) -> None:
    """``agent``'s components from a checkpoint entry ``{"components": {slot: state}}``; a slot
    missing there, or listed in ``fresh_slots`` as ``(population, slot)``, keeps its built state.
    (An ``"rng"`` entry, in checkpoints before 2026-11, is not needed.)"""
    states = saved.get("components", {})
    for slot, component in agent.components.items():
        if slot in states and (agent.population, slot) not in fresh_slots:
            component.set_state(states[slot])


async def run_turns(turn: Callable[[Agent], Any], agents: list[Agent], results: list[Any], limit: int,
                    settle: Callable[[list[asyncio.Future], BaseException], Any]) -> None:
    """Set each ``results[k]`` that is ``None`` to ``await turn(agents[k])``, at most ``limit``
    turns at once, started in ``agents``' order.

    ``limit`` workers each take the next agent as their turn ends: a finished turn's place goes
    to the next agent in the same step of the event loop, with no task per agent and no wake-up
    through a semaphore (at 256 calls in flight that was one loop pass more per call, and 2,560
    tasks to make before the first call went out). When a turn raises, no worker starts
    another; ``settle(workers, exc)`` waits for the turns under way, then ``exc`` is raised."""
    todo = iter([k for k, done in enumerate(results) if done is None])
    stopping = False

    async def worker() -> None:
        for k in todo:  # one iterator for every worker: each agent is taken once
            if stopping:
                return
            results[k] = await turn(agents[k])

    workers = [asyncio.ensure_future(worker()) for _ in range(min(limit, len(agents)))]
    try:
        await asyncio.gather(*workers)
    except BaseException as exc:
        stopping = True
        await settle(workers, exc)
        raise


def stop_reason(exc: BaseException) -> str:
    """What a stopped round says: a :class:`RunStopped`'s reason, an LLM fault's description, else "interrupted"."""
    if isinstance(exc, RunStopped):
        return exc.reason
    if isinstance(exc, LLMFault):
        return f"LLM call failed: {exc.describe()}"
    return "interrupted"
