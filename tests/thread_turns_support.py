"""A third place for agents' turns, written against ``townsquare.api`` alone: worker threads.

``[engine] backend = "threads"`` (this module as a plugin, ``-p thread_turns_support``): ``workers`` threads, each with its
own event loop and its own part of the run (a :class:`~townsquare.api.World` built from the
scenario with the personas the driver loaded for its agents, ``index % workers == k``; its own
LLM client and platform copy). Each round every worker takes its agents' turns on its platform
copy as it stood at the round's start; the driver (the round loop) applies the actions in order;
every worker then replays the round's writes on its copy in the same order and tells its own
agents what the platform answered, at the point one process does. The workers' LLM records go
to the run's journal (``world.take_in_calls``); a checkpoint gets the agents' entries from the
workers, in index order, and a resumed run's workers read their agents back from it. The
response cache stays the driver's: the workers' worlds are built without ``llm_cache`` (one
SQLite file, one writer), so their answers are not cached; their other LLM links (a budget
among them) count their own calls only.

Nothing here imports the kernel's inside: what a backend needs is the API's ``World``,
``AgentHost`` (through ``world.agent_host``), ``LLMJournal``, ``Turns``/``TurnsBackend`` and
``hookimpl``. The same scenario and seed give the same event log as ``backend = "local"``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import threading
from typing import Any

from townsquare.api import Action, ActionResult, Agent, LLMJournal, Turns, TurnsBackend, World, hookimpl


class Worker:
    """A thread with an event loop of its own and the part of the run it holds."""

    def __init__(self, scenario: Any, run_path: str, k: int, workers: int):
        self.k, self.workers = k, workers
        self.records: list[Any] = []
        self.world = World(scenario, run_path, journal=LLMJournal(listeners=[self.records.append], counting=False), events=False)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"turns-worker-{k}", daemon=True)
        self.thread.start()

    def call(self, coroutine: Any) -> "asyncio.Future[Any]":
        """Run ``coroutine`` on this worker's loop; awaitable from the driver's."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    async def build(self, personas: dict[int, Any]) -> None:
        await self.world.build(held=personas)
        knowledge = self.world.services.knowledge
        if knowledge is not None:  # open its store now, one worker after another (chromadb's clients are made once a process)
            await knowledge.search("open the store", 1)
        self.host = self.world.agent_host([a for a in self.world.agents if a.index % self.workers == self.k])
        self.observers = self.world.round_observers(measures=False, agents=self.host.agents)
        self.records.clear()  # calls made while building: the driver's build made and recorded them too

    async def sync(self, platform: dict[str, Any], recommender: dict[str, Any], restored_from: int | None,
                   fresh_slots: frozenset[tuple[str, str]]) -> None:
        """The driver's platform and recommender; after a resume or a branch, this worker's
        agents from the checkpoint's entries (``fresh_slots`` keep the state they were built with)."""
        self.world.platform.set_state(platform)
        self.world.services.recommender.set_state(recommender)
        if restored_from is not None:
            mine = {agent.index for agent in self.host.agents}
            saved = {agent_id: entry for _, agent_id, entry in self.world.run_dir.agent_entries(restored_from, mine.__contains__)}
            self.host.restore(lambda agent: saved.get(agent.id), fresh_slots)

    async def turns(self, r: int) -> dict[str, tuple[bool, list[Action]]]:
        self.world.start_round(r)
        await self.world.notify_round_start(self.observers, r)
        present = [a for a in self.host.agents if a.present(r)]
        results = await self.host.take_turns(r, present, self.world.time_of(r))
        return {agent.id: result for agent, result in zip(present, results)}

    async def replay(self, r: int, writes: list[tuple[str, list[Action]]]) -> list[tuple[bool, str | None]]:
        """The round's writes on this worker's platform copy, in the driver's order; its own
        agents hear theirs right after them. Returns what the copy answered."""
        now = self.world.time_of(r)
        answers, named = [], []
        for agent_id, actions in writes:
            pairs = []
            for action in actions:
                result = await self.world.platform.apply(action, r, now.isoformat())
                answers.append((result.ok, result.created_id))
                pairs.append((action, result))
                if action.target_agent in self.host.by_id:
                    named.append(self.host.by_id[action.target_agent].index)
            if agent_id in self.host.by_id:
                await self.host.applied(self.host.by_id[agent_id], r, now, pairs)
        await self.host.round_applied(r, named)
        return answers

    def take_records(self) -> list[Any]:
        taken, self.records[:] = list(self.records), []
        return taken

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.world.aclose(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class ThreadTurns:
    """The run's turns on the workers (:class:`townsquare.api.Turns`)."""

    def __init__(self, world: World, workers: list[Worker]):
        self.world, self.workers = world, workers
        self.owner = {agent.id: workers[agent.index % len(workers)] for agent in world.agents}
        self._writes: list[tuple[str, list[Action]]] = []
        self._synced = False

    async def take_turns(self, round: int, present: list[Agent], now: Any) -> list[tuple[bool, list[Action]]]:
        if not self._synced:  # every copy starts from the driver's state (after a resume, a branch's changes)
            world = self.world
            platform, recommender = world.platform.get_state(), world.services.recommender.get_state()
            await asyncio.gather(*(w.call(w.sync(platform, recommender, world.restored_from, world.fresh_slots)) for w in self.workers))
            self._synced = True
        try:
            outs = await asyncio.gather(*(w.call(w.turns(round)) for w in self.workers))
        finally:
            for worker in self.workers:
                self.world.take_in_calls(worker.take_records())
        turns = {agent_id: result for out in outs for agent_id, result in out.items()}
        return [turns[agent.id] for agent in present]

    async def applied(self, agent: Agent, round: int, now: Any, applied: list[tuple[Action, ActionResult]]) -> None:
        self._writes.append((agent.id, [action for action, _ in applied]))

    async def round_applied(self, round: int, named: list[int]) -> None:
        writes, self._writes = self._writes, []
        copies = await asyncio.gather(*(w.call(w.replay(round, writes)) for w in self.workers))
        for worker in self.workers:
            self.world.take_in_calls(worker.take_records())
        if any(answers != copies[0] for answers in copies):
            raise RuntimeError(f"round {round}: the workers' platform copies answered differently")

    def take_reflections(self) -> list[tuple]:
        return [item for worker in self.workers for item in worker.host.take_reflections()]

    async def on_agent(self, agent_id: str, change: Any, round: int) -> None:
        worker = self.owner[agent_id]
        await worker.call(worker.host.on_agent(agent_id, change, round))

    async def checkpoint(self, round: int) -> dict[str, Any]:
        held = [zip((a.index for a in w.host.agents), w.host.entries()) for w in self.workers]
        return {"agents": (entry for _, entry in heapq.merge(*held, key=lambda item: item[0]))}

    async def processes(self) -> list[dict[str, Any]]:
        return []  # the workers are threads of this process

    async def aclose(self) -> None:
        for worker in self.workers:
            worker.close()


class ThreadBackend:
    """``townsquare_engine_backend`` for ``threads`` (:class:`townsquare.api.TurnsBackend`)."""

    def __init__(self, workers: int = 2):
        self.workers = workers
        self.connected: list[str] = []

    def connect(self, world: World) -> Any:
        self.connected.append(world.model.engine.backend)
        return _NoConnection()

    async def start(self, world: World, connection: Any) -> Turns:
        scenario = dataclasses.replace(world.scenario, llm_middleware=[
            link for link in world.scenario.llm_middleware if link.spec.name != "llm_cache"])
        if world.services.knowledge is not None:  # a store kept in the run directory is built here, once
            await world.services.knowledge.search("build the store", 1)
        workers = []
        try:
            for k in range(self.workers):  # one after another: a knowledge store is built once, then opened
                worker = Worker(scenario, str(world.run_dir.path), k, self.workers)
                workers.append(worker)
                await worker.call(worker.build({a.index: a.persona for a in world.agents[k::self.workers]}))
        except BaseException:
            for worker in workers:
                worker.close()
            raise
        return ThreadTurns(world, workers)


class _NoConnection:
    def close(self) -> None:
        """Threads need nothing joined or started before the world is built."""


#: the backend this module offers as a plugin (``-p thread_turns_support``, as a run records it,
#: so a resume or a branch loads it again); tests set its ``workers`` and read ``connected``
BACKEND = ThreadBackend(workers=2)
PLUGIN = "thread_turns_support"


@hookimpl
def townsquare_engine_backend(name: str) -> TurnsBackend | None:
    return BACKEND if name == "threads" else None
