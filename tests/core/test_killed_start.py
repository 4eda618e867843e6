"""A run killed in its first moments leaves a lock of a dead process, perhaps an empty
``checkpoints/`` and the manifest it was writing (``manifest.json.tmp``): ``run --out`` takes
that directory again and ``resume`` says so in one line. Killed at any later moment, the
directory is a run that ``resume`` finishes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import cli_in_process, scenario_text

#: imports townsquare once, then per line of arguments forks a child that runs that command
#: line, says its pid and, once the child is gone, "done": each kill lands while a command runs
DRIVER = """
import os, sys
from townsquare.cli import main
print("ready", flush=True)
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            main(line.rstrip("\\n").split("\\t"))
        finally:
            os._exit(0)
    print(pid, flush=True)
    os.waitpid(pid, 0)
    print("done", flush=True)
"""


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def killed_start(run: Path) -> None:
    """What a run killed while writing its first manifest leaves behind."""
    (run / "checkpoints").mkdir(parents=True)
    (run / ".lock").write_text(json.dumps({"pid": dead_pid(), "host": "here", "started_at": "2026-01-01T00:00:00+00:00",
                                           "command": "townsquare run s.toml"}) + "\n")
    (run / "manifest.json.tmp").write_text('{"townsquare_version": "0.1", "na')


def test_run_out_takes_back_a_killed_start_and_resume_explains_it(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2))
    run = tmp_path / "run"
    killed_start(run)
    code, _, err = cli_in_process(capsys, "resume", str(run), "--quiet")
    assert code == 2
    assert err.strip() == (f"error: {run}: the run was stopped before it wrote anything (no manifest.json, no checkpoint): "
                           f"there is nothing to continue; start it again with townsquare run SCENARIO --out {run}")
    code, _, err = cli_in_process(capsys, "run", str(scenario), "--out", str(run), "--quiet")
    assert code == 0, err
    assert json.loads((run / "manifest.json").read_text())["status"] == "finished"
    assert not (run / "manifest.json.tmp").exists()


def test_a_directory_with_a_run_in_it_is_not_taken(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2))
    assert cli_in_process(capsys, "run", str(scenario), "--out", str(tmp_path / "run"), "--quiet")[0] == 0
    code, _, err = cli_in_process(capsys, "run", str(scenario), "--out", str(tmp_path / "run"), "--quiet")
    assert code == 2
    assert err.strip() == (f"error: --out {tmp_path / 'run'}: holds a run (manifest.json); continue it with "
                           f"townsquare resume {tmp_path / 'run'}, or choose an empty directory")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    code, _, err = cli_in_process(capsys, "run", str(scenario), "--out", str(tmp_path / "other"), "--quiet")
    assert code == 2 and err.strip() == f"error: --out {tmp_path / 'other'}: directory exists and is not empty"


def test_a_killed_start_held_by_a_live_process_is_not_taken(tmp_path, capsys):
    run = tmp_path / "run"
    killed_start(run)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'a'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.readline()", str(run / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = cli_in_process(capsys, "resume", str(run), "--quiet")
        assert code == 2 and err.strip().startswith(f"error: {run}: in use by process ")
    finally:
        holder.communicate("\n")


@pytest.mark.slow
def test_runs_killed_at_0_to_50_ms_are_taken_back_or_resumed(tmp_path, capsys):
    """Whatever moment the kill lands on, the directory is either taken back by ``run --out``
    (after ``resume`` said so in one line) or finished by ``resume``: never an error that
    leaves the user to delete it by hand."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2))
    rng = random.Random(38)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert driver.stdout.readline().strip() == "ready"
        for attempt in range(12):
            run = tmp_path / f"run{attempt}"
            driver.stdin.write("\t".join(["run", str(scenario), "--out", str(run), "--quiet"]) + "\n")
            driver.stdin.flush()
            pid = int(driver.stdout.readline())
            while not run.exists() and driver.poll() is None:
                time.sleep(0.0005)
            time.sleep(rng.uniform(0, 0.05))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # done already
            assert driver.stdout.readline().strip() == "done"
            check_taken_back_or_resumed(capsys, scenario, run)
    finally:
        driver.stdin.close()
        driver.wait()


def check_taken_back_or_resumed(capsys, scenario: Path, run: Path) -> None:
    if not run.exists() or not any(run.iterdir()):
        return  # killed before it made anything
    code, _, err = cli_in_process(capsys, "resume", str(run), "--quiet")
    if code != 0:
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f"start it again with townsquare run SCENARIO --out {run}" in err, err
        code, _, err = cli_in_process(capsys, "run", str(scenario), "--out", str(run), "--quiet")
        assert code == 0, err
    assert json.loads((run / "manifest.json").read_text())["status"] == "finished"
