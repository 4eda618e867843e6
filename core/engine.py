"""The round engine: the round loop alone (assembling a run is :mod:`townsquare.assembly`).

Each round, on a simulated clock (``clock.minutes_per_round``, default 60):

1. The interventions that act in this round intervene (:mod:`townsquare.interventions`),
   then ``on_round_start`` fires.
2. Every present agent gets a turn, concurrently under asyncio (at most
   ``engine.concurrency`` at once): its planner (if any) says whether it is active, else the
   activity model draws; an active agent's policy returns actions; its reflector (if any) may
   add more. Platform reads happen here; LLM calls are the wait.
3. Actions are applied to the platform in agent order, then in the order each agent returned
   them, so a seed fixes the outcome however the LLM calls interleave. Each fires
   ``on_action_applied``; components with ``on_applied`` hear their agent's results.
4. Metrics are measured, ``on_round_end`` fires, the round's rows are committed in one
   transaction and the checkpoint is written (see :mod:`townsquare.rundir`).

A :class:`~townsquare.errors.RunStopped` raised during a round (a budget reached, an LLM
endpoint that refuses or keeps failing), an LLM fault no middleware handled, or Ctrl-C discards
the unfinished round and ends the run cleanly at the last checkpoint: new LLM calls are refused,
the calls in flight land first (their paid answers go to the response cache), the failed
attempts of the round keep their ``llm_calls`` rows, and every component, middleware and
provider is closed, as on every other exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import time
from datetime import timedelta
from typing import Any, Callable, Iterator

import structlog

from .actions import Action, ActionResult
from .agent_host import AgentHost, stop_reason
from .llm_modes import TOTAL_KEYS, answers_in_db, provider_capabilities
from .progress import count_llm_call, llm_call_event, new_totals, phase_event
from .assembly import Assembly, agent_rows, assemble, build_llm
from .components import Agent
from .errors import RunStopped
from .interventions import RunSeams
from .lifecycle import RunInfo, RunSummary
from .llm import LLMCallRecord
from .prompt_cache import PrefixIndex, cached_tokens
from .llm_faults import LLMFatal, LLMFault
from .metrics import RoundView
from .process_usage import process_usage, rss_bytes
from .rundir import RunDir
from .scenario import ResolvedScenario
from .secrets import redact_text
from .slots import notify_round_start, round_observers
from .state import json_encoder
from .store import EventStore, dumps_detail

log = structlog.get_logger("townsquare.engine")

#: ``progress(round, totals)``: before the first round played (``round`` = the last one done, -1
#: for a new run) and after each round; ``totals`` is a copy of the running totals
#: (:func:`townsquare.progress.new_totals`: rounds, actions, posts, LLM calls, tokens, cost,
#: errors, repairs, parse failures).
Progress = Callable[[int, dict[str, float]], None]


#: Python's cyclic collector thresholds while a run plays (the default is 700, 10, 10). A run
#: allocates millions of long-lived objects (actions, posts, agents' state); with the default a
#: full collection walks them all every few rounds: 8 of 35 s in a 100,000-agent run, measured
#: (``benchmarks/population.py``); with (10,000, 20, 20), 1 of 25 s. In an LLM-bound round the
#: youngest generation is mostly the turns in flight (256 of them at concurrency 256), walked
#: again at every young collection: at 100,000 allocations instead of 10,000 the client spends
#: 0.225 instead of 0.254 ms a call and the round 1.119 instead of 1.145 x its bound (6 runs
#: each, interleaved; docs/scale.md).
COLLECTOR_THRESHOLDS = (100_000, 20, 20)


@contextlib.contextmanager
def run_collector() -> Iterator[None]:
    """:data:`COLLECTOR_THRESHOLDS` for the duration, then the thresholds as they were."""
    before = gc.get_threshold()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


class Simulation:
    """One run of a resolved scenario into a run directory."""

    def __init__(
        self,
        scenario: ResolvedScenario,
        plugins: Any,
        run_dir: RunDir,
        *,
        progress: Progress | None = None,
        llm_middleware: list[Any] | None = None,
        llm_provider: Any | None = None,
        on_built: Callable[[], None] | None = None,
        backend: Any = None,
        live: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.scenario = scenario
        self.model = scenario.model
        self.plugins = plugins
        self.hook = plugins.hook
        self.run_dir = run_dir
        self.progress = progress
        self.llm_middleware = list(llm_middleware or [])
        self.llm_provider = llm_provider
        self.on_built = on_built  # the runner's cue: every input was read and checked
        #: ``live(event)``: what happens as it happens, for a display (:mod:`townsquare.progress`:
        #: build phases, every LLM call with the totals so far, each round's start)
        self.live = live
        #: where the turns run when not in this process: a class with ``plays(simulation)`` (whether
        #: it takes this run's turns), ``connect(simulation)`` (before building) and ``async
        #: start(simulation, connection)`` (after; the runner passes
        #: :class:`townsquare.scaleout.ray_backend.RayBackend` for ``[engine] backend = "ray"``)
        self._backend_class = backend
        self.backend: Any = None
        #: the agents this process holds with their components (None: a backend's shards hold them)
        self.host: AgentHost | None = None
        #: the round of the checkpoint this run resumed from (None: a new run, or none was kept)
        self.restored_from: int | None = None
        #: ``(population, slot)`` whose components kept the state they were built with when the
        #: run was restored (:meth:`set_state`)
        self.fresh_slots: frozenset[tuple[str, str]] = frozenset()
        self.round = -1
        self.agents: list[Agent] = []
        self.totals = new_totals()
        #: the round's ``llm_calls`` rows as kept until it writes them (:func:`_kept_row`)
        self._llm_rows: list[tuple] = []
        #: each agent's index by id (set when the run is built; calls made before go first)
        self._order: dict[str, int] = {}
        self._record_llm = True
        #: every prompt prefix of the run's answered calls so far, in issue order (``cached_prefix_tokens``)
        self.prefix_index = PrefixIndex()
        #: ``self.round`` as the LLM layer reads it several times a call: a C-level callable, no Python frame
        self._current_round = functools.partial(getattr, self, "round")
        #: whether each LLM call fires ``townsquare_on_llm_call`` (False when no plugin listens,
        #: which skips pluggy's dispatch; an evaluation, which is no run, sets it False too)
        self.fire_llm_call_hook = bool(self.hook.townsquare_on_llm_call.get_hookimpls())
        self._action_observers = bool(self.hook.townsquare_on_action_applied.get_hookimpls())

    # ------------------------------------------------------------------ building

    async def build(self) -> None:
        """Assemble the run (:func:`townsquare.assembly.assemble`): services, platform, metrics,
        agents; with a backend that plays the turns elsewhere, the agents' components are built
        there (:mod:`townsquare.scaleout.ray_backend`) and this process keeps each agent's persona."""
        remote = self._backend_class is not None and self._backend_class.plays(self)
        cluster = self._backend_class.connect(self) if remote else None
        self._rss_before_build = rss_bytes()
        self.store = EventStore(self.run_dir.events_path)
        try:
            built = await assemble(
                self.scenario, str(self.run_dir.path), llm_provider=self.llm_provider, llm_middleware=self.llm_middleware,
                on_llm_call=self.record_llm_call, current_round=self._current_round, components=not remote,
                on_phase=self.phase if self.live is not None else None,
            )
        except BaseException:
            if cluster is not None:
                cluster.close()
            raise
        self.services, self.platform, self.metrics, self.agents = built.services, built.services.platform, built.metrics, built.agents
        self.llm_middleware, self.stages = built.llm_middleware, built.stages
        self.interventions, self.seams = built.interventions, RunSeams(self)
        # what is measured at round ends: the metrics, then the interventions that report
        self.measured = [*self.metrics, *((name, i) for name, i in self.interventions if hasattr(i, "measure"))]
        self.provider, self.accounting = built.provider, built.accounting
        self._order = {agent.id: agent.index for agent in self.agents}
        self._by_id = {agent.id: agent for agent in self.agents}
        self.streams, self.population, self.levels = built.streams, built.population, built.levels
        if not built.partial:
            self.host = AgentHost(self.agents, population=built.population, levels=built.levels, streams=built.streams,
                                  services=self.services, model=self.model, platform_name=self.scenario.platform.spec.name,
                                  stages=built.stages, accounting=built.accounting)
        if remote:
            self.backend = await self._backend_class.start(self, cluster)
        # the agents' components hear the round start where their turns run (the shards' copies)
        local_agents = self.agents if self.backend is None else []
        self._round_observers = round_observers([self.services.platform, self.services.recommender, *(m for _, m in self.metrics),
                                                 *(i for _, i in self.interventions),
                                                 *self.llm_middleware, *(c for a in local_agents for c in a.components.values())])

    def phase(self, text: str) -> None:
        """Tell the display what the run is doing while it is built (``live``)."""
        if self.live is not None:
            self.live(phase_event(text, self.model.rounds))

    def build_llm(self, build_ctx: Any) -> Any:
        """The run's LLM client alone (provider, middleware, accounting), for commands that
        need no agents (``townsquare eval discrimination``); :meth:`aclose` closes it."""
        built = Assembly(services=build_ctx.services, metrics=[], agents=[], stages={},
                         llm_middleware=list(self.llm_middleware))
        client = build_llm(self.scenario, build_ctx, built, self.llm_provider, self.record_llm_call, self._current_round)
        self.llm_middleware = built.llm_middleware
        self.provider, self.accounting = built.provider, built.accounting
        return client

    def record_llm_call(self, call: LLMCallRecord) -> None:
        """Count an LLM call in the run's totals, keep its ``llm_calls`` row (written with its
        round, or by :meth:`write_llm_calls`) and fire ``townsquare_on_llm_call``. An answer that
        fell back to its caller's default is a warning, with the run's counts so far, unless the
        provider is a stand-in (``stand_in = True``: a dry run's answers are no model's)."""
        count_llm_call(self.totals, call)
        if self.live is not None:
            self.live(llm_call_event(self.round, call.purpose, self.totals))
        if call.status == "parse_failure" and not getattr(self.llm_provider, "stand_in", False):
            answers = {outcome: int(self.totals.get(key, 0)) for outcome, key in TOTAL_KEYS.items()}
            log.warning("llm.fallback", purpose=call.purpose, agent=call.agent_id, mode=call.mode or "-", kind=call.kind,
                        fallbacks=answers["fallback"], answers=sum(answers.values()))
        if self._record_llm:
            order = self._order.get(call.agent_id or "", -1)
            self._llm_rows.append(_kept_row(call, order, len(self._llm_rows)))
        if self.fire_llm_call_hook:
            self.hook.townsquare_on_llm_call(run=self.info, call=call)

    # ------------------------------------------------------------------ state

    def get_state(self, round: int, agents: bool = True) -> dict[str, Any]:
        """The run's state after ``round`` (a checkpoint's content); ``agents=False`` leaves the
        agents out (a checkpoint writes them from :meth:`townsquare.agent_host.AgentHost.entries`,
        here or in the shards)."""
        state = {
            "version": 1,
            "round": round,
            "platform": self.platform.get_state(),
            "recommender": self.services.recommender.get_state(),
            "metrics": {name: metric.get_state() for name, metric in self.metrics},
            "interventions": {name: i.get_state() for name, i in self.interventions if hasattr(i, "get_state")},
            "llm": {_key(m): m.get_state() for m in self.llm_middleware if hasattr(m, "get_state")},
            "totals": dict(self.totals),
            "prompt_cache": self.prefix_index.get_state(),
        }
        if agents and self.host is not None:
            # no generator state: an agent's draws come from the seed and the round (townsquare.random_streams)
            state["agents"] = {a.id: {"components": {s: c.get_state() for s, c in a.components.items()}} for a in self.agents}
        return state

    def changed(self, agent: Agent) -> None:
        """``agent``'s components were changed outside its turns (an intervention, the
        state a shard sent back): the next checkpoint reads their state again."""
        if self.host is not None:
            self.host.changed([agent.index])

    async def on_agent(self, agent: Agent, change: Callable[[AgentHost, Agent, int], Any], r: int) -> None:
        """Apply ``await change(host, agent, r)`` (an intervention's: a picklable callable)
        to ``agent`` where its components are held: here, or in its shard before round ``r``'s
        turns (:meth:`townsquare.scaleout.ray_backend.RayBackend.on_agent`)."""
        if self.host is not None:
            await change(self.host, self.host.by_id[agent.id], r)
            self.changed(agent)
        else:
            self.backend.on_agent(agent.id, change, r)

    def changed_slots(self, written_by: list[dict[str, str]] | None) -> frozenset[tuple[str, str]]:
        """``(scope, slot)`` filled now by another component than in ``written_by`` (the slot
        table of the run that wrote a checkpoint; None: this run's own)."""
        if written_by is None:
            return frozenset()
        before = {(row["scope"], row["slot"]): row["component"] for row in written_by}
        now = {(row["scope"], row["slot"]): row["component"] for row in self.scenario.slot_table()}
        return frozenset(key for key, component in now.items() if before.get(key) != component)

    def set_state(self, state: dict[str, Any]) -> None:
        """Take a checkpoint's state. Its agents are restored where they are held: here, or (with
        a backend whose shards hold them) by the shards from the checkpoint's files.

        A checkpoint another run wrote (a branch's start) names that run's slot table
        (``slot_table``): a component that differs now keeps the state it was built with, as
        does a metric or intervention the checkpoint has no state for."""
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
            self.prefix_index.set_state(state["prompt_cache"])

    # ------------------------------------------------------------------ running

    async def run(self, resume: bool = False) -> RunSummary:
        """Play the scenario's rounds (from the last checkpoint when ``resume``).

        A stop (a :class:`~townsquare.errors.RunStopped`, an LLM fault no link handled, Ctrl-C)
        during a round ends the run cleanly at its last checkpoint; one while building raises
        :class:`~townsquare.errors.RunStopped` (an LLM fault becomes
        :class:`~townsquare.llm_faults.LLMFatal`) for the runner to mark. Whatever the exit, a
        bug's traceback included, every component, middleware and provider is closed."""
        self._record_llm = not resume
        self.info = RunInfo(
            name=self.model.name, run_dir=str(self.run_dir.path), seed=self.model.seed, rounds=self.model.rounds,
            start_round=0, slot_table=self.scenario.slot_table(), scenario=self.scenario.data,
        )
        try:
            return await self._run(resume)
        finally:
            await self.aclose()

    async def _run(self, resume: bool) -> RunSummary:
        start_round = 0
        stopped = None
        started = False
        last_done = -1
        try:
            await self.build()
        except (RunStopped, LLMFault) as exc:
            # stopped while building (persona enrichment met an outage or a budget): the runner
            # marks the manifest; the calls made keep their rows, a resume builds again unrecorded
            if hasattr(self, "store"):
                self._write_llm_rows(self._llm_rows)
            if isinstance(exc, RunStopped):
                raise
            raise LLMFatal(stop_reason(exc)) from exc
        self._describe_answers()
        if self.on_built is not None:
            self.on_built()
        try:
            self.store.add_agents(agent_rows(self.agents))
            if resume:
                checkpoint = self.run_dir.latest_checkpoint(agents=self.host is not None)
                if checkpoint is not None:
                    last, state = checkpoint
                    self.set_state(state)
                    start_round = last + 1
                    self.restored_from = last
                dropped = self.store.truncate_after(start_round - 1)
                log.info("run.resume", run=str(self.run_dir.path), from_round=start_round, dropped_rows=dropped)
            elif self._llm_rows:
                # LLM calls made while building (persona enrichment, say) belong to no round: -1.
                self._write_llm_rows(self._llm_rows)
            self._llm_rows.clear()
            self._record_llm = True
            self.info.start_round = start_round
            last_done = start_round - 1
            self.hook.townsquare_on_run_start(run=self.info)
            started = True
            if self.progress is not None:
                self.progress(start_round - 1, dict(self.totals))
            for r in range(start_round, self.model.rounds):
                await self.play_round(r)
                last_done = r
        except (RunStopped, LLMFault, KeyboardInterrupt, asyncio.CancelledError) as exc:
            stopped = stop_reason(exc)
            self.store.discard_pending()
            # Failed attempts of the discarded round happened: they keep their rows (the
            # replayed round gets its answers from the cache and does not repeat them).
            self._write_llm_rows([kept for kept in self._llm_rows if kept[_STATUS] == "error"])
            self._llm_rows.clear()
            log.warning("run.stopped", reason=stopped, last_round=last_done)
        summary = RunSummary(
            rounds_completed=last_done + 1, actions=self.store.count("actions"), posts=self.store.count("posts"),
            llm_calls=self.store.count("llm_calls"), stopped=stopped,
            counts=dict(self.store.db.execute("SELECT kind, COUNT(*) FROM actions GROUP BY kind").fetchall()),
        )
        # each process's memory: its resident set before the agents were built and its peak
        processes = [process_usage("run" if self.backend is None else "driver", self._rss_before_build)]
        if self.backend is not None:
            processes += await self.backend.processes()
        self.run_dir.update_manifest(
            status="stopped" if stopped else "finished", stop_reason=stopped, rounds_completed=last_done + 1, processes=processes,
            structured_answers=answers_in_db(self.store.db),
        )
        if started:
            self.hook.townsquare_on_run_end(run=self.info, summary=summary)
        return summary

    def _describe_answers(self) -> None:
        """Say in the manifest how structured answers are held to their format: the provider's
        capabilities and the mode per kind (``llm``), and in the slot table, per component that
        declares its answers (an ``answers`` mapping of purpose -> AnswerFormat), the mode each
        of its purposes runs in. The CLI prints both at start; the run's end adds the counts
        (``structured_answers``)."""
        llm = getattr(self.services, "llm", None)
        if llm is None or not self.run_dir.manifest_path.is_file():
            return
        modes = llm.modes
        declared: dict[tuple[str, str], str] = {}
        for agent in self.agents:
            for slot, component in agent.components.items():
                answers = getattr(component, "answers", None)
                if answers and (agent.population, slot) not in declared:
                    declared[(agent.population, slot)] = ", ".join(
                        f"{purpose}: {modes.get(answer.kind, 'prompt')}" for purpose, answer in answers.items())
        rows = [{**row, "answers": declared[(row["scope"], row["slot"])]} if (row["scope"], row["slot"]) in declared else row
                for row in self.scenario.slot_table()]
        self.run_dir.update_manifest(slot_table=rows, llm={
            "provider": self.provider.name, "model": self.provider.model,
            "capabilities": {kind: list(m) for kind, m in provider_capabilities(self.provider).items()}, "modes": modes})

    def write_llm_calls(self) -> list[tuple]:
        """Write the ``llm_calls`` rows kept since the last write (an evaluation's calls, which
        no round writes); returns them."""
        items, self._llm_rows = self._llm_rows, []
        return self._write_llm_rows(items)

    def _write_llm_rows(self, items: list[tuple]) -> list[tuple]:
        rows = self._ordered_rows(items) if items else []
        if rows and self._record_llm:
            self.store.write_now("llm_calls", rows)
        return rows

    def _ordered_rows(self, items: list[tuple]) -> list[tuple]:
        """``items``' rows (:func:`_kept_row`) in issue order, each with its ``cached_prefix_tokens``:
        an answered call's prompt prefix shared with an earlier answered call of the run (in the
        provider's tokens, :func:`townsquare.prompt_cache.cached_tokens`); None for a failed
        attempt or a parse failure (their prompts are left out of the index, so a replay, which
        has no failed attempts, counts the same)."""
        rows = []
        append, add_blocks = rows.append, self.prefix_index.add_blocks
        for kept in sorted(items):  # by place: its fields are unique, so no row is ever compared
            if kept[_STATUS] in ("ok", "cached"):  # a prompt shorter than a block shares nothing
                shared = add_blocks(kept[5]) if kept[5] else 0
                append(kept[_ROW:] + (cached_tokens(shared, kept[6], kept[_STATUS + 1]) if shared else 0,))
            else:
                append(kept[_ROW:] + _NOT_ANSWERED)
        return rows

    async def aclose(self) -> None:
        """Close the store, the platform, the embedder, every LLM link and the provider; one
        that fails to close is logged and the others are still closed."""
        if getattr(self, "store", None) is not None:
            self.store.close()
        services = getattr(self, "services", None)
        embedder = getattr(getattr(services, "embedder", None), "embedder", None)
        closables = [self.backend, getattr(self, "platform", None), getattr(services, "knowledge", None), embedder,
                     *self.llm_middleware, getattr(self, "provider", None)]
        for obj in closables:
            if obj is None:
                continue
            try:
                await _close(obj)
            except Exception as exc:  # noqa: BLE001 - closing must reach every other resource
                log.warning("run.close_failed", component=type(obj).__name__, error=f"{type(exc).__name__}: {exc}")

    def now(self, round: int) -> str:
        clock = self.model.clock
        return (clock.start + timedelta(minutes=round * clock.minutes_per_round)).isoformat()

    async def play_round(self, r: int) -> None:
        wall = time.perf_counter()
        for _, intervention in self.interventions:
            if intervention.acts_at(r):
                await intervention.intervene(self.seams, r)
        self.round = r
        if self.live is not None:
            self.live({"event": "round_start", "round": r, "rounds": self.model.rounds})
        self.streams.start_round(r)
        now_iso = self.now(r)
        now = self.model.clock.start + timedelta(minutes=r * self.model.clock.minutes_per_round)
        self.hook.townsquare_on_round_start(run=self.info, round=r, now=now_iso)
        await notify_round_start(self._round_observers, r, now)

        present = [a for a in self.agents if a.present(r)]
        results = await self.take_turns(r, present, now)
        n_active = sum(1 for active, _ in results if active)

        ordered = [action for _, actions in results for action in actions]
        apply_batch = getattr(self.platform, "apply_batch", None)
        if apply_batch is not None:
            # A network platform may send independent writes in parallel; it answers in order.
            answers = iter(await apply_batch(ordered, r, now_iso))
        else:
            answers = None
        # the actions as metrics read them: only built when a metric will (a dict per action)
        round_actions: list[dict[str, Any]] | None = [] if self.measured else None
        n_actions = len(ordered)
        apply, record, named = self.platform.apply, self._record_action, []
        # here, the host's own coroutine (one less per agent); on a backend the shard is told
        notify = self.notify_applied if self.backend is not None else self.host.notify_applied
        for agent, (_, actions) in zip(present, results):
            if not actions:
                continue
            applied = []
            for action in actions:
                result = next(answers) if answers is not None else await apply(action, r, now_iso)
                record(r, now_iso, action, result, round_actions)
                if action.target_agent is not None:
                    target = self._order.get(action.target_agent)
                    if target is not None:
                        named.append(target)
                if self._action_observers:
                    self.hook.townsquare_on_action_applied(run=self.info, round=r, action=action, result=result)
                applied.append((action, result))
            await notify(agent, r, now, applied)
        if self.host is not None:  # an agent an action named may have changed (a chat's partner)
            self.host.changed(named)
        if self.backend is not None:
            # the shards replay the round's writes on their platform copies and hear their agents' results
            await self.backend.round_applied(r)
        self.store.pending("reflections").extend((r, *row) for row in self.take_reflections())

        values: dict[str, float] = {}
        view = RoundView(round=r, now=now_iso, platform=self.platform, agents=self.agents, actions=round_actions or [],
                         by_id=self._by_id)
        for name, metric in self.measured:
            for key, value in (await metric.measure(view)).items():
                values[f"{name}.{key}"] = float(value)
                self.store.buffer("metrics", (r, f"{name}.{key}", float(value)))
        self.hook.townsquare_on_round_end(run=self.info, round=r, now=now_iso, metrics=values)

        kept, self._llm_rows = self._llm_rows, []
        llm_rows = self._ordered_rows(kept)
        self.store.pending("llm_calls").extend(llm_rows)
        self.totals["rounds"] += 1
        self.totals["active"] += n_active
        self.store.commit_round((r, now_iso, n_active, n_actions, len(llm_rows), round(time.perf_counter() - wall, 4)))
        every = self.model.engine.checkpoint_every
        if (r + 1) % every == 0 or r == self.model.rounds - 1:
            state = self.get_state(r, agents=False)
            if self.backend is not None:  # the answers the shards used commit, as get_state does here
                parts = await self.backend.checkpoint(r)  # and they write their agents' files
                if parts is not None:
                    state["agent_parts"] = parts
            members = {"agents": self.host.entries()} if self.host is not None and "agent_parts" not in state else None
            self.run_dir.write_checkpoint(r, state, self.model.engine.keep_checkpoints, members=members)
            self.run_dir.update_manifest(rounds_completed=r + 1)
        if self.progress is not None:
            self.progress(r, dict(self.totals))

    async def notify_applied(self, agent: Agent, r: int, now: Any, applied: list[tuple[Action, ActionResult]]) -> None:
        """Tell ``agent``'s components (``on_applied``) what the platform answered to its actions;
        on another backend the shard that holds the agent is told (:meth:`round_applied`)."""
        if self.backend is not None:
            self.backend.applied(agent, applied)
            return
        await self.host.notify_applied(agent, r, now, applied)

    async def take_turns(self, r: int, present: list[Agent], now: Any) -> list[tuple[bool, list[Action]]]:
        """Step 2 of a round: every present agent's turn (:meth:`townsquare.agent_host.AgentHost.take_turns`);
        ``(active, actions)`` per agent, in ``present``'s order. With a backend (``[engine]
        backend = "ray"``) the turns run there (:mod:`townsquare.scaleout.ray_backend`)."""
        if self.backend is not None:
            return await self.backend.take_turns(r, present)
        return await self.host.take_turns(r, present, now)

    def take_reflections(self) -> list[tuple]:
        """The round's reflections (:meth:`townsquare.components.StepContext.record_reflection`),
        wherever the agents are held, in agent order, then each agent's order."""
        found = self.host.take_reflections() if self.host is not None else []
        if self.backend is not None:
            found += self.backend.take_reflections()
        return [row for _, _, row in sorted(found, key=lambda item: item[:2])]

    def _record_action(self, r: int, now: str, action: Action, result: ActionResult, round_actions: list | None) -> None:
        """Count and buffer one applied action (and add it to ``round_actions``, the metrics'
        view of the round, unless that is None: no metric reads it)."""
        self.totals["actions"] += 1
        self.store.buffer("actions", (r, now, action.agent_id, action.kind, action.target_post, action.target_agent, action.text,
                                      _ids_json(action.post_ids) if action.post_ids else None, int(result.ok),
                                      result.created_id, result.error, dumps_detail(action.detail) if action.detail else None))
        if round_actions is not None:
            round_actions.append({"agent_id": action.agent_id, "kind": action.kind, "ok": result.ok,
                                  "target_post": action.target_post, "target_agent": action.target_agent,
                                  "text": action.text, "post_ids": action.post_ids, "created_id": result.created_id,
                                  "detail": action.detail})
        if not result.ok:
            return
        if action.kind in ("post", "comment") and result.created_id:
            self.totals["comments" if action.kind == "comment" else "posts"] += 1
            reply_to = action.target_post if action.kind == "comment" else None
            self.store.buffer("posts", (result.created_id, action.agent_id, r, now, action.text, reply_to, result.remote_id))
        elif action.kind in ("follow", "unfollow"):
            self.store.buffer("follows", (r, now, action.agent_id, action.target_agent, action.kind))


