"""One shard of a Ray run: an actor that holds some of the agents and takes their turns (see :mod:`townsquare.scaleout.ray_backend`).

A shard builds the run's world from the scenario as the driver does (:class:`~townsquare.api.World`,
same seeds): its own services, LLM client and copy of the platform. Its own agents are those
with index ``i % shards == shard`` (:func:`owner_of`), held in an
:class:`~townsquare.api.AgentHost` (``world.agent_host``): on most platforms a shard builds only them, with the
personas the driver loaded, and their state lives here alone (the driver keeps their personas;
a checkpoint's agents are written by their shards, :meth:`Shard.checkpoint`, and read back by
whichever shard owns them on a resume, whatever the number of shards). On a platform that hands
agents to each other (``members``: RecAgent's chat reads the partner's memory, the town's
conversations) a shard builds every agent and the others are replicas, set at each round's
start from the state their owners sent back.

Each round a shard takes its own agents' turns exactly as the single process does
(:meth:`townsquare.agent_host.AgentHost.take_turns`), with its own LLM client and connection
pool, and returns the actions and the ``llm_calls`` records; then it replays the round's writes
(every shard's actions, taken from Ray's object store) in the driver's order on its platform
copy, while the driver applies them, telling its agents' components what the platform answered
(``on_applied``) at the point the single process does, and returns those answers (and, with
replicas, the state of its agents the round touched). An answer that differs from the driver's
platform's is a :class:`ShardDiverged` error: the copies never drift silently.

:class:`LedgerBudget` and :class:`BudgetLedger` keep an LLM budget with limits global: every
call asks one ledger actor first, as every call asks the one budget link in a single process.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import os
import time
from operator import itemgetter
from typing import Any

import structlog

from townsquare.api import (
    COLLECTOR_THRESHOLDS, LLMCallRecord, LLMFault, LLMJournal, RunStopped, World, process_usage, restore_agent, stop_reason,
)

log = structlog.get_logger("townsquare.scaleout.ray_shard")

#: what a stopped round ends with in a shard (the calls in flight land first)
STOPS = (RunStopped, LLMFault)
#: :meth:`Shard.drain` answers at a quiet moment: no LLM answer for this long, which is the end
#: of a wave's answers (they come 0.1-0.3 ms apart within one); a value chosen here
QUIET_SECONDS = 0.005
#: ... or, when no quiet moment comes, this many times the driver's spacing after it asked
OVERDUE = 4


class ShardDiverged(RuntimeError):
    """A shard's platform copy answered a replayed write unlike the driver's platform."""


class Shard:
    """The actor (``ray.remote(Shard)``): some agents of a run and their services, no store and
    no plugin hooks; every method is a coroutine, so :meth:`stop` runs while turns are in flight."""

    def __init__(self, scenario: Any, run_path: str, shard: int, shards: int):
        self.scenario, self.model, self.run_path = scenario, scenario.model, run_path
        self.shard, self.shards = shard, shards
        self.round = -1
        #: the shard's part of the run; its calls are shipped to the driver's journal, not counted here
        self.world = World(scenario, run_path, journal=LLMJournal(listeners=[self.record_llm_call], counting=False),
                           events=False)
        self.records: list[LLMCallRecord] = []
        self.journals: list[ShippedJournal] = []
        #: when the last LLM record came (a drain waits for a quiet moment)
        self._last_record = 0.0
        self._turning = False
        #: set when a round's turns end (a drain waiting for a quiet moment stops waiting)
        self._turns_ended = asyncio.Event()
        self._ran: list[Any] = []
        from townsquare.lib import logs

        logs.configure(level=os.environ.get("TOWNSQUARE_LOG_LEVEL", "warning"))  # a worker's own logging
        gc.set_threshold(*COLLECTOR_THRESHOLDS)  # the worker plays this run only

    def record_llm_call(self, call: LLMCallRecord) -> None:
        self.records.append(call)
        self._last_record = time.monotonic()

    def _outcome(self, drained: bool = False, **out: Any) -> dict[str, Any]:
        """``out`` with the LLM records and the journal writes made since the last outcome and,
        unless ``drained`` (taken while the turns go on), the agents' reflections since then."""
        records, self.records = self.records, []
        host = getattr(self, "host", None)
        reflections = host.take_reflections() if host is not None and not drained else []
        return {**out, "records": records, "journal": [journal.take() for journal in self.journals], "reflections": reflections}

    async def build(self, personas: dict[int, Any] | None) -> dict[str, Any]:
        """Build this shard's part of the run. ``personas``: this shard's agents by index, with
        the personas the driver loaded (only they are built); None on a platform that hands
        agents to each other, where every agent is built from the scenario (the others are replicas)."""
        world = self.world
        await world.build(held=personas)
        self.services, self.platform = world.services, world.platform
        self.replicas = personas is None
        mine = [agent for agent in world.agents if owner_of(agent.index, self.shards) == self.shard]
        self.host = world.agent_host(mine)
        self.llm_middleware, self.accounting = world.llm_middleware, world.accounting
        self.journals = [ShippedJournal(link) for link in self.llm_middleware if ShippedJournal.fits(link)]
        self._all = world.by_id
        self._round_observers = world.round_observers(measures=False, agents=world.agents)
        # whose state can change in a round they are absent from: with replicas, theirs is sent back every round
        self._observing = [a for a in mine if any(hasattr(c, "on_round_start") for c in a.components.values())]
        # calls made while building were made (and recorded) by the driver's build too
        self.records.clear()
        log.info("ray.shard.built", shard=self.shard, agents=len(mine), replicas=self.replicas)
        return {"agents": len(mine), "replicas": self.replicas}

    async def sync(self, common: dict[str, Any], agents: dict[str, Any] | None, restore: int | None,
                   fresh_slots: frozenset[tuple[str, str]]) -> None:
        """Take the driver's state at a run's first round (after building, a resume, a branch's
        interventions), so every copy starts from the driver's: the platform, the recommender,
        the LLM links' state; and the agents: with replicas, every agent's persona and state
        from ``agents``; else this shard's agents from the checkpoint of round ``restore`` that
        the driver resumed from (None: as built), ``fresh_slots`` keeping the state they were built with."""
        self.platform.set_state(common["platform"])
        self.services.recommender.set_state(common["recommender"])
        if agents is not None:
            for agent_id, saved in agents.items():
                agent = self._all[agent_id]
                agent.persona = saved["persona"]
                restore_agent(agent, saved)
        elif restore is not None:
            mine = self.host.position
            saved = {agent_id: entry for index, agent_id, entry in self.world.run_dir.agent_entries(restore, lambda i: mine[i] >= 0)}
            self.host.restore(lambda agent: saved.get(agent.id), fresh_slots)
        for link in self.llm_middleware:
            state = common["llm"].get(type(link).__name__)
            if state is not None and hasattr(link, "set_state"):
                link.set_state(state)

    async def operate(self, agent_id: str, change: Any, r: int) -> None:
        """``await change(host, agent, r)`` on one of this shard's agents (a branch's intervention)."""
        await self.host.on_agent(agent_id, change, r)

    def _set_replicas(self, states: dict[str, Any]) -> None:
        for agent_id, saved in states.items():
            if agent_id not in self.host.by_id:
                restore_agent(self._all[agent_id], saved)

    async def turns(self, r: int, replicas: dict[str, Any]) -> tuple[list[tuple[int, str, list[Any]]], dict[str, Any]]:
        """Round ``r``'s turns of this shard's present agents, as two objects (the driver asks
        for two returns): the moves ``[(index, id, actions)]`` of the agents that acted, which
        every shard replays (:meth:`replay`), and ``{"turns": [(id, active)], "records": [...]}``,
        or ``{"stopped": reason, "records": [...]}``. ``replicas``: the state of the agents the
        last round touched, from their owners (empty when shards keep no replicas)."""
        self.round = r
        self.world.start_round(r)
        now = self.world.time_of(r)
        cpu, wall = time.process_time(), time.perf_counter()
        self._set_replicas(replicas)
        self._turning = True
        self._turns_ended.clear()
        try:
            await self.world.notify_round_start(self._round_observers, r)
            present = [a for a in self.host.agents if a.present(r)]
            results = await self.host.take_turns(r, present, now)
        except STOPS as exc:
            return [], self._outcome(stopped=stop_reason(exc))
        finally:
            self._turning = False
            self._turns_ended.set()
        log.debug("ray.shard.turns", shard=self.shard, round=r, agents=len(present), wall_s=round(time.perf_counter() - wall, 4),
                  cpu_s=round(time.process_time() - cpu, 4))
        self._ran = self.host.ran(present, results)
        moves = [(a.index, a.id, actions) for a, (_, actions) in zip(present, results) if actions]
        return moves, self._outcome(turns=[(a.id, active) for a, (active, _) in zip(present, results)])
    async def drain(self, r: int, after: float) -> dict[str, Any]:
        """The LLM records and journal writes made so far while round ``r``'s turns go on,
        taken at the first quiet moment at least ``after`` seconds from now (no answer for
        :data:`QUIET_SECONDS`: between two waves of answers, so the taking, and Ray's sending
        them, do not hold up a wave) or, with no quiet moment, :data:`OVERDUE` x ``after``
        from now; none once the turns have ended (the rest goes with :meth:`turns`' outcome,
        after these), and then ``"ended": True``."""
        start = time.monotonic()
        while True:
            started = self.round == r
            if started and not self._turning:
                return {"records": [], "journal": [], "ended": True}
            waited = time.monotonic() - start
            if started and waited >= after and self.records and (
                    time.monotonic() - self._last_record >= QUIET_SECONDS or waited >= OVERDUE * after):
                return self._outcome(drained=True)
            timeout = max(after - waited, QUIET_SECONDS)
            if started:  # wake as the turns end
                ended = asyncio.ensure_future(self._turns_ended.wait())
                await asyncio.wait([ended], timeout=timeout)
                ended.cancel()
            else:  # round r's turns have not begun here yet
                await asyncio.sleep(QUIET_SECONDS)

    async def replay(self, r: int, *moves: list[tuple[int, str, list[Any]]]) -> dict[str, Any]:
        """Apply the round's writes (every shard's :meth:`turns` moves, merged into agent
        order: the order the driver applies them in) to the platform copy; this shard's agents
        hear theirs right after them. Returns what the copy answered to each write, in that
        order (the driver checks it against its own platform's answers), and, with replicas,
        the state of every agent of this shard that the round touched (``states``)."""
        now = self.world.time_of(r)
        now_iso = now.isoformat()
        answers: list[tuple[bool, str | None]] = []
        host = self.host
        touched = {a.id: a for a in self._observing}
        touched.update((a.id, a) for a in self._ran)
        try:
            for _, agent_id, actions in heapq.merge(*moves, key=itemgetter(0)):
                pairs = []
                for action in actions:
                    result = await self.platform.apply(action, r, now_iso)
                    answers.append((result.ok, result.created_id))
                    pairs.append((action, result))
                    named = host.by_id.get(action.target_agent) if action.target_agent else None
                    if named is not None:  # an agent an action named (a chat's partner) may have changed
                        touched[named.id] = named
                        host.changed([named.index])
                agent = host.by_id.get(agent_id)
                if agent is not None:
                    await host.applied(agent, r, now, pairs)
        except STOPS as exc:
            return self._outcome(stopped=stop_reason(exc))
        states = {a.id: {"components": {s: c.get_state() for s, c in a.components.items()}} for a in touched.values()} if self.replicas else {}
        return self._outcome(answers=answers, states=states)

    async def checkpoint(self, r: int) -> str | None:
        """The driver writes round ``r``'s checkpoint: the LLM links commit as their
        ``get_state`` does, and this shard writes its agents' file of it (its name; None with
        replicas, where the driver holds every agent and writes them)."""
        for link in self.llm_middleware:
            if hasattr(link, "get_state"):
                link.get_state()
        if self.replicas:
            return None
        return self.world.run_dir.write_agent_part(r, self.shard, self.shards, self.host.entry_lines())

    async def stop(self, reason: str) -> None:
        """Another shard stopped the round: refuse new LLM calls (those in flight land)."""
        accounting = getattr(self, "accounting", None)
        if accounting is not None:
            accounting.refuse = reason

    async def memory(self) -> dict[str, Any]:
        """This process's resident memory (:func:`townsquare.process_usage.process_usage`)."""
        return process_usage(f"shard {self.shard}", self.world.rss_before_build)

    async def close(self) -> None:
        """Close the shard's world: the platform, the knowledge source, the embedder, every LLM
        link and the provider (one that fails to close is logged and the others are still closed)."""
        await self.world.aclose()

    def pid(self) -> int:
        return os.getpid()


