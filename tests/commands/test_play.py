"""``townsquare run --play AGENT``: a person's turns from (scripted) standard input."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

from helpers import ROOT, scenario_text

EXTRA = """
[recommender]
name = "random"
[plugins.embedding_baseline]
post_probability = 1.0
"""


def play(tmp_path, stdin: str, agent: str = "users-0001") -> subprocess.CompletedProcess:
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=3, count=3, extra=EXTRA))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support")}
    return subprocess.run([sys.executable, "-m", "townsquare.cli", "run", str(scenario), "--out", str(tmp_path / "run"),
                           "--play", agent], input=stdin, capture_output=True, text=True, env=env, timeout=600)


def test_a_person_plays_an_agent_from_stdin(tmp_path):
    script = "post hello from a human\nlike 1\ndone\nbogus\nfollow users-0002\ncomment 1 I agree\nreblog 9\ndone\n"
    result = play(tmp_path, script)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "=== round 0" in out and "you are Ada (users-0001)" in out and "persona: I love hiking" in out
    assert "actions: like N | reblog N | comment N TEXT | post TEXT | follow AGENT | unfollow AGENT | done" in out
    assert "unknown action 'bogus'" in out and "reblog N: N is a post number from 1 to" in out
    # round 1 shows the feed the agent sees, numbered
    round1 = out.split("=== round 1")[1].split("=== round 2")[0]
    assert "[1] @" in round1

    db = sqlite3.connect(tmp_path / "run" / "events.sqlite")
    played = db.execute("SELECT round, kind, text, target_agent, detail FROM actions WHERE agent_id = 'users-0001' ORDER BY seq").fetchall()
    kinds = [(r, k) for r, k, _, _, _ in played if k != "browse"]
    assert kinds[0] == (0, "post") and (1, "follow") in kinds and (1, "comment") in kinds
    assert all(json.loads(d)["played"] for *_, d in played)
    assert ("hello from a human",) in db.execute("SELECT text FROM posts WHERE author_id = 'users-0001'").fetchall()
    assert ("I agree",) in db.execute("SELECT text FROM posts WHERE reply_to IS NOT NULL").fetchall()
    # the round after the script ran out: the person's turn ends at once, the others go on
    assert not [k for r, k in kinds if r == 2]
    assert db.execute("SELECT COUNT(*) FROM actions WHERE round = 2 AND agent_id != 'users-0001'").fetchone()[0] > 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["played_by"] == "users-0001" and manifest["status"] == "finished"


def test_play_an_unknown_agent_is_one_line_and_leaves_nothing(tmp_path):
    result = play(tmp_path, "", agent="nobody")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: --play nobody: no such agent")
    assert not (tmp_path / "run").exists()


RECSYS = f"""
name = "play-recsys"
seed = 3
rounds = 3
[activity]
model = "always"
[llm]
name = "scripted"
[platform]
name = "recsys"
catalogue = "movielens"
path = "{ROOT / 'tests' / 'data' / 'recsys' / 'ml-mini'}"
[recommender]
name = "item_popularity"
[[populations]]
name = "users"
count = 2
slots = {{ policy = "recagent_policy" }}
[populations.personas]
name = "recagent_csv"
path = "{ROOT / 'tests' / 'data' / 'recsys' / 'user.csv'}"
relationships = "{ROOT / 'tests' / 'data' / 'recsys' / 'relationship.csv'}"
"""


def test_a_person_plays_a_recagent_agent_on_the_recommender_system(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(RECSYS)
    # round 0: the recommender, watch the first item, a feeling, a rating; round 1: a broadcast; then end of input
    script = "recommender\nwatch 9\n1\nGripping from start to end.\n8\n2\nbroadcast\nEveryone should watch <Heat (1995)>!\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support")}
    result = subprocess.run([sys.executable, "-m", "townsquare.cli", "run", str(scenario), "--out", str(tmp_path / "run"),
                             "-p", "townsquare.testing.scripted", "--play", "users-0001"],
                            input=script, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "deciding: activity" in out and "choose: [1] recommender | [2] social | [3] nothing" in out
    assert "deciding: page" in out and "[1] watch 1" in out and "next page" in out and "leave" in out
    assert "? choose one of:" in out  # "watch 9" is not on the page
    assert "deciding: feeling" in out and "deciding: rating" in out and "deciding: broadcast" in out
    db = sqlite3.connect(tmp_path / "run" / "events.sqlite")
    played = db.execute("SELECT round, kind, text, detail FROM actions WHERE agent_id = 'users-0001' ORDER BY seq").fetchall()
    kinds = [(r, k) for r, k, _, _ in played]
    assert [k for r, k in kinds if r == 0] == ["enter", "recommend", "watch", "leave"]
    assert (1, "broadcast") in kinds and all(json.loads(d)["played"] for *_, d in played)
    watch = next(row for row in played if row[1] == "watch")
    assert watch[2] == "Gripping from start to end." and json.loads(watch[3])["rating"] == 8
    # the other agent went on with its own model; the person's end of input ended their later turns
    assert db.execute("SELECT COUNT(*) FROM actions WHERE agent_id = 'users-0002'").fetchone()[0] > 0
    assert not [k for r, k in kinds if r == 2]


def test_a_policy_that_cannot_be_played_on_recsys_is_one_line(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(RECSYS.replace('policy = "recagent_policy"', 'policy = "embedding_items"'))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support")}
    result = subprocess.run([sys.executable, "-m", "townsquare.cli", "run", str(scenario), "--out", str(tmp_path / "run"),
                             "-p", "townsquare.testing.scripted", "--play", "users-0001"], input="", capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 2 and "cannot be played on platform 'recsys'" in result.stderr.strip().splitlines()[-1]
