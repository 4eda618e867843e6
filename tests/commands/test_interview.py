"""``townsquare interview``: an agent answers from its persona and what it actually saw, at a
round, with its own slots, and the run is left as it was."""

from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from townsquare.errors import UsageError
from townsquare.launch.interviews import interview
from townsquare.launch.runner import start_run

from test_sa_policy_e2e import scenario as zhou_scenario

SCRIPTED = ["townsquare.testing.scripted"]


def query(run: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(run / "events.sqlite")
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def fingerprint(run: Path) -> str:
    """Every table of the run and every checkpoint file, hashed."""
    digest = hashlib.sha256()
    for table in ("agents", "posts", "actions", "follows", "llm_calls", "metrics", "rounds"):
        digest.update(repr(query(run, f"SELECT * FROM {table} ORDER BY rowid")).encode())
    for path in sorted((run / "checkpoints").iterdir()):
        digest.update(path.read_bytes())
    digest.update((run / "manifest.json").read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def zhou_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("zhou")
    text = zhou_scenario("social_agent").replace("rounds = 50", "rounds = 12") + "\n[engine]\nkeep_checkpoints = 0\n"
    (folder / "s.toml").write_text(text)
    run_dir, summary = start_run(folder / "s.toml", out=folder / "run", plugin_options=SCRIPTED)
    assert summary.stopped is None
    return run_dir.path


def test_answer_prompt_holds_what_the_agent_saw_and_the_run_is_unchanged(zhou_run):
    liked = query(zhou_run, "SELECT a.agent_id, a.round, p.author_id, p.text FROM actions a JOIN posts p ON p.post_id = a.target_post "
                            "WHERE a.kind = 'like' AND a.ok = 1 ORDER BY a.seq")
    assert liked, "the run has no likes to remember"
    agent, liked_round, author, text = liked[0]  # the first like of the run: the agent's first
    before = fingerprint(zhou_run)

    [answer] = interview(zhou_run, "Which posts did you like lately?", agents=[agent])
    assert answer.agent_id == agent and answer.round == 11 and answer.model == "scripted-test-model"
    # recalled through the agent's own memory chain (Zhou's action memory)
    assert f"I liked {author}'s post: {text}" in answer.prompt
    assert "Which posts did you like lately?" in answer.prompt
    assert answer.answer
    assert fingerprint(zhou_run) == before
    stored = [json.loads(line) for line in (zhou_run / "interviews.jsonl").read_text().splitlines()]
    assert stored[-1]["question"] == "Which posts did you like lately?" and stored[-1]["round"] == 11
    assert stored[-1]["agent_id"] == agent and stored[-1]["model"] == "scripted-test-model"

    # at the round before its first like, the agent remembers no like: the state of that round
    assert liked_round > 0
    [earlier] = interview(zhou_run, "Which posts did you like lately?", agents=[agent], round=liked_round - 1)
    assert earlier.round == liked_round - 1 and "I liked" not in earlier.prompt


def test_interview_all_writes_csv(zhou_run, tmp_path, capsys):
    from townsquare.cli import main

    main(["interview", str(zhou_run), "Are you happy with your feed?", "--all", "--csv", str(tmp_path / "a.csv")])
    with open(tmp_path / "a.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["agent_id"] for r in rows] == [f"users-000{i}" for i in range(1, 5)]
    assert {r["question"] for r in rows} == {"Are you happy with your feed?"} and all(r["answer"] for r in rows)
    assert "users-0001" in capsys.readouterr().out


def test_interview_errors(zhou_run):
    with pytest.raises(UsageError, match="no agent 'nobody'"):
        interview(zhou_run, "hi", agents=["nobody"])
    with pytest.raises(UsageError, match="no such population"):
        interview(zhou_run, "hi", population="martians", all_agents=True)
    with pytest.raises(UsageError, match="keeps no checkpoint"):
        interview(zhou_run, "hi", agents=["users-0001"], round=99)


def test_memory_injected_by_a_branch_is_recalled_in_an_interview_with_parks_stream(tmp_path):
    """Park's memory stream: what the agent observed and a memory a branch handed it."""
    from townsquare.commands.branch import branch_run, parse_interventions

    from helpers import ROOT
    from test_ga_runs import RULES

    text = (ROOT / "examples" / "generative_agents_social.toml").read_text()
    text = text.replace('path = "personas.jsonl"', f'path = "{ROOT / "examples" / "personas.jsonl"}"').replace("rounds = 8", "rounds = 4")
    (tmp_path / "ga.toml").write_text(text + RULES + "\n[engine]\nkeep_checkpoints = 0\n")
    parent, summary = start_run(tmp_path / "ga.toml", out=tmp_path / "ga", plugin_options=SCRIPTED)
    assert summary.stopped is None
    agent = "townsfolk-0001"
    question = "What happened to the town hall?"
    [plain] = interview(parent.path, question, agents=[agent])
    assert "town hall burned down" not in plain.prompt

    changes = parse_interventions([("memory", f"{agent}=I saw that the town hall burned down last night.")])
    branch, _ = branch_run(parent.path, 2, tmp_path / "b", interventions=changes)
    [answer] = interview(branch.path, question, agents=[agent])
    assert "I saw that the town hall burned down last night." in answer.prompt
    assert answer.round == 3


def test_a_run_without_an_llm_is_refused_with_an_option_that_exists(tmp_path):
    """The hint names ``run --llm``, an option the CLI has (not one ``interview`` lacks)."""
    from helpers import ROOT
    from townsquare.launch.runner import start_run

    run_dir, _ = start_run(ROOT / "examples" / "baseline.toml", overrides=["rounds=1"], out=tmp_path / "base")
    with pytest.raises(UsageError, match=r"has no LLM to answer with; interview a run made with one \(townsquare run SCENARIO --llm") as err:
        interview(run_dir.path, "hi", agents=["users-0001"])
    from townsquare.cli import build_cli
    from townsquare.plugin_manager import make_plugin_manager

    options = {opt for param in build_cli(make_plugin_manager()).commands["run"].params for opt in param.opts}
    assert "--llm" in options and "--llm" in str(err.value)


@pytest.fixture
def fresh_run(tmp_path) -> Path:
    from helpers import scenario_text

    (tmp_path / "s.toml").write_text(scenario_text(rounds=2, policy="scripted_feed", llm=True))
    run_dir, summary = start_run(tmp_path / "s.toml", out=tmp_path / "run", plugin_options=SCRIPTED)
    assert summary.stopped is None
    return run_dir.path


def test_a_refused_interview_leaves_nothing_and_asks_nothing(fresh_run, tmp_path, capsys, monkeypatch):
    """Unknown agent or population, an unwritable --csv, a negative memory count: refused
    before any question is paid for, and the run directory gets no interviews folder or file."""
    from helpers import cli_in_process, count_scripted_calls

    asked = count_scripted_calls(monkeypatch)
    def listing():  # SQLite's -shm/-wal beside events.sqlite come and go with readers
        return sorted(p.name for p in fresh_run.iterdir() if not p.name.endswith(("-shm", "-wal")))

    before = listing()
    with pytest.raises(UsageError, match="no agent 'nobody'"):
        interview(fresh_run, "hi", agents=["nobody"])
    with pytest.raises(UsageError, match="no such population"):
        interview(fresh_run, "hi", population="martians", all_agents=True)
    with pytest.raises(UsageError, match="memories = -1"):
        interview(fresh_run, "hi", agents=["users-0001"], memories=-1)
    code, _, err = cli_in_process(capsys, "interview", str(fresh_run), "Happy?", "--all", "--csv", "/proc/x.csv")
    assert code == 2 and err.strip().startswith("error: --csv /proc/x.csv: cannot write there:"), err
    assert listing() == before and asked == []

    [answer] = interview(fresh_run, "hi", agents=["users-0001"])
    assert answer.answer and asked == ["interview"]
    assert (fresh_run / "interviews").is_dir() and (fresh_run / "interviews.jsonl").is_file()


def test_without_the_interview_plugin_nothing_imports_the_interview_command():
    """``-p no:interview`` removes the command and leaves its module unimported, though the
    report and the dashboard (which import the commands' API) are loaded: the interview itself
    lives in townsquare.launch.interviews."""
    import subprocess
    import sys

    code = ("import sys\nfrom townsquare.cli import build_cli\nfrom townsquare.plugin_manager import make_plugin_manager\n"
            "cli = build_cli(make_plugin_manager(disable=[{}]))\n"
            "import townsquare.api.commands\n"
            "print('interview' in cli.commands, 'report' in cli.commands, 'townsquare.commands.interview' in sys.modules)\n")
    without = subprocess.run([sys.executable, "-c", code.format("'interview'")], capture_output=True, text=True, check=True)
    assert without.stdout.split() == ["False", "True", "False"]
    with_it = subprocess.run([sys.executable, "-c", code.format("")], capture_output=True, text=True, check=True)
    assert with_it.stdout.split() == ["True", "True", "True"]
