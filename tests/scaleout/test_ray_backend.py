"""``[engine] backend = "ray"`` gives the single process's event log.

One local Ray cluster of 2 CPUs for the module (skipped when Ray is not installed); every run
uses two shard actors. Tables are compared whole, but for the wall-clock columns.
"""

from __future__ import annotations

import sqlite3

import pytest

from helpers import PERSONAS, ROOT, event_log, scenario_text

RAY = ["engine.backend=ray", "engine.shards=2"]
SCRIPTED_PLUGIN = "townsquare.testing.scripted"
SCRIPTED = '[recommender]\nname = "random"\n[plugins.scripted]\nlatency_ms = 1.0\n'


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def journal(run_dir) -> list[tuple]:
    """The run's LLM journal (the response cache), without wall-clock columns, in key order."""
    db = sqlite3.connect(f"{run_dir}/llm_cache.sqlite")
    try:
        return db.execute("SELECT agent, key, n, round, committed, purpose, text, prompt_tokens, completion_tokens"
                          " FROM responses ORDER BY agent, key, n").fetchall()
    finally:
        db.close()


def baseline_text(rounds: int = 4, count: int = 9) -> str:
    """Embedding-baseline agents with Pareto activity (the agents' generators decide who acts)."""
    return (f'name = "t"\nseed = 5\nrounds = {rounds}\n[activity]\nmodel = "pareto"\nx_min = 3.0\n'
            '[embedder]\nname = "hash"\n' + PERSONAS.format(count=count, policy="embedding_baseline"))


def test_scripted_model_same_log_as_one_process(ray_cluster, write_scenario, run_scenario):
    path = write_scenario(scenario_text(rounds=3, count=6, policy="scripted_feed", llm=True, extra=SCRIPTED))
    one, _ = run_scenario(path)
    sharded, summary = run_scenario(path, overrides=RAY)
    assert summary.stopped is None and summary.llm_calls > 0
    assert event_log(sharded.path) == event_log(one.path)
    assert event_log(one.path)["actions"] and event_log(one.path)["llm_calls"]
    assert journal(sharded.path) == journal(one.path)  # the shards' answers reach the run's cache


def test_records_taken_in_while_the_shards_turn_give_the_same_log(ray_cluster, write_scenario, run_scenario, monkeypatch):
    """The driver takes in the shards' LLM records and journal writes while they take their
    turns (every ``DRAIN_SECONDS``); each agent's calls still land in their order."""
    from townsquare.scaleout import ray_backend

    drained: list[int] = []
    ingest, drain = ray_backend.RayBackend._ingest, ray_backend.RayBackend._drain

    def counting_ingest(self, records, journals):
        if getattr(self, "draining", False):
            drained.append(len(records))
        ingest(self, records, journals)

    async def flagged_drain(self, r, ended):
        self.draining = True
        try:
            await drain(self, r, ended)
        finally:
            self.draining = False

    monkeypatch.setattr(ray_backend, "DRAIN_SECONDS", 0.002)
    monkeypatch.setattr(ray_backend.RayBackend, "_ingest", counting_ingest)
    monkeypatch.setattr(ray_backend.RayBackend, "_drain", flagged_drain)
    extra = SCRIPTED.replace("latency_ms = 1.0", "latency_ms = 25.0") + "[engine]\nconcurrency = 2\n"
    path = write_scenario(scenario_text(rounds=3, count=6, policy="scripted_feed", llm=True, extra=extra))
    one, _ = run_scenario(path)
    sharded, _ = run_scenario(path, overrides=RAY)
    assert sum(drained) > 0  # some records came in while the turns went on
    assert event_log(sharded.path) == event_log(one.path)
    assert journal(sharded.path) == journal(one.path)


