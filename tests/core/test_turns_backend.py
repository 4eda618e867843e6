"""The Turns contract is open: a backend written against ``townsquare.api`` alone (worker threads,
tests/thread_turns_support.py) plays the quickstart on the scripted model with the event log of
the local turns, and resumes and branches as one process does."""

from __future__ import annotations

import ast

from helpers import ROOT, event_log
from thread_turns_support import BACKEND, PLUGIN
from townsquare.launch.runner import resume_run, start_run

QUICKSTART = ROOT / "examples" / "quickstart.toml"
#: the quickstart on the scripted model, 4 rounds of half a day (plans, posts with knowledge, likes
#: by the similarity rule, decisions by the model); checkpoints kept for the resume below
SETTINGS = ['llm={ name = "scripted" }', "rounds=4", "clock.minutes_per_round=720", "engine.keep_checkpoints=0"]
THREADS = ['engine.backend="threads"']


def test_the_thread_backend_imports_only_the_declared_api():
    tree = ast.parse((ROOT / "tests" / "thread_turns_support.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert {name for name in imported if name and name.startswith("townsquare")} == {"townsquare.api"}


def test_a_backend_written_against_the_api_gives_the_local_event_log(tmp_path, make_plugins):
    plugins = make_plugins(enable=["townsquare.testing.scripted", PLUGIN])
    BACKEND.connected.clear()
    local, summary = start_run(QUICKSTART, overrides=SETTINGS, out=tmp_path / "local", plugins=plugins)
    assert summary.stopped is None
    threads, summary = start_run(QUICKSTART, overrides=[*SETTINGS, *THREADS], out=tmp_path / "threads", plugins=plugins)
    assert summary.stopped is None
    assert BACKEND.connected == ["threads"]
    log = event_log(local.path)
    assert event_log(threads.path) == log
    assert {row[4] for row in log["actions"]} >= {"post", "like"} and len(log["llm_calls"]) > 20
    # the agents' state the workers checkpointed is the local turns'
    assert threads.latest_checkpoint()[1]["agents"] == local.latest_checkpoint()[1]["agents"]


def test_a_run_stopped_in_one_process_resumes_on_the_thread_backend_to_the_same_log(tmp_path, make_plugins, monkeypatch):
    """The workers (three of them) read their agents back from the checkpoint the local turns wrote."""
    monkeypatch.setattr(BACKEND, "workers", 3)
    plugins = make_plugins(enable=["townsquare.testing.scripted", PLUGIN])
    local, _ = start_run(QUICKSTART, overrides=SETTINGS, out=tmp_path / "local", plugins=plugins)
    budget = ["plugins.llm_budget.max_calls=40"]
    stopped, summary = start_run(QUICKSTART, overrides=[*SETTINGS, *budget], out=tmp_path / "stopped", plugins=plugins)
    assert summary.stopped is not None and "LLM budget reached" in summary.stopped and 0 < summary.rounds_completed < 4
    _, resumed = resume_run(stopped.path, overrides=["plugins.llm_budget.max_calls=100000", *THREADS], plugins=plugins)
    assert resumed.rounds_completed == 4
    assert event_log(stopped.path) == event_log(local.path)


def test_a_branch_on_the_thread_backend_changes_agents_in_their_workers(tmp_path, make_plugins):
    """A branch's persona and memory changes reach the agent in the worker that holds it: the
    branch's log equals the local branch's."""
    from townsquare.commands.branch import branch_run, parse_interventions

    plugins = make_plugins(enable=["townsquare.testing.scripted", PLUGIN])
    persona = tmp_path / "persona.txt"
    persona.write_text("I only talk about trains.\nSteam engines are my life.\n")
    logs = []
    for name, sets in (("local", []), ("threads", THREADS)):
        parent, _ = start_run(QUICKSTART, overrides=[*SETTINGS, *sets], out=tmp_path / f"parent-{name}", plugins=plugins)
        changes = parse_interventions([("persona", f"regular-0002={persona}"), ("memory", "regular-0003=The bakery burned down.")])
        branch, summary = branch_run(parent.path, 2, tmp_path / f"branch-{name}", overrides=sets, interventions=changes)
        assert summary.stopped is None
        logs.append(event_log(branch.path))
    assert logs[0] == logs[1]
    assert "trains" in dict((row[0], row[4]) for row in logs[0]["agents"])["regular-0002"]
