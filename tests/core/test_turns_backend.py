"""The Turns contract is open: a backend written against ``townsquare.api`` alone (worker threads,
tests/thread_turns_support.py) plays the quickstart on the scripted model with the event log of
the local turns, and resumes and branches as one process does."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

from helpers import ROOT
from thread_turns_support import ThreadsPlugin
from townsquare.launch.runner import resume_run, start_run

QUICKSTART = ROOT / "examples" / "quickstart.toml"
#: the quickstart on the scripted model, 4 rounds of half a day (plans, posts with knowledge, likes
#: by the similarity rule, decisions by the model); checkpoints kept for the resume below
SETTINGS = ['llm={ name = "scripted" }', "rounds=4", "clock.minutes_per_round=720", "engine.keep_checkpoints=0"]
THREADS = ['engine.backend="threads"']
WALL_CLOCK = {"latency_ms", "wall_seconds"}


def event_log(run_dir: Path) -> dict[str, list[tuple]]:
    db = sqlite3.connect(f"file:{run_dir}/events.sqlite?mode=ro", uri=True)
    try:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        log = {}
        for table in tables:
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})") if row[1] not in WALL_CLOCK]
            log[table] = db.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid").fetchall()
        return log
    finally:
        db.close()


def test_the_thread_backend_imports_only_the_declared_api():
    tree = ast.parse((ROOT / "tests" / "thread_turns_support.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert {name for name in imported if name and name.startswith("townsquare")} == {"townsquare.api"}


def test_a_backend_written_against_the_api_gives_the_local_event_log(tmp_path, make_plugins):
    plugins = make_plugins(ThreadsPlugin(workers=2), enable=["townsquare.testing.scripted"])
    local, summary = start_run(QUICKSTART, overrides=SETTINGS, out=tmp_path / "local", plugins=plugins)
    assert summary.stopped is None
    threads, summary = start_run(QUICKSTART, overrides=[*SETTINGS, *THREADS], out=tmp_path / "threads", plugins=plugins)
    assert summary.stopped is None
    assert plugins.hook.townsquare_engine_backend(name="threads").connected == ["threads"]
    log = event_log(local.path)
    assert event_log(threads.path) == log
    assert {row[4] for row in log["actions"]} >= {"post", "like"} and len(log["llm_calls"]) > 20
    # the agents' state the workers checkpointed is the local turns'
    assert threads.latest_checkpoint()[1]["agents"] == local.latest_checkpoint()[1]["agents"]


def test_a_run_stopped_in_one_process_resumes_on_the_thread_backend_to_the_same_log(tmp_path, make_plugins):
    """The workers read their agents back from the checkpoint the local turns wrote."""
    plugins = make_plugins(ThreadsPlugin(workers=3), enable=["townsquare.testing.scripted"])
    local, _ = start_run(QUICKSTART, overrides=SETTINGS, out=tmp_path / "local", plugins=plugins)
    budget = ["plugins.llm_budget.max_calls=40"]
    stopped, summary = start_run(QUICKSTART, overrides=[*SETTINGS, *budget], out=tmp_path / "stopped", plugins=plugins)
    assert summary.stopped is not None and "LLM budget reached" in summary.stopped and 0 < summary.rounds_completed < 4
    _, resumed = resume_run(stopped.path, overrides=["plugins.llm_budget.max_calls=100000", *THREADS], plugins=plugins)
    assert resumed.rounds_completed == 4
    assert event_log(stopped.path) == event_log(local.path)
