"""``townsquare.notebook``: the Python API does what the commands do (it calls their functions),
in a plain script and inside a running event loop (Jupyter), and reads every table as a
DataFrame."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
import types

import pytest

import townsquare.notebook as ts
from helpers import ROOT, read_table, run_cli, scenario_text
from townsquare.errors import UsageError
from townsquare.launch.scenario_files import apply_overrides, override_lines

BASELINE = ROOT / "examples" / "baseline.toml"
SCRIPTED = ["townsquare.testing.scripted"]

def test_the_documented_script_starts_branches_and_reads_actions_inside_asyncio_run(tmp_path):
    """docs/notebook.md's script: inside ``asyncio.run``, baseline.toml for 2 rounds, a branch at
    round 1, the branch's actions as a DataFrame."""
    doc = (ROOT / "docs" / "notebook.md").read_text()
    [script] = [block for block in re.findall(r"```python\n(.*?)```", doc, re.S) if "asyncio.run(main())" in block]
    (tmp_path / "examples").mkdir()
    for name in ("baseline.toml", "personas.jsonl"):
        shutil.copy(ROOT / "examples" / name, tmp_path / "examples" / name)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    parent, branch = tmp_path / "runs" / "demo", tmp_path / "runs" / "demo-post"
    assert ts.open_run(parent).status == ts.open_run(branch).status == "finished"
    actions = read_table(branch, "actions")
    assert {row[1] for row in actions} == {0, 1}
    assert [row for row in actions if row[1] == 0] == [row for row in read_table(parent, "actions") if row[1] == 0]
    [intervention] = [row for row in actions if row[-1] and "intervention" in row[-1]]
    assert intervention[1:8:2] == (1, "outsider", None, "The bridge is closed today.")  # round, agent, target_post, text
    # the printed DataFrame: actions counted by round and kind, the intervention's post among them
    printed = done.stdout.split()
    assert printed[:2] == ["round", "kind"] and "post" in printed


def baseline_dict() -> dict:
    data = tomllib.loads(BASELINE.read_text())
    data["populations"][0]["personas"]["path"] = str(ROOT / "examples" / "personas.jsonl")
    return data


def test_start_from_a_dict_with_overrides_is_the_cli_run(tmp_path):
    run = ts.start(baseline_dict(), overrides={"rounds": 3, "recommender": {"name": "random"}}, seed=5, out=tmp_path / "api",
                   progress=False)
    assert run.status == "finished" and run.summary.rounds_completed == 3
    manifest = run.manifest
    assert manifest["source"] == "<scenario dict>" and manifest["seed"] == 5
    assert manifest["overrides"] == ["rounds=3", 'recommender={ "name" = "random" }']
    assert run_cli("run", str(BASELINE), "--set", "rounds=3", "--set", 'recommender={ name = "random" }', "--seed", "5",
                   "--out", str(tmp_path / "cli"), "--quiet") == 0
    for table in ("actions", "posts", "follows", "metrics"):
        assert read_table(run.path, table) == read_table(tmp_path / "cli", table), table


def test_override_lines_read_back_as_the_values():
    values = {"rounds": 2, "seed": 0, "engine": {"concurrency": 4, "backend": "local"}, "tags": ["a", "b \"q\""], "flag": True,
              "rate": 0.25, "name": "x=y"}
    assert apply_overrides({}, override_lines(values), "test") == values


def test_the_sync_form_works_with_and_without_a_running_loop(tmp_path):
    threads = []

    def seen(round, totals):
        threads.append(threading.current_thread() is threading.main_thread())

    async def in_a_loop():
        return ts.start(BASELINE, overrides=["rounds=2"], out=tmp_path / "loop", progress=seen)

    run = asyncio.run(in_a_loop())
    assert run.status == "finished" and threads and not any(threads)  # played in a worker thread
    threads.clear()
    plain = ts.start(BASELINE, overrides=["rounds=2"], out=tmp_path / "plain", progress=seen)
    assert plain.status == "finished" and all(threads)  # no loop: played here
    assert read_table(run.path, "actions") == read_table(plain.path, "actions")


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scripted")
    (folder / "s.toml").write_text(scenario_text(rounds=4, count=3, policy="scripted_feed", llm=True,
                                                 extra="[engine]\nkeep_checkpoints = 0\n"))
    return ts.start(folder / "s.toml", out=folder / "run", plugins=SCRIPTED, progress=False)