def test_a_shard_sends_its_records_at_a_quiet_moment_and_nothing_once_its_turns_end():
    """``Shard.drain`` (no Ray needed: the actor's method on a bare shard): it answers after
    ``after`` once no answer has come for ``QUIET_SECONDS``, waits for a round whose turns have
    not begun, and answers nothing, at once, when the turns end, however long ``after`` is."""
    import asyncio
    import time

    from townsquare.scaleout.ray_shard import Shard

    shard = Shard.__new__(Shard)
    shard.round, shard.records, shard._last_record, shard._turning = 1, [], 0.0, False
    shard.journals = []

    async def scenario():
        shard._turns_ended = asyncio.Event()
        # round 2 has not begun here: the drain waits for it, then for its first records
        waiting = asyncio.ensure_future(shard.drain(2, 0.0))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        shard.round, shard._turning = 2, True
        shard.records.append("call-1")
        shard._last_record = time.monotonic() - 1.0  # quiet for a second
        assert (await asyncio.wait_for(waiting, 5))["records"] == ["call-1"]
        assert shard.records == []
        # a long spacing: the end of the turns answers it at once, with nothing
        long = asyncio.ensure_future(shard.drain(2, 30.0))
        await asyncio.sleep(0.02)
        shard.records.append("call-2")  # goes with the turns' outcome, not with this drain
        shard._turning = False
        shard._turns_ended.set()
        assert (await asyncio.wait_for(long, 5)) == {"records": [], "journal": [], "ended": True}
        assert shard.records == ["call-2"]
        # a round whose turns have ended: nothing
        assert (await asyncio.wait_for(shard.drain(2, 0.0), 5)) == {"records": [], "journal": [], "ended": True}

    asyncio.run(scenario())


def test_embedding_baseline_same_log_as_one_process(ray_cluster, write_scenario, run_scenario):
    path = write_scenario(baseline_text())
    one, _ = run_scenario(path)
    sharded, _ = run_scenario(path, overrides=RAY)
    log = event_log(one.path)
    assert event_log(sharded.path) == log
    assert {row[4] for row in log["actions"]} >= {"post", "like"}


def kill_a_shard(monkeypatch, ray_cluster, shard: int) -> None:
    """Kill ``shard`` while round 2's turns are in flight."""
    from townsquare.scaleout.ray_backend import RayBackend

    take_turns = RayBackend.take_turns

    async def killing(self, r, present, now):
        if r == 2:
            ray_cluster.kill(self.shards[shard])
        return await take_turns(self, r, present, now)

    monkeypatch.setattr(RayBackend, "take_turns", killing)


def test_killed_shard_stops_at_checkpoint_and_resume_gives_the_same_log(ray_cluster, write_scenario, run_scenario, make_plugins,
                                                                       monkeypatch):
    from townsquare.launch.runner import resume_run

    path = write_scenario(scenario_text(rounds=4, count=6, policy="scripted_feed", llm=True, extra=SCRIPTED))
    one, _ = run_scenario(path)
    kill_a_shard(monkeypatch, ray_cluster, 0)
    killed, summary = run_scenario(path, overrides=RAY)
    monkeypatch.undo()
    assert summary.stopped is not None and "Ray shard 0" in summary.stopped
    assert summary.rounds_completed == 2
    manifest = killed.read_manifest()
    assert manifest["status"] == "stopped" and manifest["rounds_completed"] == 2
    _, resumed = resume_run(killed.path, plugins=make_plugins(enable=["townsquare.testing.scripted"]))
    assert resumed.stopped is None and resumed.rounds_completed == 4
    assert event_log(killed.path) == event_log(one.path)
    assert journal(killed.path) == journal(one.path)


def test_budget_stops_at_the_same_call_as_one_process(ray_cluster, write_scenario, run_scenario, make_plugins):
    from townsquare.launch.runner import resume_run

    extra = SCRIPTED + "[plugins.llm_budget]\nmax_calls = 9\n"
    path = write_scenario(scenario_text(rounds=4, count=6, policy="scripted_feed", llm=True, extra=extra))
    one, stop_one = run_scenario(path)
    sharded, stop_sharded = run_scenario(path, overrides=RAY)
    assert stop_one.stopped is not None and "LLM budget reached" in stop_one.stopped
    assert stop_sharded.stopped is not None and "LLM budget reached" in stop_sharded.stopped
    assert stop_sharded.rounds_completed == stop_one.rounds_completed
    assert event_log(sharded.path) == event_log(one.path)
    # the single process's stopped run goes on on Ray, the sharded one in one process
    plugins = make_plugins(enable=["townsquare.testing.scripted"])
    raise_budget = ["plugins.llm_budget.max_calls=1000"]
    resume_run(one.path, overrides=[*raise_budget, *RAY], plugins=plugins)
    resume_run(sharded.path, overrides=[*raise_budget, "engine.backend=local"], plugins=plugins)
    assert event_log(sharded.path) == event_log(one.path)
    assert journal(sharded.path) == journal(one.path)
    assert event_log(one.path)["rounds"][-1][0] == 3