#: where a kept row's ``llm_calls`` columns start (:func:`_kept_row`), and its ``status``
_ROW = 7
_STATUS = _ROW + 5
#: the ``cached_prefix_tokens`` of a row that is no answer
_NOT_ANSWERED = (None,)


def _kept_row(call: LLMCallRecord, order: int, arrival: int) -> tuple:
    """How the engine keeps an ``llm_calls`` row until the round writes it: one flat tuple (a
    tuple a call: every kept object is traversed by each young-generation collection until the
    round ends), its place first, then the prompt's block keys and length, then the row.

    The place: by agent (``order``), then in the order the agent's client issued the calls (a
    call's retries and repair with it, in ``arrival`` order): never in completion order, which
    latency decides. Ids that are no agent's (``order`` -1: a persona being enriched, say) go by
    id: each numbers its calls from 0. Its five fields are unique (``arrival``), so sorting kept
    rows compares places only, plain values, with no key function."""
    issue = call.issue or (-1, 0)
    return (order, "" if order >= 0 else call.agent_id or "", issue[0], issue[1], arrival, call.prompt_blocks, call.prompt_chars,
            call.round, call.agent_id, call.purpose, call.provider, call.model, call.status, call.prompt_tokens,
            call.completion_tokens, round(call.latency_ms, 3), call.cost, call.error and redact_text(call.error), call.kind,
            call.mode)


def _key(middleware: Any) -> str:
    return type(middleware).__name__


async def _close(obj: Any) -> None:
    close = getattr(obj, "aclose", None)
    if close is not None:
        await close()


async def close_each(objects: Any) -> None:
    """Await ``aclose()`` of each object that has one (providers, embedders a command built
    beside a :class:`Simulation`), in order."""
    for obj in objects:
        await _close(obj)


#: one kept encoder: ``json.dumps`` with options builds a new one per call (a call per action)
_ENCODE = json_encoder(sort_keys=True, ensure_ascii=False)


def _json(value: Any) -> str:
    return _ENCODE(value)


def _ids_json(ids: Any) -> str:
    """``_json(list(ids))`` for a list of post ids, without the encoder when no id needs
    escaping (a browse action per turn: the JSON encoder was a fifth of applying a round)."""
    try:
        text = '", "'.join(ids)
    except TypeError:  # not all strings
        return _ENCODE(list(ids))
    if text.count('"') != 2 * (len(ids) - 1) or "\\" in text or not text.isprintable():
        return _ENCODE(list(ids))
    return f'["{text}"]'