def test_open_run_and_every_table(scripted_run, tmp_path):
    run = ts.open_run(scripted_run.path)
    assert run.summary is None and run.status == "finished"
    assert repr(run) == f"<Run t: finished, 4/4 rounds, {run.path}>"
    tables = run.tables()
    assert list(tables) == list(ts.TABLES)
    for name in ts.TABLES[:-1]:
        assert len(tables[name]) == len(read_table(run.path, name)), name
    assert len(tables["llm_calls"]) > 0 and list(tables["memories"].columns)[:3] == ["agent", "slot", "id"]
    assert run.table("posts").equals(tables["posts"])
    with pytest.raises(UsageError, match="no table 'nope'"):
        run.table("nope")
    with pytest.raises(UsageError, match="not a run directory"):
        ts.open_run(tmp_path)


def test_missing_pandas_is_one_line(scripted_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(UsageError) as caught:
        scripted_run.table("actions")
    assert str(caught.value) == "reading tables as DataFrames needs pandas: pip install 'townsquare[notebook]'"


def test_branch_interventions_are_the_cli_branch(scripted_run, tmp_path):
    api = scripted_run.branch(2, posts=[("outsider", "Big news from the harbour")], follows={"users-0001": "users-0003"},
                              overrides={"plugins.scripted.policy_post_probability": 1.0}, out=tmp_path / "api", progress=False)
    assert run_cli("branch", str(scripted_run.path), "--at", "2", "--post", "outsider=Big news from the harbour",
                   "--follow", "users-0001=users-0003", "--set", "plugins.scripted.policy_post_probability=1.0",
                   "--out", str(tmp_path / "cli"), "--quiet") == 0
    assert api.manifest["branch"]["interventions"] == json.loads((tmp_path / "cli" / "manifest.json").read_text())["branch"]["interventions"]
    for table in ("actions", "posts", "follows"):
        assert read_table(api.path, table) == read_table(tmp_path / "cli", table), table
    actions = api.table("actions")
    assert set(actions[actions["detail"].fillna("").str.contains("intervention")]["kind"]) == {"post", "follow"}
    with pytest.raises(UsageError, match="no agent 'nobody'"):
        scripted_run.branch(1, memories=[("nobody", "x")], out=tmp_path / "bad", progress=False)
    assert not (tmp_path / "bad").exists()


def test_interview_in_both_forms(scripted_run):
    [answer] = scripted_run.interview("What did you read today?", "users-0002", round=1)
    assert answer.agent_id == "users-0002" and answer.round == 1 and "What did you read today?" in answer.prompt

    async def in_a_loop():
        return await scripted_run.ainterview("Who do you follow?")
    answers = asyncio.run(in_a_loop())
    assert [a.agent_id for a in answers] == ["users-0001", "users-0002", "users-0003"]
    stored = (scripted_run.path / "interviews.jsonl").read_text().splitlines()
    assert [json.loads(line)["question"] for line in stored[-4:]] == ["What did you read today?"] + ["Who do you follow?"] * 3


def test_cancelling_the_awaitable_stops_the_run_at_a_checkpoint_and_resume_finishes_it(tmp_path):
    async def main():
        task = None

        def stop_after_round_one(round, totals):
            if round == 0:
                loop.call_soon_threadsafe(task.cancel)

        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(ts.astart(BASELINE, overrides={"rounds": 6}, out=tmp_path / "run", progress=stop_after_round_one))
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    run = ts.open_run(tmp_path / "run")
    assert run.status == "stopped" and run.manifest["stop_reason"] == "interrupted"
    assert 1 <= run.manifest["rounds_completed"] < 6
    assert run.resume(progress=False).status == "finished"
    assert ts.start(BASELINE, overrides={"rounds": 6}, out=tmp_path / "whole", progress=False).table("actions").equals(run.table("actions"))


def test_an_interrupt_while_the_sync_form_waits_stops_the_run(tmp_path):
    """Jupyter's stop button raises KeyboardInterrupt in the thread that waits (the loop's)."""
    main_thread = threading.main_thread().ident

    def interrupt_after_round_one(round, totals):
        if round == 0:
            signal.pthread_kill(main_thread, signal.SIGINT)

    def raise_interrupt(*_):
        raise KeyboardInterrupt

    async def in_a_loop():
        return ts.start(BASELINE, overrides={"rounds": 6}, out=tmp_path / "run", progress=interrupt_after_round_one)

    before = signal.signal(signal.SIGINT, raise_interrupt)  # as ipykernel's: asyncio.run keeps it
    try:
        run = asyncio.run(in_a_loop())
    finally:
        signal.signal(signal.SIGINT, before)
    assert run.status == "stopped" and run.summary.stopped == "interrupted" and run.summary.rounds_completed < 6


def test_progress_in_a_notebook_is_one_line_updated_in_place(tmp_path, monkeypatch, capsys):
    shown: list[tuple[str, str]] = []

    class Handle:
        def update(self, bundle, raw):
            shown.append(("update", bundle["text/plain"]))

    def display(bundle, raw, display_id):
        assert raw and display_id
        shown.append(("display", bundle["text/plain"]))
        return Handle()

    class ZMQInteractiveShell:
        pass

    ipython = types.ModuleType("IPython")
    ipython.get_ipython = ZMQInteractiveShell
    display_module = types.ModuleType("IPython.display")
    display_module.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display_module)
    run = ts.start(BASELINE, overrides={"rounds": 3}, out=tmp_path / "run")
    texts = [text for _, text in shown]
    assert [kind for kind, _ in shown] == ["display"] + ["update"] * (len(shown) - 1)
    assert texts[0].startswith("building: personas of population")  # from the first second
    assert [text.split("  ")[0] for text in texts if text.startswith("round ")] == ["round 1/3", "round 2/3", "round 3/3"]
    err = capsys.readouterr().err
    # one line in the cell, not the slot table: that is a property away
    assert f"run directory: {tmp_path / 'run'}" in err and "print(run.slots)" in err and "round 1/3" not in err
    assert "embedding_baseline" not in err and "embedding_baseline" in run.slots


def test_a_test_model_named_as_llm_loads_its_plugin_as_on_the_command_line(tmp_path):
    run = ts.start(ROOT / "examples" / "quickstart.toml", overrides={"rounds": 1}, llm="oracle", out=tmp_path / "oracle",
                   progress=False)
    assert run.status == "finished" and run.manifest["plugin_options"] == ["townsquare.testing.oracle"]
    assert run.manifest["scenario"]["llm"]["name"] == "oracle"


def test_one_option_given_as_a_string_is_one_option_and_bad_counts_are_refused(scripted_run, tmp_path):
    """``plugins="no:x"`` is the option ``-p no:x``, not four letters; ``interview(memories=-1)``
    is refused as the CLI refuses ``--memories -1``."""
    (tmp_path / "s.toml").write_text(scenario_text(rounds=1, count=2))
    run = ts.start(tmp_path / "s.toml", out=tmp_path / "run", plugins="no:dashboard", overrides="rounds=2", progress=False)
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["plugin_options"] == ["no:dashboard"] and "dashboard" in manifest["disabled_plugins"]
    assert manifest["rounds"] == 2
    with pytest.raises(UsageError, match="memories = -1"):
        scripted_run.interview("Hi?", "users-0001", memories=-1)
