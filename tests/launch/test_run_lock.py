"""One writer per run directory: ``run``, ``resume`` and ``replay`` lock it; a second
process stops with one line naming the holder, exit 2, and touches nothing; a lock left by a
process killed with ``kill -9`` is taken over.

Runs are held mid-round with the ``run_gate`` test plugin (tests/support/run_gate.py), so the
tests never depend on how fast the machine is.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from structlog.testing import capture_logs

from helpers import ROOT, read_table, scenario_text
from townsquare.launch.run_lock import RunDirBusy, claim, locked
from townsquare.rundir import RunDir

GATE = ["-p", "run_gate"]
#: hang guard for a subprocess to reach its gate: far above a normal second or two
REACH_S = 300


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support"), "TOWNSQUARE_LOG_LEVEL": "error", **extra}


def cli(*args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True, env=env(**extra))


def start(*args: str, **extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "townsquare.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env(**extra))


def wait_reached(gate: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + REACH_S
    while not Path(str(gate) + ".reached").exists():
        if proc.poll() is not None:
            pytest.fail(f"the gated run ended early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the gated run never reached its gate")
        time.sleep(0.02)


@contextmanager
def held_mid_run(gate: Path, *args: str) -> Iterator[subprocess.Popen]:
    """A CLI command held at the start of round 2 for the ``with`` body, then let go; it must
    then end with status 0."""
    proc = start(*args, RUN_GATE=str(gate), RUN_GATE_ROUND="2")
    try:
        wait_reached(gate, proc)
        yield proc
        gate.touch()
        _, err = proc.communicate(timeout=REACH_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err


def digest(folder: Path) -> dict[str, str]:
    """Every file of a run directory but SQLite's -wal/-shm and the lock file itself."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock" and not p.name.endswith(("-wal", "-shm"))}


def tables(run: Path) -> dict[str, list[tuple]]:
    """The run's tables, without llm_calls' wall-clock latency (there are no LLM calls here)."""
    return {t: read_table(run, t) for t in ("agents", "posts", "actions", "follows", "metrics")}


def refused_by(result_err: str, returncode: int, holder_pid: int) -> None:
    lines = result_err.strip().splitlines()
    assert returncode == 2 and len(lines) == 1, result_err
    assert f"in use by process {holder_pid} on host {socket.gethostname()}" in lines[0], lines[0]


@pytest.fixture
def scenario(tmp_path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(rounds=4, count=3))
    return path


# --------------------------------------------------------------------------- the lock alone