class ShippedJournal:
    """Stands in for the response cache's journal (a link's ``store``: ``put``, ``touch``,
    ``commit``, ``flush``) in a shard: reads go to the run's journal file, writes travel to the
    driver with the shard's answers and the driver writes them, in group commits, as the one
    writer of the file (several processes committing each answer would wait on its lock)."""

    def __init__(self, link: Any):
        self.store = link.store
        link.store = self
        self.puts: list[tuple] = []
        self.touches: list[tuple[int, int]] = []

    @staticmethod
    def fits(link: Any) -> bool:
        store = getattr(link, "store", None)
        return all(hasattr(store, name) for name in ("put", "touch", "commit", "flush")) and not getattr(link, "replay", False)

    def __getattr__(self, name: str) -> Any:  # next_n, get, restore, meta...: the file's
        return getattr(self.store, name)

    def put(self, agent: str, key: str, n: int, round: int, purpose: str, response: Any) -> int:
        self.puts.append((agent, key, n, round, purpose, response))
        return -len(self.puts)  # not a row yet: the driver's put makes it one

    def touch(self, rowid: int, round: int) -> None:
        self.touches.append((rowid, round))

    def commit(self, rowids: list[int]) -> None:
        """The driver commits the rows it wrote and touched (:meth:`RayBackend.checkpoint`)."""

    def flush(self) -> None:
        """Nothing is written here."""

    def take(self) -> tuple[list[tuple], list[tuple[int, int]]]:
        taken = (self.puts, self.touches)
        self.puts, self.touches = [], []
        return taken

    def close(self) -> None:
        self.store.close()