def test_branch_of_a_sharded_run_equals_the_single_process_branch(ray_cluster, write_scenario, run_scenario, make_plugins, tmp_path):
    from townsquare.commands.branch import branch_run, parse_interventions

    path = write_scenario(baseline_text(rounds=4))
    logs = []
    for name, sets in (("one", []), ("sharded", RAY)):
        parent, _ = run_scenario(path, overrides=sets, out=tmp_path / f"parent-{name}", plugins=make_plugins())
        branch, summary = branch_run(parent.path, 2, tmp_path / f"branch-{name}", overrides=sets,
                                     interventions=parse_interventions([("post", "users-0001=Mountains at dawn, hiking"),
                                                                        ("follow", "users-0002=users-0003")]))
        assert summary.stopped is None
        logs.append(event_log(branch.path))
    assert logs[0] == logs[1]
    assert any(row[4] == "post" and row[7] == "Mountains at dawn, hiking" for row in logs[0]["actions"])


# ---------------------------------------------------------------------------- shards own their agents


def ga_text(rounds: int = 4, count: int = 4, extra: str = "") -> str:
    """Park et al.'s generative agents on the social platform (memory streams, retrieval,
    reflection, day plans) with the scripted model: agents whose state grows every round."""
    from test_ga_runs import RULES

    text = (ROOT / "examples" / "generative_agents_social.toml").read_text()
    text = text.replace('path = "personas.jsonl"', f'path = "{ROOT / "examples" / "personas.jsonl"}"')
    text = text.replace("rounds = 8", f"rounds = {rounds}").replace("threshold = 150", "threshold = 30").replace("count = 4", f"count = {count}")
    return text + RULES + "[engine]\nkeep_checkpoints = 0\n" + extra


@pytest.fixture(scope="module")
def ga_reference(tmp_path_factory):
    """The generative agents' scenario (4 rounds) and its run in one process: the log, journal
    and agents' state every Ray run of it must give."""
    from townsquare.launch.runner import start_run

    folder = tmp_path_factory.mktemp("ga")
    path = folder / "ga.toml"
    path.write_text(ga_text(), encoding="utf-8")
    one, summary = start_run(path, out=folder / "one", plugin_options=[SCRIPTED_PLUGIN])
    assert summary.stopped is None
    return path, one


def test_generative_agents_same_log_and_state_as_one_process(ray_cluster, ga_reference, run_scenario, monkeypatch):
    """Agents whose memories grow every round: the same event log, LLM journal and agents'
    state on two shards as in one process; the driver holds no agent's components, each shard
    writes its agents' part of every checkpoint, and the manifest lists each process's memory."""
    from townsquare.engine import Simulation

    driver_components: list[int] = []
    build = Simulation.build

    async def counting(self):
        await build(self)
        driver_components.append(sum(len(a.components) for a in self.world.agents))

    monkeypatch.setattr(Simulation, "build", counting)
    path, one = ga_reference
    sharded, summary = run_scenario(path, overrides=RAY)
    assert summary.stopped is None
    assert driver_components == [0]
    assert event_log(sharded.path) == event_log(one.path)
    assert {"observation", "reflection"} <= {r["kind"] for s in agents_state(one).values() for r in s["memory.stream"]["records"]}
    assert event_log(one.path)["reflections"]  # recorded in the shards, written by the driver in the same order
    assert journal(sharded.path) == journal(one.path)
    assert agents_state(sharded) == agents_state(one)
    files = sorted(p.name for p in (sharded.path / "checkpoints").iterdir())
    assert "round-000003.agents-0-of-2.jsonl.gz" in files and "round-000003.agents-1-of-2.jsonl.gz" in files
    _, main = sharded.latest_checkpoint(agents=False)
    assert "agents" not in main and len(main["agent_parts"]) == 2
    processes = sharded.read_manifest()["processes"]
    assert [p["role"] for p in processes] == ["driver", "shard 0", "shard 1"]
    assert all(p["rss_peak_bytes"] >= p["rss_before_build_bytes"] > 0 and p["cpu_seconds"] > 0 for p in processes)


