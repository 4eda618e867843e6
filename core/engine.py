"""The round engine: the round loop alone. It plays a :class:`~townsquare.world.World` (the
assembled run) through a :class:`~townsquare.turns.Turns` (where the agents' turns run).

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
import gc
import time
from typing import Any, Callable, Iterator

import structlog

from .actions import Action, ActionResult
from .agent_host import stop_reason
from .errors import RunStopped
from .interventions import RunSeams
from .lifecycle import RunInfo, RunSummary
from .llm_faults import LLMFatal, LLMFault
from .llm_journal import LLMJournal
from .llm_modes import answers_in_db
from .metrics import RoundView
from .process_usage import process_usage
from .rundir import RunDir
from .scenario import ResolvedScenario
from .state import json_encoder
from .store import dumps_detail
from .turns import Turns, TurnsBackend
from .world import World

log = structlog.get_logger("townsquare.engine")

#: ``progress(round, totals)``: before the first round played (``round`` = the last one done, -1
#: for a new run) and after each round; ``totals`` is a copy of the running totals
#: (:func:`townsquare.llm_journal.new_totals`: rounds, actions, posts, LLM calls, tokens, cost,
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
    """The round loop: plays a scenario's world into a run directory.

    ``backend``: where the turns run when not in this process (a :class:`~townsquare.turns.TurnsBackend`,
    from ``townsquare_engine_backend``; None: the world's own agents, :class:`~townsquare.agent_host.AgentHost`).
    ``seat(world)``: changes the built world before the run starts (``run --play`` seats a person
    in an agent's policy); a run with a seat or a provider object of its own (a replay's, an
    estimate's) plays in this process whatever the backend. ``on_built(world)``: the runner's cue
    that every input was read and checked (it describes the run's answers in the manifest).

    ``live(event)``, for a display, hears ``phase`` (``text``: what is being built), ``llm_call``
    (``round``, ``purpose``, a copy of the ``totals``, as each call lands) and ``round_start``."""

    def __init__(
        self,
        scenario: ResolvedScenario,
        plugins: Any,
        run_dir: RunDir,
        *,
        progress: Progress | None = None,
        llm_middleware: list[Any] | None = None,
        llm_provider: Any | None = None,
        on_built: Callable[[World], None] | None = None,
        backend: TurnsBackend | None = None,
        seat: Callable[[World], None] | None = None,
        live: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.scenario = scenario
        self.model = scenario.model
        self.plugins = plugins
        self.hook = plugins.hook
        self.run_dir = run_dir
        self.progress = progress
        self.on_built = on_built
        self.seat = seat
        self.live = live
        if backend is not None and (llm_provider is not None or seat is not None):
            log.warning("engine.backend.local", backend=self.model.engine.backend,
                        reason="a replay, an estimate or --play runs in one process")
            backend = None
        self.backend = backend
        # each LLM call fires townsquare_on_llm_call when a plugin listens (else pluggy's dispatch is skipped) and tells live
        heard = [self._heard] * bool(self.hook.townsquare_on_llm_call.get_hookimpls()) + [self._live_call] * (live is not None)
        self.world = World(scenario, run_dir, journal=LLMJournal(listeners=heard), llm_provider=llm_provider,
                           llm_middleware=llm_middleware)
        self.turns: Turns | None = None
        self._action_observers = bool(self.hook.townsquare_on_action_applied.get_hookimpls())

    def _heard(self, call: Any) -> None:
        self.hook.townsquare_on_llm_call(run=self.info, call=call)

    def _live_call(self, call: Any) -> None:
        self.live({"event": "llm_call", "round": self.world.journal.round, "purpose": call.purpose,
                   "totals": dict(self.world.totals)})


    # ------------------------------------------------------------------ building

    async def build(self) -> None:
        """Build the world and its turns: here, or with a backend, its agents' components where
        the backend holds them (this process keeps each agent's persona)."""
        world = self.world
        connection = self.backend.connect(world) if self.backend is not None else None
        try:
            phase = (lambda text: self.live({"event": "phase", "text": text, "rounds": self.model.rounds})) if self.live else None
            await world.build(components=self.backend is None, on_phase=phase)
        except BaseException:
            if connection is not None:
                connection.close()
            raise
        self.turns = world.host if self.backend is None else await self.backend.start(world, connection)
        self.seams = RunSeams(world, self.turns, self._record_seam_action)
        # what is measured at round ends: the metrics, then the interventions that report
        self.measured = [*world.metrics, *((name, i) for name, i in world.interventions if hasattr(i, "measure"))]
        # the agents' components hear the round start where their turns run (a backend's copies)
        self._round_observers = world.round_observers(measures=True, agents=world.agents if self.turns is world.host else [])
        if self.seat is not None:
            self.seat(world)

    # ------------------------------------------------------------------ running

    async def run(self, resume: bool = False) -> RunSummary:
        """Play the scenario's rounds (from the last checkpoint when ``resume``).

        A stop (a :class:`~townsquare.errors.RunStopped`, an LLM fault no link handled, Ctrl-C)
        during a round ends the run cleanly at its last checkpoint; one while building raises
        :class:`~townsquare.errors.RunStopped` (an LLM fault becomes
        :class:`~townsquare.llm_faults.LLMFatal`) for the runner to mark. Whatever the exit, a
        bug's traceback included, every component, middleware and provider is closed."""
        self.world.journal.recording = not resume
        self.info = RunInfo(
            name=self.model.name, run_dir=str(self.run_dir.path), seed=self.model.seed, rounds=self.model.rounds,
            start_round=0, slot_table=self.scenario.slot_table(), scenario=self.scenario.data,
        )
        try:
            return await self._run(resume)
        finally:
            await self.aclose()

    async def _run(self, resume: bool) -> RunSummary:
        world, journal = self.world, self.world.journal
        start_round = 0
        stopped = None
        started = False
        last_done = -1
        try:
            await self.build()
        except (RunStopped, LLMFault) as exc:
            # stopped while building (persona enrichment met an outage or a budget): the runner
            # marks the manifest; the calls made keep their rows, a resume builds again unrecorded
            if world.store is not None:
                world.write_calls()
            if isinstance(exc, RunStopped):
                raise
            raise LLMFatal(stop_reason(exc)) from exc
        if self.on_built is not None:
            self.on_built(world)
        try:
            world.record_agents()
            if resume:
                checkpoint = self.run_dir.latest_checkpoint(agents=world.host is not None)
                if checkpoint is not None:
                    last, state = checkpoint
                    world.set_state(state, restored_from=last)
                    start_round = last + 1
                dropped = world.store.truncate_after(start_round - 1)
                log.info("run.resume", run=str(self.run_dir.path), from_round=start_round, dropped_rows=dropped)
                journal.discard()
            else:
                # LLM calls made while building (persona enrichment, say) belong to no round: -1.
                world.write_calls()
            journal.recording = True
            self.info.start_round = start_round
            last_done = start_round - 1
            self.hook.townsquare_on_run_start(run=self.info)
            started = True
            if self.progress is not None:
                self.progress(start_round - 1, dict(world.totals))
            for r in range(start_round, self.model.rounds):
                await self.play_round(r)
                last_done = r
        except (RunStopped, LLMFault, KeyboardInterrupt, asyncio.CancelledError) as exc:
            stopped = stop_reason(exc)
            world.store.discard_pending()
            # Failed attempts of the discarded round happened: they keep their rows (the
            # replayed round gets its answers from the cache and does not repeat them).
            journal.write(world.store, journal.take_failed())
            log.warning("run.stopped", reason=stopped, last_round=last_done)
        store = world.store
        summary = RunSummary(
            rounds_completed=last_done + 1, actions=store.count("actions"), posts=store.count("posts"),
            llm_calls=store.count("llm_calls"), stopped=stopped,
            counts=dict(store.db.execute("SELECT kind, COUNT(*) FROM actions GROUP BY kind").fetchall()),
        )
        # each process's memory: its resident set before the agents were built and its peak
        processes = [process_usage("run" if self.backend is None else "driver", world.rss_before_build)]
        processes += await self.turns.processes()
        self.run_dir.update_manifest(
            status="stopped" if stopped else "finished", stop_reason=stopped, rounds_completed=last_done + 1, processes=processes,
            structured_answers=answers_in_db(store.db),
        )
        if started:
            self.hook.townsquare_on_run_end(run=self.info, summary=summary)
        return summary

    async def aclose(self) -> None:
        """Release the turns (a backend's workers), then close the world; one that fails to
        close is logged and the rest is still closed."""
        if self.turns is not None and self.turns is not self.world.host:
            try:
                await self.turns.aclose()
            except Exception as exc:  # noqa: BLE001 - closing must reach every other resource
                log.warning("run.close_failed", component=type(self.turns).__name__, error=f"{type(exc).__name__}: {exc}")
        await self.world.aclose()

    async def play_round(self, r: int) -> None:
        wall = time.perf_counter()
        world, turns = self.world, self.turns
        for _, intervention in world.interventions:
            if intervention.acts_at(r):
                await intervention.intervene(self.seams, r)
        if self.live is not None:
            self.live({"event": "round_start", "round": r, "rounds": self.model.rounds})
        world.start_round(r)
        now = world.time_of(r)
        now_iso = now.isoformat()
        self.hook.townsquare_on_round_start(run=self.info, round=r, now=now_iso)
        await world.notify_round_start(self._round_observers, r)

        present = [a for a in world.agents if a.present(r)]
        results = await turns.take_turns(r, present, now)
        n_active = sum(1 for active, _ in results if active)

        ordered = [action for _, actions in results for action in actions]
        platform = world.platform
        apply_batch = getattr(platform, "apply_batch", None)
        if apply_batch is not None:
            # A network platform may send independent writes in parallel; it answers in order.
            answers = iter(await apply_batch(ordered, r, now_iso))
        else:
            answers = None
        # the actions as metrics read them: only built when a metric will (a dict per action)
        round_actions: list[dict[str, Any]] | None = [] if self.measured else None
        n_actions = len(ordered)
        apply, record, order, named = platform.apply, self._record_action, world.journal.order, []
        for agent, (_, actions) in zip(present, results):
            if not actions:
                continue
            applied = []
            for action in actions:
                result = next(answers) if answers is not None else await apply(action, r, now_iso)
                record(r, now_iso, action, result, round_actions)
                if action.target_agent is not None:
                    target = order.get(action.target_agent)
                    if target is not None:
                        named.append(target)
                if self._action_observers:
                    self.hook.townsquare_on_action_applied(run=self.info, round=r, action=action, result=result)
                applied.append((action, result))
            await turns.applied(agent, r, now, applied)
        await turns.round_applied(r, named)
        store = world.store
        store.pending("reflections").extend((r, *row) for _, _, row in sorted(turns.take_reflections(), key=lambda item: item[:2]))

        values: dict[str, float] = {}
        view = RoundView(round=r, now=now_iso, platform=platform, agents=world.agents, actions=round_actions or [],
                         by_id=world.by_id)
        for name, metric in self.measured:
            for key, value in (await metric.measure(view)).items():
                values[f"{name}.{key}"] = float(value)
                store.buffer("metrics", (r, f"{name}.{key}", float(value)))
        self.hook.townsquare_on_round_end(run=self.info, round=r, now=now_iso, metrics=values)

        llm_rows = world.journal.take()
        store.pending("llm_calls").extend(llm_rows)
        totals = world.totals
        totals["rounds"] += 1
        totals["active"] += n_active
        store.commit_round((r, now_iso, n_active, n_actions, len(llm_rows), round(time.perf_counter() - wall, 4)))
        every = self.model.engine.checkpoint_every
        if (r + 1) % every == 0 or r == self.model.rounds - 1:
            state = world.get_state(r, agents=False)
            saved = await turns.checkpoint(r)  # the answers the workers used commit, as get_state does here
            if saved.get("agent_parts") is not None:
                state["agent_parts"] = saved["agent_parts"]
            members = {"agents": saved["agents"]} if "agents" in saved and "agent_parts" not in state else None
            self.run_dir.write_checkpoint(r, state, self.model.engine.keep_checkpoints, members=members)
            self.run_dir.update_manifest(rounds_completed=r + 1)
        if self.progress is not None:
            self.progress(r, dict(totals))

    def _record_seam_action(self, r: int, now: str, action: Action, result: ActionResult) -> None:
        """An intervention's action (:class:`~townsquare.interventions.RunSeams`): recorded as
        the round's first rows; ``townsquare_on_action_applied`` fires."""
        self._record_action(r, now, action, result, [])
        self.hook.townsquare_on_action_applied(run=self.info, round=r, action=action, result=result)

    def _record_action(self, r: int, now: str, action: Action, result: ActionResult, round_actions: list | None) -> None:
        """Count and buffer one applied action (and add it to ``round_actions``, the metrics'
        view of the round, unless that is None: no metric reads it)."""
        totals, store = self.world.totals, self.world.store
        totals["actions"] += 1
        store.buffer("actions", (r, now, action.agent_id, action.kind, action.target_post, action.target_agent, action.text,
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
            totals["comments" if action.kind == "comment" else "posts"] += 1
            reply_to = action.target_post if action.kind == "comment" else None
            store.buffer("posts", (result.created_id, action.agent_id, r, now, action.text, reply_to, result.remote_id))
        elif action.kind in ("follow", "unfollow"):
            store.buffer("follows", (r, now, action.agent_id, action.target_agent, action.kind))


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
