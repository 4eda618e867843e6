"""A run killed with SIGKILL mid-round and resumed equals an uninterrupted run: same export."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, scenario_text

EXTRA = """
[recommender]
name = "random"
[plugins.scripted]
policy_post_probability = 0.6
"""


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True, env=full_env)


def exported(run_dir: Path, out: Path) -> dict[str, list[dict[str, str]]]:
    result = cli("export", str(run_dir), "--format", "csv", "--out", str(out))
    assert result.returncode == 0, result.stderr
    tables = {}
    for path in sorted(out.glob("*.csv")):
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        for row in rows:
            row.pop("latency_ms", None)  # wall-clock time: the only column allowed to differ
        tables[path.stem] = rows
    return tables


@pytest.mark.parametrize("during,checkpoint_every", [("action", 1), ("llm", 1), ("action", 2)])
def test_sigkill_mid_round_then_resume_equals_uninterrupted(tmp_path, during, checkpoint_every):
    scenario = tmp_path / "s.toml"
    extra = EXTRA + f"[engine]\ncheckpoint_every = {checkpoint_every}\n"
    scenario.write_text(scenario_text(rounds=6, count=5, policy="scripted_feed", llm=True, extra=extra))
    plugin_args = ["-p", "townsquare.testing.scripted", "-p", "kill_switch"]

    whole = cli("run", str(scenario), "--out", str(tmp_path / "whole"), *plugin_args)
    assert whole.returncode == 0, whole.stderr

    killed = cli("run", str(scenario), "--out", str(tmp_path / "killed"), *plugin_args,
                 env={"KILL_AT_ROUND": "3", "KILL_DURING": during})
    assert killed.returncode == -9, killed.stderr
    manifest = json.loads((tmp_path / "killed" / "manifest.json").read_text())
    assert manifest["status"] == "running"

    resumed = cli("resume", str(tmp_path / "killed"))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((tmp_path / "killed" / "manifest.json").read_text())["status"] == "finished"

    a = exported(tmp_path / "whole", tmp_path / "export_whole")
    b = exported(tmp_path / "killed", tmp_path / "export_killed")
    assert set(a) == {"agents", "posts", "actions", "follows", "llm_calls", "reflections", "metrics", "memories"}
    assert a["actions"] and a["posts"] and a["llm_calls"]
    for table in a:
        assert a[table] == b[table], f"table {table} differs after kill and resume"


def test_resume_of_a_finished_run_adds_nothing(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2))
    assert cli("run", str(scenario), "--out", str(tmp_path / "r")).returncode == 0
    before = exported(tmp_path / "r", tmp_path / "e1")
    again = cli("resume", str(tmp_path / "r"))
    assert again.returncode == 0, again.stderr
    assert exported(tmp_path / "r", tmp_path / "e2") == before


def test_resume_needs_a_run_directory(tmp_path):
    out = cli("resume", str(tmp_path))
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: {tmp_path}: not a run directory (no manifest.json)"