def agents_state(run_dir) -> dict:
    """Every agent's components' state in the newest checkpoint (arrays as their encoding, so two compare whole)."""
    import json

    from townsquare import state

    _, saved = run_dir.latest_checkpoint()
    return json.loads(state.dumps({agent: entry["components"] for agent, entry in saved["agents"].items()}))


def test_killed_shard_resumes_with_its_memories_from_the_shards_checkpoint(ray_cluster, ga_reference, run_scenario, make_plugins,
                                                                          monkeypatch):
    """A shard killed mid-round: the run stops at its last checkpoint; resumed, each shard reads
    its agents' memories back from the files the shards wrote, and the log equals one process's."""
    from townsquare.launch.runner import resume_run

    path, one = ga_reference
    kill_a_shard(monkeypatch, ray_cluster, 1)
    killed, summary = run_scenario(path, overrides=RAY)
    monkeypatch.undo()
    assert summary.stopped is not None and "Ray shard 1" in summary.stopped and summary.rounds_completed == 2
    _, resumed = resume_run(killed.path, plugins=make_plugins(enable=[SCRIPTED_PLUGIN]))
    assert resumed.stopped is None and resumed.rounds_completed == 4
    assert event_log(killed.path) == event_log(one.path)
    assert agents_state(killed) == agents_state(one)


def test_resume_with_another_number_of_shards_rebalances_the_agents(ray_cluster, ga_reference, write_scenario, run_scenario,
                                                                  make_plugins):
    """A run stopped on 2 shards goes on on 3 (each new shard takes its agents from the two
    shards' files), and one stopped in one process goes on on 2 shards: both logs equal the
    uninterrupted single process's."""
    from townsquare.launch.runner import resume_run

    _, one = ga_reference
    path = write_scenario(ga_text(extra="[plugins.llm_budget]\nmax_calls = 100\n"), "budget.toml")
    plugins = make_plugins(enable=[SCRIPTED_PLUGIN])
    raise_budget = ["plugins.llm_budget.max_calls=100000"]
    for first, then in ((RAY, ["engine.backend=ray", "engine.shards=3"]), (["engine.backend=local"], RAY)):
        stopped, summary = run_scenario(path, overrides=first)
        assert summary.stopped is not None and "LLM budget reached" in summary.stopped and 0 < summary.rounds_completed < 4
        _, resumed = resume_run(stopped.path, overrides=[*raise_budget, *then], plugins=plugins)
        assert resumed.rounds_completed == 4
        assert event_log(stopped.path) == event_log(one.path)
        assert agents_state(stopped) == agents_state(one)


def test_branch_changes_agents_in_their_shards(ray_cluster, ga_reference, run_scenario, tmp_path):
    """A branch's persona and memory interventions reach the agent in the shard that holds it:
    the branch's log equals the single process's branch."""
    from townsquare.commands.branch import branch_run, parse_interventions

    path, one = ga_reference
    sharded, _ = run_scenario(path, overrides=RAY, plugin_options=[SCRIPTED_PLUGIN])
    persona = tmp_path / "persona.txt"
    persona.write_text("I only talk about trains.\nSteam engines are my life.\n")
    logs, states = [], []
    for name, parent, sets in (("one", one, []), ("sharded", sharded, RAY)):
        changes = parse_interventions([("persona", f"townsfolk-0002={persona}"), ("memory", "townsfolk-0003=The bakery burned down.")])
        branch, summary = branch_run(parent.path, 2, tmp_path / f"branch-{name}", overrides=sets, interventions=changes)
        assert summary.stopped is None
        logs.append(event_log(branch.path))
        states.append(agents_state(branch))
    assert logs[0] == logs[1] and states[0] == states[1]
    kept = [r["text"] for r in states[1]["townsfolk-0003"]["memory.stream"]["records"]]
    assert "The bakery burned down." in kept


def test_a_round_hands_over_a_fixed_number_of_times_and_each_call_reaches_the_driver_once(ray_cluster, write_scenario,
                                                                                          run_scenario, monkeypatch):
    """The shape docs/scale.md's model of shard cores assumes (benchmarks/scale_model.py): the
    driver waits on the shards' outcomes twice a round (the turns, the replays) however many
    agents and calls the round has, and every LLM call a shard makes becomes one ``llm_calls``
    row and one journal row on the driver."""
    from townsquare.scaleout import ray_backend

    waits: list[int] = []
    gather = ray_backend.RayBackend._gather

    async def counting(self, calls):
        waits.append(self.world.journal.round)
        return await gather(self, calls)

    monkeypatch.setattr(ray_backend.RayBackend, "_gather", counting)
    per_round = []
    for count in (6, 18):
        waits.clear()
        path = write_scenario(scenario_text(rounds=3, count=count, policy="scripted_feed", llm=True, extra=SCRIPTED), f"s{count}.toml")
        sharded, _ = run_scenario(path, overrides=RAY)
        per_round.append([waits.count(r) for r in range(3)])
        rows = event_log(sharded.path)["llm_calls"]
        assert len(rows) == len(journal(sharded.path)) > count
    assert per_round == [[2, 2, 2], [2, 2, 2]]