class LedgerBudget:
    """``llm_budget`` in a shard when the scenario sets a limit: the counts live in one
    :class:`BudgetLedger` actor, so the limit is the run's, not the shard's."""

    def __init__(self, config: Any, ctx: Any, ledger: Any):
        self.config = config
        self.ledger = ledger

    def bind_accounting(self, accounting: Any) -> None:
        accounting.observers.append(self.observe)

    def observe(self, call: LLMCallRecord) -> None:
        if call.status in ("ok", "error"):
            self.ledger.observe.remote(call.status, call.prompt_tokens + call.completion_tokens, call.cost)

    async def __call__(self, request: Any, call_next: Any) -> Any:
        refused = await self.ledger.acquire.remote()
        if refused is not None:
            raise RunStopped(refused)
        try:
            return await call_next(request)
        finally:
            self.ledger.release.remote()

    def get_state(self) -> dict[str, Any]:
        return {}  # the driver's budget holds the run's counts


class BudgetLedger:
    """The actor behind :class:`LedgerBudget`: the driver sets it from its own budget at each
    round's start; the shards' calls are counted and refused here in the order they ask."""

    def __init__(self, budget_class: Any, config: Any, run_dir: str):
        self.budget = budget_class(config, _RunDir(run_dir))  # the scenario's llm_budget link

    def reset(self, state: dict[str, Any]) -> None:
        self.budget.set_state(state)
        self.budget.in_flight = 0

    def acquire(self) -> str | None:
        reached = self.budget.reached()
        if reached is not None:
            return self.budget.message(reached)
        self.budget.in_flight += 1
        return None

    def release(self) -> None:
        self.budget.in_flight -= 1

    def observe(self, status: str, tokens: int, cost: float) -> None:
        self.budget.observe(LLMCallRecord(round=0, agent_id=None, purpose="", provider="", model="", status=status,
                                          prompt_tokens=tokens, cost=cost))


class _RunDir:
    """The little of a BuildContext the budget's message needs."""

    def __init__(self, run_dir: str):
        self.services = type("Services", (), {"run_dir": run_dir})()


def owner_of(index: int, shards: int) -> int:
    """The shard that holds agent ``index``: round robin, so populations spread evenly."""
    return index % shards

