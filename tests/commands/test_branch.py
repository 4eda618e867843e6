"""``townsquare branch``: a branch without intervention reproduces its parent; interventions are
recorded and change only rounds from the branch point on."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from helpers import cli_in_process, scenario_text
from townsquare.commands.branch import BranchChange, branch_run, parse_interventions
from townsquare.errors import UsageError
from townsquare.launch.runner import start_run

SCRIPTED = ["townsquare.testing.scripted"]
EXTRA = """
[recommender]
name = "random"
[plugins.scripted]
policy_post_probability = 0.6
[engine]
keep_checkpoints = 0
"""

#: columns that hold wall-clock time: the only ones allowed to differ between two runs
CLOCK_COLUMNS = {"latency_ms", "wall_seconds"}


def table(run: Path, name: str, where: str = "") -> list[tuple]:
    db = sqlite3.connect(run / "events.sqlite")
    try:
        cursor = db.execute(f"SELECT * FROM {name} {where} ORDER BY rowid")
        keep = [i for i, d in enumerate(cursor.description) if d[0] not in CLOCK_COLUMNS]
        return [tuple(row[i] for i in keep) for row in cursor]
    finally:
        db.close()


TABLES = ("agents", "posts", "actions", "follows", "llm_calls", "reflections", "metrics", "rounds")


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("parent")
    scenario = folder / "s.toml"
    scenario.write_text(scenario_text(rounds=6, count=5, policy="scripted_feed", llm=True, extra=EXTRA))
    run_dir, summary = start_run(scenario, out=folder / "run", plugin_options=SCRIPTED)
    assert summary.stopped is None and summary.posts > 0
    return run_dir.path


@pytest.mark.parametrize("at", [0, 3, 5])
def test_branch_without_intervention_reproduces_the_parent(parent, tmp_path, at):
    run_dir, summary = branch_run(parent, at, tmp_path / "b")
    assert summary.stopped is None
    for name in TABLES:
        assert table(run_dir.path, name) == table(parent, name), f"table {name} differs in a branch at {at}"
    manifest = json.loads((run_dir.path / "manifest.json").read_text())
    assert {k: manifest["branch"][k] for k in ("parent", "at", "interventions", "changes")} == {
        "parent": str(parent.resolve()), "at": at, "interventions": [], "changes": []}
    assert manifest["status"] == "finished" and manifest["rounds_completed"] == 6


def test_interventions_change_only_rounds_from_the_branch_point(parent, tmp_path):
    persona = tmp_path / "persona.txt"
    persona.write_text("I only talk about sailing.\nI live on a boat.\n")
    changes = parse_interventions([
        ("persona", f"users-0001={persona}"),
        ("follow", "users-0003=users-0004"), ("post", "newsdesk=Breaking: the bridge is closed"),
        ("post", "users-0005=my injected post"),
    ])
    run_dir, summary = branch_run(parent, 3, tmp_path / "b", interventions=changes, overrides=["recommender.name=chronological"])
    assert summary.stopped is None
    branch = run_dir.path
    for name in ("posts", "actions", "follows", "llm_calls", "metrics", "rounds"):
        assert table(branch, name, "WHERE round < 3") == table(parent, name, "WHERE round < 3"), name
    assert table(branch, "actions", "WHERE round >= 3") != table(parent, "actions", "WHERE round >= 3")

    posts = {row[1]: row[4] for row in table(branch, "posts", "WHERE round = 3")}
    assert posts["newsdesk"] == "Breaking: the bridge is closed"
    assert posts["users-0005"] == "my injected post"
    follows = table(branch, "follows", "WHERE round = 3")
    assert ("users-0003", "users-0004", "follow") in [row[3:6] for row in follows]
    injected = [json.loads(row[-1]) for row in table(branch, "actions", "WHERE round = 3") if row[-1] and "intervention" in row[-1]]
    assert [d["intervention"] for d in injected] == ["follow", "post", "post"]

    agents = {row[0]: json.loads(row[4]) for row in table(branch, "agents")}
    assert agents["users-0001"]["sentences"] == ["I only talk about sailing.", "I live on a boat."]

    manifest = json.loads((branch / "manifest.json").read_text())
    assert manifest["branch"]["at"] == 3
    assert "--set recommender.name=chronological" in manifest["branch"]["interventions"]
    assert f"--persona users-0001={persona}" in manifest["branch"]["interventions"]
    assert "--post newsdesk=Breaking: the bridge is closed" in manifest["branch"]["interventions"]
    assert manifest["scenario"]["recommender"]["name"] == "chronological"
    assert any(r["slot"] == "recommender" and r["component"] == "chronological" for r in manifest["slot_table"])


def test_branch_at_a_round_without_checkpoint_names_the_branchable_rounds(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=6, count=3, extra="[engine]\nkeep_checkpoints = 2\n"))
    run_dir, _ = start_run(scenario, out=tmp_path / "run")
    with pytest.raises(UsageError, match=r"branchable rounds: 0, 5, 6.*keep_checkpoints=0"):
        branch_run(run_dir.path, 2, tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_bad_interventions_are_one_line_errors(parent, tmp_path):
    with pytest.raises(UsageError, match="no agent 'nobody'"):
        branch_run(parent, 2, tmp_path / "b", interventions=[BranchChange("memory", "nobody", "x")])
    with pytest.raises(UsageError, match="fills no memory slot"):
        branch_run(parent, 2, tmp_path / "b", interventions=[BranchChange("memory", "users-0001", "x")])
    with pytest.raises(UsageError, match="no such persona file"):
        branch_run(parent, 2, tmp_path / "b", interventions=parse_interventions([("persona", "users-0001=/nope.txt")]))
    with pytest.raises(UsageError, match="expected AGENT=VALUE"):
        parse_interventions([("follow", "users-0001")])
    with pytest.raises(UsageError, match="the run has rounds 0..5"):
        branch_run(parent, 6, tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_cli_branch_per_recommender(parent, tmp_path):
    from townsquare.cli import main

    main(["branch", str(parent), "--at", "2", "--out", str(tmp_path / "cf"), "--quiet",
          "--recommenders", "chronological,mastodon_digest"])  # returns; an error would exit
    for name in ("chronological", "mastodon_digest"):
        manifest = json.loads((tmp_path / "cf" / name / "manifest.json").read_text())
        assert manifest["scenario"]["recommender"] == {"name": name}
        assert manifest["branch"]["at"] == 2
        assert table(tmp_path / "cf" / name, "posts", "WHERE round < 2") == table(parent, "posts", "WHERE round < 2")


def test_compare_prints_deltas_after_the_branch_point_and_plots(parent, tmp_path, capsys):
    from townsquare.cli import main
    from townsquare.commands.compare import compare_runs

    run_dir, _ = branch_run(parent, 3, tmp_path / "b", overrides=["plugins.scripted.policy_post_probability=1.0"])
    comparison = compare_runs([parent, run_dir.path])
    assert comparison.at == 3
    posts_after = [sum(1 for row in table(p, "posts", "WHERE round >= 3")) / 3 for p in (parent, run_dir.path)]
    assert comparison.means["posts.count"] == pytest.approx(posts_after)
    assert comparison.deltas("posts.count")[1] == pytest.approx(posts_after[1] - posts_after[0])
    assert posts_after[1] > posts_after[0]

    main(["compare", str(parent), str(run_dir.path), "--out", str(tmp_path / "cmp")])
    out = capsys.readouterr().out
    assert "from round 3" in out and "posts.count" in out and f"{posts_after[1] - posts_after[0]:+.4g}" in out
    assert (tmp_path / "cmp" / "compare.png").read_bytes()[:4] == b"\x89PNG"
    assert "posts.count" in (tmp_path / "cmp" / "compare.csv").read_text()
    # without --out: inside the last run given, never the current folder
    main(["compare", str(parent), str(run_dir.path)])
    assert "posts.count" in (run_dir.path / "compare" / "compare.csv").read_text()
    assert f"table: {run_dir.path / 'compare' / 'compare.csv'}" in capsys.readouterr().err


@pytest.mark.parametrize("design", ["social_agent", "generative_agents"])
def test_branch_reproduces_runs_of_the_paper_designs(tmp_path, design):
    """Plans, memories, reflections and persona retrieval all round-trip through the branch."""
    from helpers import ROOT

    if design == "social_agent":
        from test_sa_policy_e2e import scenario

        text = scenario("social_agent").replace("rounds = 50", "rounds = 8")
    else:
        from test_ga_runs import RULES

        text = (ROOT / "examples" / "generative_agents_social.toml").read_text()
        text = text.replace('path = "personas.jsonl"', f'path = "{ROOT / "examples" / "personas.jsonl"}"').replace("rounds = 8", "rounds = 5")
        text += RULES
    (tmp_path / "s.toml").write_text(text + "\n[engine]\nkeep_checkpoints = 0\n")
    parent, _ = start_run(tmp_path / "s.toml", out=tmp_path / "p", plugin_options=SCRIPTED)
    branch, _ = branch_run(parent.path, 3, tmp_path / "b")
    for name in TABLES:
        assert table(branch.path, name) == table(parent.path, name), f"{design}: table {name} differs"


def test_a_branch_killed_in_its_first_round_resumes_with_its_interventions(parent, tmp_path):
    """kill -9 while round R plays: ``resume`` applies the interventions again, once."""
    import os
    import subprocess
    import sys

    from helpers import ROOT

    persona = tmp_path / "p.json"
    persona.write_text(json.dumps({"sentences": ["I collect stamps."], "fields": {"age": 70}}))
    changes = ["--post", "newsdesk=Breaking news", "--follow", "users-0001=users-0002", "--persona", f"users-0003={persona}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support")}

    def cli(*args, **extra_env):
        return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True,
                              env={**env, **extra_env}, timeout=600)

    whole = cli("branch", str(parent), "--at", "3", "--out", str(tmp_path / "whole"), "--quiet", "-p", "kill_switch", *changes)
    assert whole.returncode == 0, whole.stderr
    killed = cli("branch", str(parent), "--at", "3", "--out", str(tmp_path / "killed"), "--quiet", "-p", "kill_switch", *changes,
                 KILL_AT_ROUND="3", KILL_DURING="action")
    assert killed.returncode == -9, killed.stderr
    resumed = cli("resume", str(tmp_path / "killed"), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    for name in TABLES:
        assert table(tmp_path / "killed", name) == table(tmp_path / "whole", name), name
    posts = [row for row in table(tmp_path / "killed", "posts") if row[1] == "newsdesk"]
    assert len(posts) == 1 and posts[0][2] == 3
    agents = {row[0]: json.loads(row[4]) for row in table(tmp_path / "killed", "agents")}
    assert agents["users-0003"]["sentences"] == ["I collect stamps."]


@pytest.mark.parametrize("change,problem", [
    ('{ kind = "post", value = "hi" }', "plugins.branch.changes[0].target: missing required key"),
    ('{ kind = "shout", target = "users-0001", value = "hi" }', "plugins.branch.changes[0].kind: input should be"),
    ('{ kind = "persona", target = "users-0001", value = "p.txt" }', 'a persona change needs "persona"'),
    ('{ kind = "post", target = "users-0001", value = "hi", extra = 1 }', "plugins.branch.changes[0].extra: unknown key"),
])
def test_a_scenario_listing_branch_with_a_malformed_change_is_one_line(tmp_path, capsys, change, problem):
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(rounds=2, top='interventions = ["branch"]', extra=f"[plugins.branch]\nat = 1\nchanges = [{change}]\n"))
    code, _, err = cli_in_process(capsys, "run", str(path), "--out", str(tmp_path / "r"), "--quiet")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert problem in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()