def test_a_killed_driver_takes_the_ray_processes_it_started_with_it(write_scenario, tmp_path):
    """``kill -9`` of a driver that started its own local cluster: every process it started
    (Ray's dashboard and runtime-env agents, the shards' workers, the raylet) ends with it,
    where Ray's own checks left the agents running for about a minute."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pytest.importorskip("ray")
    from townsquare.scaleout.ray_reaper import descendants, start_time

    path = write_scenario(baseline_text(rounds=5000, count=40))
    driver = subprocess.Popen([sys.executable, "-c", "from townsquare.cli import main; main()", "run", str(path), "--out",
                               str(tmp_path / "run"), "--backend", "ray", "--set", "engine.shards=2", "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        shards = wait_for(lambda: len([p for p in descendants(driver.pid) if b"ray::Shard" in _cmdline(p)]) == 2, 180)
        assert shards, "the shards did not start"
        processes = [(pid, start_time(pid)) for pid in descendants(driver.pid)]
        names = b" ".join(_cmdline(pid) for pid, _ in processes)
        assert b"ray::DashboardAgent" in names and b"raylet" in names
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    # a generous bound for a busy machine; the reaper ends them within a second or two
    alive = wait_for(lambda: [pid for pid, began in processes if start_time(pid) == began] or None, 45, until_none=True)
    assert not alive, f"still running after the driver was killed: {[_cmdline(pid)[:60] for pid in alive]}"


def wait_for(probe, seconds: float, until_none: bool = False):
    """Poll ``probe()`` every 0.2 s for up to ``seconds``: its first truthy answer (or, with
    ``until_none``, the last answer once it is falsy, else the last one seen)."""
    import time

    deadline, answer = time.monotonic() + seconds, None
    while time.monotonic() < deadline:
        answer = probe()
        if bool(answer) != until_none:
            return answer
        time.sleep(0.2)
    return answer


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ")
    except OSError:
        return b""


def test_the_reaper_kills_what_it_was_told_of_and_nothing_with_another_start_time():
    """The reaper's end (no Ray needed): a watched process is killed when the pipe closes; a pid
    whose process has another start time (the system gave the pid to someone else) is left alone."""
    import io
    import subprocess

    from townsquare.scaleout.ray_reaper import reap, start_time

    watched, other = (subprocess.Popen(["sleep", "60"]) for _ in range(2))
    try:
        lines = io.StringIO(f"{watched.pid} {start_time(watched.pid)}\n{other.pid} 1\nnot a line\n")
        assert reap(lines) == 1
        assert watched.wait(10) == -9
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
        watched.kill()


# ---------------------------------------------------------------------------- without a cluster


def test_missing_ray_is_a_one_line_install_hint(monkeypatch, write_scenario, tmp_path, capsys):
    import sys

    from townsquare.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, find_spec says None
    path = write_scenario(baseline_text())
    with pytest.raises(SystemExit) as exit:
        main(["run", str(path), "--out", str(tmp_path / "run"), "--backend", "ray"])
    assert exit.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "engine.backend" in err and "pip install 'townsquare[ray]'" in err
    assert not (tmp_path / "run").exists()


def test_shards_get_equal_shares_of_the_concurrency_limits(make_plugins, write_scenario):
    from townsquare.scaleout.ray_backend import shard_scenario
    from townsquare.launch.scenario_files import load_scenario

    extra = SCRIPTED + "[engine]\nconcurrency = 100\n[plugins.llm_concurrency]\nlimit = 30\n"
    path = write_scenario(scenario_text(policy="scripted_feed", llm=True, extra=extra))
    scenario = load_scenario(path, [], make_plugins(enable=["townsquare.testing.scripted"]))
    shard = shard_scenario(scenario, 1, 4, ledger=None)
    assert shard.model.engine.concurrency == 25
    link = next(c for c in shard.llm_middleware if c.spec.name == "llm_concurrency")
    assert link.config.limit == 8 and shard.model.plugins["llm_concurrency"]["limit"] == 8
    assert scenario.model.engine.concurrency == 100  # the driver's scenario is left as it was


def test_endpoints_are_spread_over_shards():
    from townsquare.plugins.llm.openai import Endpoint, OpenAIConfig
    from townsquare.scaleout.ray_backend import spread_endpoints

    config = OpenAIConfig(base_url="http://a/v1", api_key_env="", endpoints=[
        Endpoint(base_url=f"http://{name}/v1", api_key_env="") for name in "bcd"])

    def urls(shard: int, shards: int) -> list[str]:
        mine = spread_endpoints(config, shard, shards)
        return [mine.base_url, *(e.base_url for e in mine.endpoints)]

    assert [urls(k, 2) for k in range(2)] == [["http://a/v1", "http://c/v1"], ["http://b/v1", "http://d/v1"]]
    assert urls(5, 8) == ["http://b/v1", "http://c/v1", "http://d/v1", "http://a/v1"]  # fewer than shards: all, rotated


def test_an_unreachable_cluster_is_one_line_at_once():
    from townsquare.errors import UsageError
    from townsquare.scaleout.ray_backend import _check_reachable

    for address in ("127.0.0.1:1", "ray://127.0.0.1:1"):
        with pytest.raises(UsageError, match="no Ray cluster answers there"):
            _check_reachable(address, timeout=2)
    with pytest.raises(UsageError, match="expected HOST:PORT"):
        _check_reachable("nowhere")
    _check_reachable("auto")  # left to Ray


def test_recagent_reads_other_agents_the_same_on_ray(ray_cluster, write_scenario, run_scenario):
    """RecAgent's chat reads the partner's memory through the platform: the shards' copies of
    the other agents must hold their owners' state."""
    from test_recagent_policy import scenario

    path = write_scenario(scenario(rounds=4))
    one, _ = run_scenario(path)
    sharded, _ = run_scenario(path, overrides=RAY)
    log = event_log(one.path)
    assert event_log(sharded.path) == log
    assert {"chat", "broadcast"} & {row[4] for row in log["actions"]}  # friends' messages reach memories


