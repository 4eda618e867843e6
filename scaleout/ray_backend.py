"""``[engine] backend = "ray"``: a run's agents sharded over Ray actors, the same event log.

The driver (the process that runs ``townsquare run``) builds the run as always, but for the
agents' components, and keeps everything that is written: the platform, the events store, the
metrics, the checkpoints. Of the agents it keeps what ordering, the platform and the metrics
need: each agent's id, index, population and persona. It starts ``engine.shards`` actors
(:class:`townsquare.scaleout.ray_shard.Shard`; default one per CPU of the cluster); agent ``i`` lives in
shard ``i % shards`` (a stable partition), which builds it from the persona the driver loaded
and alone holds its state: memories, plans, the rest of its components. On a platform that
hands agents to each other (``members``: the recsys and town platforms, where a turn reads
another agent) every shard and the driver hold every agent instead, the shards' copies of
others' agents set from their owners each round. Each round:

1. the driver hands every shard its state once, at the run's first round (after building, a
   resume, a branch's interventions): platform, recommender, LLM links; on a resume each shard
   reads its own agents from the checkpoint (whatever the number of shards that wrote it);
2. every shard takes its present agents' turns concurrently, with its own LLM client and
   connection pool, on its copy of the platform as it was at the round's start (a consistent
   snapshot), and returns their actions and its ``llm_calls`` records;
3. the driver applies the actions in the single process's order (agent order, then each
   agent's) and writes them. Meanwhile every shard replays the same writes in the same order
   on its copy (each shard's actions go to the others through Ray's object store, not through
   the driver) and calls ``on_applied`` for its own agents at the same point the single
   process does. The shards send back what their copies answered, which must be what the
   driver's platform answered (else :class:`~townsquare.scaleout.ray_shard.ShardDiverged`);
4. the shards' answers travel back with their actions and the driver writes them to the run's
   LLM journal (the response cache's file), as its one writer; at a checkpoint each shard
   writes its agents' file and the driver the checkpoint that lists them (written last).

LLM I/O: each shard has its own provider, connection pool and middleware chain. The
concurrency limits (``engine.concurrency`` and ``[plugins.llm_concurrency] limit``) are split
into equal per-shard shares (no call waits on another process for a slot); several endpoints
or keys are spread over the shards (each shard gets its own subset when there are at least
as many endpoints as shards, else all of them starting at a different one). An LLM budget
with a limit is one :class:`~townsquare.scaleout.ray_shard.BudgetLedger` actor that every call asks
first, so it stops the run at the same call as in one process. Same scenario and seed, the
same event log as the single process, byte for byte apart from wall-clock columns; a shard
that dies stops the run cleanly at its last checkpoint, and ``resume`` continues it.

A local cluster this process starts ends with it, even when it is killed (``kill -9``): a
reaper process (:mod:`townsquare.scaleout.ray_reaper`) ends the Ray processes it started.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import socket
import time
from typing import Any

import structlog

from townsquare.api import RunStopped, UsageError
from .ray_reaper import Reaper
from .ray_shard import BudgetLedger, LedgerBudget, Shard, ShardDiverged, ShippedJournal, owner_of

log = structlog.get_logger("townsquare.scaleout.ray_backend")

INSTALL_HINT = "engine.backend = 'ray' needs Ray: pip install 'townsquare[ray]'"
#: how often (at least this far apart) the driver takes in the LLM records the shards have made
#: while they take their turns; a shard sends them at its next quiet moment (``Shard.drain``)
DRAIN_SECONDS = 0.2


@dataclasses.dataclass
class Cluster:
    """The Ray cluster a run uses; ``reaper`` when this process started it (else None)."""

    ray: Any
    reaper: Reaper | None

    def close(self) -> None:
        """Shut down a cluster this process started (one it joined is left as it was)."""
        if self.reaper is not None:
            self.ray.shutdown()
            self.reaper.close()  # ends what the shutdown left (Ray's agents end some seconds after it)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return ray


#: added to the order of a reflection recorded while a shard replays a round (after the turns)
REPLAY_SEQ = 10**9


class RayBackend:
    """The driver's side: the shard actors and the round's traffic with them (the run's
    :class:`~townsquare.api.Turns`; the class itself is the :class:`~townsquare.api.TurnsBackend`
    that ``townsquare_engine_backend`` returns for ``ray``)."""

    def __init__(self, world: Any, ray: Any, shards: list[Any], ledger: Any, reaper: "Reaper | None"):
        self.world, self.ray, self.shards, self.ledger, self.reaper = world, ray, shards, ledger, reaper
        self._agents = world.by_id
        self._applied: list[tuple[str, list]] = []
        #: the shards' reflections of this round (:meth:`take_reflections`)
        self._reflections: list[tuple] = []
        #: the shards' replays of the round's writes, under way while the driver applies them
        self._replays: list[Any] = []
        self._synced = False
        #: the state of the agents the last round touched: every shard's replicas take it
        self._touched: dict[str, Any] = {}
        #: the run's LLM journal (the response cache's store), which the shards' answers go to
        self._journal = next((m.store for m in world.llm_middleware if ShippedJournal.fits(m)), None)
        self._journal_rows: list[int] = []
        #: whether the shards keep copies of each other's agents: the driver holds every agent
        #: too (the platform hands agents to each other; see townsquare.assembly.assemble)
        self.replicas = world.host is not None
        #: a branch's interventions on agents, applied in their shards after the first sync
        self._operations: list[tuple[str, Any, int]] = []

    @staticmethod
    def connect(world: Any) -> "Cluster":
        """Join the cluster at ``engine.ray_address``, or start a local one (before the run is
        built, so its runtime in this process is not counted as the agents' memory)."""
        engine = world.model.engine
        ray = import_ray()
        if ray.is_initialized():
            return Cluster(ray, None)
        _check_reachable(engine.ray_address)
        try:
            ray.init(address=engine.ray_address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise UsageError(f"engine.ray_address {engine.ray_address!r}: no Ray cluster there ({exc})") from None
        return Cluster(ray, Reaper.start())  # what ray.init started here ends with this process, even when it is killed

    @classmethod
    async def start(cls, world: Any, cluster: "Cluster") -> "RayBackend":
        """Build the shards on ``cluster`` (:meth:`connect`)."""
        engine, ray, reaper = world.model.engine, cluster.ray, cluster.reaper
        if hasattr(world.platform, "apply_batch"):
            cluster.close()
            raise UsageError(f"engine.backend = 'ray': platform {world.scenario.platform.spec.name!r} lives on a server; "
                             "Ray shards need a platform whose state is in the run (in_memory, recsys, town)")
        cpus = ray.cluster_resources().get("CPU", 1.0)
        count = engine.shards or max(1, int(cpus))
        ledger = _ledger(ray, world)
        if world.services.knowledge is not None:
            # a knowledge store kept in the run directory is built here, once: the shards open it
            # (several processes building one chromadb store at once break it)
            await world.services.knowledge.search("the shards open what this builds", 1)
        journal = next((m.store for m in world.llm_middleware if ShippedJournal.fits(m)), None)
        if journal is not None:
            journal.flush()  # the shards open the journal while building: no write of ours holds its lock
        actor = ray.remote(Shard).options(num_cpus=min(1.0, cpus / count), scheduling_strategy="SPREAD")
        shards = [actor.remote(shard_scenario(world.scenario, k, count, ledger), str(world.run_dir.path), k, count) for k in range(count)]
        backend = cls(world, ray, shards, ledger, reaper)
        try:
            # each shard builds its own agents from the personas loaded here (with replicas: every agent, from the scenario)
            personas = [None if backend.replicas else ray.put({a.index: a.persona for a in world.agents[k::count]}) for k in range(count)]
            built = await asyncio.gather(*(shard.build.remote(persona) for shard, persona in zip(shards, personas)))
            del personas
            if reaper is not None:
                reaper.watch_descendants()  # the shards' worker processes too
        except ray.exceptions.RayTaskError as exc:  # a shard could not build (a file missing on its node)
            await backend.aclose()
            raise exc.as_instanceof_cause() from None
        except BaseException:
            await backend.aclose()
            raise
        log.info("ray.backend.ready", shards=count, agents=[out["agents"] for out in built], replicas=backend.replicas,
                 cluster_cpus=cpus, budget_ledger=ledger is not None)
        return backend

    # ------------------------------------------------------------------ a round

    async def take_turns(self, r: int, present: list[Any], now: Any) -> list[tuple[bool, list[Any]]]:
        if not self._synced:
            await self._sync()
            self._synced = True
            operations, self._operations = self._operations, []
            for agent_id, change, at in operations:
                await self.shards[owner_of(self._agents[agent_id].index, len(self.shards))].operate.remote(agent_id, change, at)
        if self.ledger is not None:
            await self.ledger.reset.remote(self._budget().get_state())
        turns: dict[str, tuple[bool, list[Any]]] = {}
        started = time.perf_counter()
        # the other shards' copies of the agents the last round touched (none kept: nothing to send)
        replicas = self.ray.put(self._touched if self.replicas else {})
        calls = [shard.turns.options(num_returns=2).remote(r, replicas) for shard in self.shards]
        moves = [moved for moved, _ in calls]
        # every shard replays every shard's writes as soon as they are made (Ray hands a shard's
        # moves to the others), while this process takes them in and applies them (step 3); a
        # stopped round leaves the copies ahead of the driver, and a resume sends them its state
        self._replays = [shard.replay.remote(r, *moves) for shard in self.shards]
        ended = asyncio.Event()
        draining = asyncio.ensure_future(self._drain(r, ended))
        try:
            try:
                (outs, stopped), moved = await asyncio.gather(self._gather([outcome for _, outcome in calls]),
                                                              asyncio.gather(*moves, return_exceptions=True))
            finally:
                ended.set()
                await draining  # what the shards sent while turning comes before their outcomes
            self._reflections += [item for out in outs for item in out.get("reflections", [])]
            self._take_in(outs, stopped)
        except BaseException:
            replays, self._replays = self._replays, []  # the round stops: let them end, unread
            await asyncio.wait([asyncio.ensure_future(_quiet(ref)) for ref in replays], timeout=30)
            raise
        log.debug("ray.round.turns", round=r, seconds=round(time.perf_counter() - started, 4))
        for out in outs:
            turns.update((agent_id, (active, [])) for agent_id, active in out["turns"])
        for shard_moves in moved:
            turns.update((agent_id, (turns[agent_id][0], actions)) for _, agent_id, actions in shard_moves)
        return [turns[agent.id] for agent in present]

    async def applied(self, agent: Any, r: int, now: Any, applied: list[tuple[Any, Any]]) -> None:
        """The shard that holds ``agent`` hears it while it replays the round (:meth:`round_applied`)."""
        self._applied.append((agent.id, applied))

    async def round_applied(self, r: int, named: list[int]) -> None:
        """The shards' replays of the round's writes end; their answers must be the driver's."""
        self.world.changed(named)  # the driver's copies (with replicas) of the agents an action named
        ordered, self._applied = self._applied, []
        replays, self._replays = self._replays, []
        started = time.perf_counter()
        outs = await self._settle(replays)
        log.debug("ray.round.applied", round=r, seconds=round(time.perf_counter() - started, 4))
        answers = [(result.ok, result.created_id) for _, pairs in ordered for _, result in pairs]
        for k, out in enumerate(outs):
            if out["answers"] != answers:
                raise ShardDiverged(_divergence(k, r, ordered, answers, out["answers"]))
        self._touched = {}
        for out in outs:
            # what the agents reflected hearing their results comes after what they reflected in their turns
            self._reflections += [(index, REPLAY_SEQ + seq, row) for index, seq, row in out.get("reflections", [])]
            self._touched.update(out["states"])
            for agent_id, state in out["states"].items():
                agent = self._agents[agent_id]
                for slot, component in agent.components.items():
                    component.set_state(state["components"][slot])
                self.world.changed([agent.index])
        log.debug("ray.round.synced", round=r, seconds=round(time.perf_counter() - started, 4))

    def take_reflections(self) -> list[tuple]:
        """The reflections the shards recorded this round (and, with replicas, the driver's
        copies), as ``(index, seq, row)`` (:meth:`townsquare.agent_host.AgentHost.take_reflections`)."""
        taken, self._reflections = self._reflections, []
        host = self.world.host
        return (host.take_reflections() if host is not None else []) + taken

    async def checkpoint(self, r: int) -> dict[str, Any]:
        """Before the driver writes round ``r``'s checkpoint: the shards' LLM answers used so far
        are committed (they count on resume), and each shard writes its agents' file, named in
        ``agent_parts`` (with replicas the driver holds every agent and writes their ``agents``)."""
        parts = await asyncio.gather(*(shard.checkpoint.remote(r) for shard in self.shards))
        if self._journal is not None:
            self._journal.commit(self._journal_rows)
            self._journal_rows = []
        return {"agents": self.world.host.entries()} if self.replicas else {"agent_parts": list(parts)}

    async def on_agent(self, agent_id: str, change: Any, r: int) -> None:
        """A change to an agent (``await change(host, agent, r)``): with replicas on the driver's
        copy, which the shards take at the first round; else in its shard once the shards have
        taken the driver's state, before the round's turns."""
        if self.replicas:
            await self.world.host.on_agent(agent_id, change, r)
        else:
            self._operations.append((agent_id, change, r))

    async def processes(self) -> list[dict[str, Any]]:
        """Each shard's memory (:func:`townsquare.process_usage.process_usage`); a shard that is gone is left out."""
        found = await asyncio.gather(*(_answer(shard.memory.remote()) for shard in self.shards))
        return [entry for entry in found if entry is not None]

    async def _drain(self, r: int, ended: asyncio.Event) -> None:
        """While the shards take their turns, take in the LLM records and journal writes they
        have made so far, at least :data:`DRAIN_SECONDS` apart, each shard sending them at a
        quiet moment between two waves of its answers (:meth:`Shard.drain`), so the round's end
        waits for the last part only (at 2,560 calls a round, taking them all in at the end was
        a tenth of it) and no wave waits for the taking."""

        async def take(shard: Any) -> None:
            while not ended.is_set():
                try:
                    out = await shard.drain.remote(r, DRAIN_SECONDS)
                except Exception:  # noqa: BLE001 - a shard that is gone says so in its outcome
                    return
                self._ingest(out["records"], out["journal"])
                if out.get("ended"):  # this shard's turns are over: the rest is in its outcome
                    return

        await asyncio.gather(*(take(shard) for shard in self.shards))

    async def _settle(self, calls: list[Any]) -> list[dict[str, Any]]:
        """Await each shard's outcome (``calls``: one per shard, in shard order) and take
        them in (:meth:`_take_in`)."""
        outs, stopped = await self._gather(calls)
        self._take_in(outs, stopped)
        return outs

    def _take_in(self, outs: list[dict[str, Any]], stopped: str | None) -> None:
        """The shards' LLM records reach the driver in shard order, which keeps each agent's
        calls in order; then a stop stops the round."""
        for out in outs:
            self._ingest(out["records"], out["journal"])
        if stopped is not None:
            raise RunStopped(stopped)

    async def _gather(self, calls: list[Any]) -> tuple[list[dict[str, Any]], str | None]:
        """Each shard's outcome, and the first stop's reason (None: none stopped). A stop in
        one shard, or a dead shard, stops the others' new calls."""
        ray = self.ray
        stopped: list[str] = []

        async def call(k: int, ref: Any) -> dict[str, Any]:
            try:
                out = await ref
            except ray.exceptions.RayActorError as exc:
                out = {"stopped": f"Ray shard {k} is gone ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})",
                       "records": [], "journal": []}
            except ray.exceptions.RayTaskError as exc:
                raise exc.as_instanceof_cause() from None
            if "stopped" in out:
                stopped.append(out["stopped"])
                for other in self.shards:
                    other.stop.remote(out["stopped"])
            return out

        outs = await asyncio.gather(*(call(k, ref) for k, ref in enumerate(calls)))
        return outs, stopped[0] if stopped else None

    def _ingest(self, records: list[Any], journals: list[tuple[list, list]]) -> None:
        """A shard's ``llm_calls`` records, as if made here (rows, totals, hooks, the budget's
        counts), and its answers into the run's LLM journal."""
        for puts, touches in journals:
            if self._journal is None:
                break
            for put in puts:
                self._journal_rows.append(self._journal.put(*put))
            for rowid, round in touches:
                self._journal.touch(rowid, round)
                self._journal_rows.append(rowid)
        self.world.take_in_calls(records)

    async def _sync(self) -> None:
        world, ray = self.world, self.ray
        if self._journal is not None:
            self._journal.flush()  # a resumed shard's journal marks rows as the driver's did
        resumed = world.restored_from is not None
        llm = {type(m).__name__: m.get_state() for m in world.llm_middleware if resumed and hasattr(m, "get_state")}
        common = ray.put({"platform": world.platform.get_state(), "recommender": world.services.recommender.get_state(), "llm": llm})
        agents = None
        if self.replicas:
            agents = ray.put({agent.id: {"persona": agent.persona, "components": {slot: c.get_state() for slot, c in agent.components.items()}}
                              for agent in world.agents})
        self._touched = {}
        await asyncio.gather(*(shard.sync.remote(common, agents, world.restored_from, world.fresh_slots) for shard in self.shards))

    def _budget(self) -> Any:
        return next(m for m in self.world.llm_middleware if type(m).__name__ == "LLMBudget")

    async def aclose(self) -> None:
        """Close every shard (its LLM journal flushes), then end the actors."""
        ray = self.ray
        closing = [shard.close.remote() for shard in self.shards]
        if closing:
            await asyncio.wait([asyncio.ensure_future(_quiet(ref)) for ref in closing], timeout=30)
        for actor in [*self.shards, *([self.ledger] if self.ledger is not None else [])]:
            ray.kill(actor)
        self.shards = []
        Cluster(ray, self.reaper).close()


def _divergence(shard: int, r: int, ordered: list[tuple[str, list]], expected: list[tuple], got: list[tuple]) -> str:
    """What :class:`ShardDiverged` says: the first write whose answers differ."""
    writes = [(agent_id, action) for agent_id, pairs in ordered for action, _ in pairs]
    for i, (agent_id, action) in enumerate(writes):
        if i >= len(got) or got[i] != expected[i]:
            answered = "nothing" if i >= len(got) else "/".join(map(str, got[i]))
            return (f"shard {shard}: round {r}, {action.kind} by {agent_id}: the platform copy answered {answered}, "
                    f"the driver's {'/'.join(map(str, expected[i]))}")
    return f"shard {shard}: round {r}: the platform copy answered {len(got)} writes, the driver's {len(expected)}"


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """``HOST:PORT`` and ``ray://HOST:PORT`` answer a TCP connection within ``timeout``, or
    the run stops with one line (Ray itself retries an unreachable address for minutes)."""
    if not address or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"engine.ray_address {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise UsageError(f"engine.ray_address {address!r}: no Ray cluster answers there ({exc})") from None


async def _answer(ref: Any, timeout: float = 30) -> Any:
    """A call's answer, or None when the actor is gone or does not answer within ``timeout``."""
    try:
        return await asyncio.wait_for(asyncio.ensure_future(_as_future(ref)), timeout)
    except Exception:  # noqa: BLE001 - a dead shard has nothing to say
        return None


async def _as_future(ref: Any) -> Any:
    return await ref


async def _quiet(ref: Any) -> None:
    try:
        await ref
    except Exception:  # noqa: BLE001 - a dead shard has nothing left to close
        pass


def _ledger(ray: Any, world: Any) -> Any:
    """The budget's actor, when the scenario's ``llm_budget`` has a limit (else None: nothing
    to enforce mid-round, and the driver's budget counts every shard's calls anyway)."""
    link = next((c for c in world.scenario.llm_middleware if c.spec.name == "llm_budget"), None)
    config = getattr(link, "config", None)
    if config is None or not any((config.max_calls, config.max_tokens, config.max_cost)):
        return None
    return ray.remote(BudgetLedger).options(num_cpus=0).remote(link.spec.factory, config, str(world.run_dir.path))


def shard_scenario(scenario: Any, shard: int, shards: int, ledger: Any) -> Any:
    """The scenario as shard ``shard`` of ``shards`` builds it: its share of the concurrency
    limits, its endpoints, and the budget ledger in place of the budget link."""
    model = scenario.model
    share = math.ceil(model.engine.concurrency / shards)
    plugins = {name: dict(section) for name, section in model.plugins.items()}
    middleware = []
    for choice in scenario.llm_middleware:
        config = choice.config
        if choice.spec.name == "llm_concurrency" and getattr(config, "limit", None):
            config = config.model_copy(update={"limit": math.ceil(config.limit / shards)})
            plugins.setdefault("llm_concurrency", {})["limit"] = config.limit
        elif choice.spec.name == "llm_budget" and ledger is not None:
            choice = dataclasses.replace(choice, spec=dataclasses.replace(choice.spec, factory=functools.partial(LedgerBudget, ledger=ledger)))
        middleware.append(dataclasses.replace(choice, config=config))
    llm = scenario.llm
    if llm is not None and getattr(llm.config, "endpoints", None):
        llm = dataclasses.replace(llm, config=spread_endpoints(llm.config, shard, shards))
    engine = model.engine.model_copy(update={"concurrency": share})
    return dataclasses.replace(scenario, model=model.model_copy(update={"engine": engine, "plugins": plugins}),
                               llm=llm, llm_middleware=middleware)


def spread_endpoints(config: Any, shard: int, shards: int) -> Any:
    """An endpoint config (``base_url`` + keys, and ``endpoints``) for one shard: with at least
    as many endpoints as shards, every ``shards``-th endpoint from this shard's; else all of
    them, starting at a different one in each shard."""
    endpoint = type(config.endpoints[0])
    every = [endpoint.model_construct(base_url=config.base_url, api_key_env=config.api_key_env, api_key_file=config.api_key_file),
             *config.endpoints]
    if len(every) >= shards:
        mine = every[shard::shards]
    else:
        start = shard % len(every)
        mine = every[start:] + every[:start]
    first = mine[0]
    return config.model_copy(update={"base_url": first.base_url, "api_key_env": first.api_key_env,
                                     "api_key_file": first.api_key_file, "endpoints": mine[1:]})
