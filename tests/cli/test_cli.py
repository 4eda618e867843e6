"""The command line: version, plugins listing, run with progress, export formats, JSON logs."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from helpers import ROOT, scenario_text
from townsquare import __version__
from townsquare.plugin_manager import DEFAULT_PLUGINS, canonical_name


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_version():
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"townsquare, version {__version__}"


def test_plugins_json_lists_every_builtin_with_hooks_and_components():
    out = cli("plugins", "--json")
    assert out.returncode == 0, out.stderr
    listed = {row["name"]: row for row in json.loads(out.stdout)}
    for module in DEFAULT_PLUGINS:
        row = listed[canonical_name(module)]
        assert row["status"] == "loaded" and row["source"] == "builtin" and row["version"] == __version__
        # every built-in implements hooks; those that only add commands, offer an engine
        # backend, resolve data: paths or declare a design's typical answers register no component
        assert row["hooks"], row
        assert row["components"] or set(row["hooks"]) <= {"townsquare_register_commands", "townsquare_engine_backend",
                                                            "townsquare_resolve_data_references",
                                                            "townsquare_register_answer_priors"}, row
    assert {"slot": "platform", "name": "in_memory", "priority": 100} in listed["in_memory"]["components"]
    assert "townsquare_register_platforms" in listed["in_memory"]["hooks"]


def test_plugins_all_shows_disabled():
    out = cli("plugins", "--all", "--json", "-p", "no:random")
    rows = {row["name"]: row for row in json.loads(out.stdout)}
    assert rows["random"]["status"] == "disabled"
    assert "random" not in {row["name"] for row in json.loads(cli("plugins", "--json", "-p", "no:random").stdout)}


def test_plugins_text_listing():
    out = cli("plugins")
    assert out.returncode == 0 and "in_memory" in out.stdout and "platform: in_memory" in out.stdout


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    scenario = tmp / "s.toml"
    scenario.write_text(scenario_text(rounds=4, count=3))
    out = cli("run", str(scenario), "--out", str(tmp / "run"), "--set", "rounds=5", "--seed", "3")
    assert out.returncode == 0, out.stderr
    return tmp / "run", out


def test_run_prints_slot_table_progress_and_summary(finished_run):
    run_dir, out = finished_run
    assert "users  policy" in out.stderr and "embedding_baseline" in out.stderr
    assert "round 5/5" in out.stderr
    assert f"finished: {run_dir} — 5 rounds" in out.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["rounds"] == 5 and manifest["overrides"] == ["rounds=5"]
    assert manifest["status"] == "finished" and manifest["rounds_completed"] == 5
    assert manifest["plugins"]["in_memory"] == __version__
    assert {"scope": "users", "slot": "policy", "component": "embedding_baseline", "plugin": "embedding_baseline"} in manifest["slot_table"]
    assert (run_dir / "checkpoints" / "round-000004.json.gz").is_file()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_formats(finished_run, tmp_path, fmt):
    run_dir, _ = finished_run
    out = cli("export", str(run_dir), "--format", fmt, "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    for table in ("agents", "posts", "actions", "follows", "llm_calls", "metrics"):
        assert (tmp_path / f"{table}.{fmt}").is_file()
    if fmt == "csv":
        with open(tmp_path / "agents.csv") as fh:
            rows = list(csv.DictReader(fh))
        assert [r["agent_id"] for r in rows] == ["users-0001", "users-0002", "users-0003"]
    elif fmt == "jsonl":
        first = json.loads((tmp_path / "actions.jsonl").read_text().splitlines()[0])
        assert {"seq", "round", "agent_id", "kind"} <= set(first)
    else:
        assert pq.read_table(tmp_path / "agents.parquet").num_rows == 3


def test_log_json_writes_json_lines(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=1))
    out = cli("--log-json", "run", str(scenario), "--out", str(tmp_path / "r"), "-p", "no:nonesuch")
    assert out.returncode == 0, out.stderr
    logged = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    assert any(entry["event"] == "plugin.unknown_disabled" and entry["plugin"] == "nonesuch" for entry in logged)


def test_out_dir_must_be_empty(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=1))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    out = cli("run", str(scenario), "--out", str(tmp_path / "busy"))
    assert out.returncode == 2 and out.stderr.strip() == f"error: --out {tmp_path / 'busy'}: directory exists and is not empty"


def test_default_run_dir_never_overwrites(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=1))
    for _ in range(2):
        assert cli("run", str(scenario), "--quiet", cwd=tmp_path).returncode == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["t", "t-2"]


def test_readme_main_job_scenario_runs(tmp_path):
    out = cli("run", str(ROOT / "examples" / "baseline.toml"), "--out", str(tmp_path / "r"), "--set", "rounds=6")
    assert out.returncode == 0, out.stderr
    assert "finished" in out.stderr and " like " in out.stderr


@pytest.mark.parametrize("model,banner", [("scripted", "LLM: scripted TEST model"), ("oracle", "LLM: oracle TEST model")])
def test_a_test_model_needs_no_extra_plugin_option_and_is_announced(model, banner, tmp_path):
    """``--llm scripted`` / ``--llm oracle`` load the testing kit's plugin themselves, say so
    loudly, and the run records it (a resume finds the model again)."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=1, policy="social_agent"))
    out = cli("run", str(scenario), "--out", str(tmp_path / "run"), "--llm", model)
    assert out.returncode == 0, out.stderr
    assert banner in out.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["plugin_options"] == [f"townsquare.testing.{model}"] and manifest["scenario"]["llm"]["name"] == model
    assert cli("resume", str(tmp_path / "run"), "--set", "rounds=2").returncode == 0


def test_a_loaded_test_model_is_never_chosen_automatically():
    """With the testing kit's models loaded but no [llm] named, ``auto`` picks a real provider."""
    from townsquare.plugin_manager import make_plugin_manager

    plugins = make_plugin_manager(enable=["townsquare.testing.scripted", "townsquare.testing.oracle"], autoload=False)
    assert plugins.registry.auto("llm").name not in ("scripted", "oracle")