def test_a_shard_copy_that_answers_otherwise_stops_the_round_naming_the_write():
    """The shards replay the round's writes while the driver applies them; each sends back what
    its copy answered, and the first write answered otherwise than on the driver is named."""
    import asyncio
    import types

    from townsquare.actions import Action, ActionResult
    from townsquare.scaleout.ray_backend import RayBackend
    from townsquare.scaleout.ray_shard import ShardDiverged

    backend = RayBackend.__new__(RayBackend)  # no cluster: the replays' outcomes are given
    errors = types.SimpleNamespace(RayActorError=type("RayActorError", (Exception,), {}),
                                   RayTaskError=type("RayTaskError", (Exception,), {}))
    backend.ray, backend.shards, backend._journal = types.SimpleNamespace(exceptions=errors), [], None
    backend.world = types.SimpleNamespace(changed=lambda named: None, take_in_calls=lambda records: None)
    backend._agents, backend._reflections = {}, []
    post, like = Action("a0", "post", text="hi"), Action("a1", "like", target_post="p1")

    async def replayed(answers):
        return {"answers": answers, "states": {}, "records": [], "journal": []}

    async def round_applied(*answers):
        backend._applied = [("a0", [(post, ActionResult(created_id="p1"))]), ("a1", [(like, ActionResult())])]
        backend._replays = [asyncio.ensure_future(replayed(a)) for a in answers]
        await backend.round_applied(3, [])

    agreed = [(True, "p1"), (True, None)]
    asyncio.run(round_applied(agreed, agreed))
    with pytest.raises(ShardDiverged, match=r"^shard 1: round 3, like by a1: the platform copy answered False/None, "
                                            r"the driver's True/None$"):
        asyncio.run(round_applied(agreed, [(True, "p1"), (False, None)]))
    with pytest.raises(ShardDiverged, match=r"^shard 0: round 3, like by a1: the platform copy answered nothing"):
        asyncio.run(round_applied([(True, "p1")], agreed))