def test_a_second_lock_is_refused_with_the_holder_named(tmp_path):
    run = RunDir(tmp_path)
    with locked(run):
        holder = json.loads((tmp_path / ".lock").read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(RunDirBusy) as info:
            with locked(tmp_path):
                pass
        assert f"in use by process {os.getpid()} on host {socket.gethostname()}" in str(info.value)
        assert "\n" not in str(info.value)
    assert (tmp_path / ".lock").read_text() == ""  # released cleanly
    with locked(run):
        pass


def test_the_lock_is_released_when_the_body_fails(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with locked(tmp_path):
            1 / 0
    with locked(tmp_path):
        pass


def test_a_stale_lock_of_a_process_killed_with_sigkill_is_taken_over(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom townsquare.launch.run_lock import locked\n"
         "with locked(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(600)\n", str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirBusy, match=f"process {holder.pid}"):
            with locked(tmp_path):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == holder.pid  # its text is left behind
    with capture_logs() as logs:
        with locked(tmp_path):
            assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    stale = [e for e in logs if e["event"] == "run_dir.stale_lock_taken_over"]
    assert stale and f"process {holder.pid}" in stale[0]["previous"]


def test_claim_removes_what_it_made_when_the_build_fails(tmp_path):
    with pytest.raises(ValueError):
        with claim(tmp_path / "new", "x"):
            raise ValueError("a broken persona file")
    assert not (tmp_path / "new").exists()
    with claim(tmp_path / "kept", "x") as run:
        run.started = True
    assert (tmp_path / "kept" / "checkpoints").is_dir()


# --------------------------------------------------------------------------- whole commands


def test_run_run_and_resume_while_a_run_is_alive_are_refused(scenario, tmp_path):
    """``run S --out D`` twice, and ``resume D`` while the first still runs: exit 2, one line
    naming the first process, nothing changed; the first run then ends as if alone."""
    reference = cli("run", str(scenario), "--out", str(tmp_path / "ref"), *GATE, "--quiet")
    assert reference.returncode == 0, reference.stderr
    with held_mid_run(tmp_path / "gate", "run", str(scenario), "--out", str(tmp_path / "d"), *GATE, "--quiet") as first:
        before = digest(tmp_path / "d")
        for args in (["run", str(scenario), "--out", str(tmp_path / "d")], ["resume", str(tmp_path / "d")]):
            second = cli(*args)
            refused_by(second.stderr, second.returncode, first.pid)
            assert digest(tmp_path / "d") == before
    assert json.loads((tmp_path / "d" / "manifest.json").read_text())["status"] == "finished"
    assert tables(tmp_path / "d") == tables(tmp_path / "ref")


def test_two_concurrent_resumes_of_one_run(scenario, tmp_path):
    """One resumes, the other is refused; the result equals a resume that ran alone."""
    for name in ("alone", "d"):
        made = cli("run", str(scenario), "--out", str(tmp_path / name), *GATE, "--quiet", "--set", "rounds=1")
        assert made.returncode == 0, made.stderr
    alone = cli("resume", str(tmp_path / "alone"), "--set", "rounds=4", "--quiet")
    assert alone.returncode == 0, alone.stderr

    with held_mid_run(tmp_path / "gate", "resume", str(tmp_path / "d"), "--set", "rounds=4", "--quiet") as first:
        before = digest(tmp_path / "d")
        second = cli("resume", str(tmp_path / "d"), "--set", "rounds=4", "--quiet")
        refused_by(second.stderr, second.returncode, first.pid)
        assert digest(tmp_path / "d") == before
    assert tables(tmp_path / "d") == tables(tmp_path / "alone")


def test_run_and_run_into_one_directory_at_once(scenario, tmp_path):
    """``run S --out D & run S --out D``: one finishes, the other exits 2 with one line (the
    lock's holder, or the run the winner already made there)."""
    both = [start("run", str(scenario), "--out", str(tmp_path / "d"), "--quiet") for _ in range(2)]
    results = [(p.wait(timeout=REACH_S), p.communicate()[1]) for p in both]
    assert sorted(code for code, _ in results) == [0, 2], results
    loser = next(err for code, err in results if code == 2).strip().splitlines()
    assert len(loser) == 1 and ("in use by process" in loser[0] or "holds a run (manifest.json); continue it with" in loser[0]), loser
    assert json.loads((tmp_path / "d" / "manifest.json").read_text())["status"] == "finished"
    assert len(read_table(tmp_path / "d", "agents")) == 3


def test_a_killed_run_leaves_a_lock_that_resume_takes_over(scenario, tmp_path):
    gate = tmp_path / "gate"
    first = start("run", str(scenario), "--out", str(tmp_path / "d"), *GATE, "--quiet", RUN_GATE=str(gate), RUN_GATE_ROUND="2")
    wait_reached(gate, first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert json.loads((tmp_path / "d" / ".lock").read_text())["pid"] == first.pid
    resumed = cli("resume", str(tmp_path / "d"), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    reference = cli("run", str(scenario), "--out", str(tmp_path / "ref"), *GATE, "--quiet")
    assert reference.returncode == 0, reference.stderr
    assert tables(tmp_path / "d") == tables(tmp_path / "ref")


def test_replay_waits_for_nobody_and_touches_nothing(tmp_path):
    """``replay`` of a run that another process holds (a ``resume``, say) is refused; once
    the lock is free the replay runs and is identical."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2, count=3, policy="scripted_feed", llm=True))
    made = cli("run", str(scenario), "--out", str(tmp_path / "d"), "-p", "townsquare.testing.scripted", "--quiet")
    assert made.returncode == 0, made.stderr
    with locked(tmp_path / "d"):
        before = digest(tmp_path / "d")
        refused = cli("replay", str(tmp_path / "d"), "--out", str(tmp_path / "again"))
        refused_by(refused.stderr, refused.returncode, os.getpid())
        assert digest(tmp_path / "d") == before and not (tmp_path / "again").exists()
    replayed = cli("replay", str(tmp_path / "d"), "--out", str(tmp_path / "again"))
    assert replayed.returncode == 0 and "replay identical" in replayed.stderr, replayed.stderr


def test_a_clean_stop_while_building_keeps_the_directory_for_resume(tmp_path, monkeypatch):
    """A budget or outage met while personas are built is not an input error: the directory
    stays, marked stopped with the reason."""
    from townsquare.errors import RunStopped
    from townsquare.launch.runner import start_run

    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2))

    def outage(*_args, **_kwargs):
        raise RunStopped("LLM endpoint unavailable while building")

    monkeypatch.setattr("townsquare.engine.Simulation.build", outage)
    with pytest.raises(RunStopped):
        start_run(scenario, out=tmp_path / "d")
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["status"] == "stopped" and manifest["stop_reason"] == "LLM endpoint unavailable while building"
