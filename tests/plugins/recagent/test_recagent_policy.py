"""The RecAgent policy on the recsys platform: a small run with the scripted model exercises
the recommender flow (pages, watch with feeling and rating, search, leave), chats and
broadcasts between friends, the memory chain, ablations of each tier and determinism."""

from __future__ import annotations

import json
import sqlite3

import pytest

from helpers import ROOT
from townsquare.platforms.recsys import RECSYS_ACTIONS

DATA = ROOT / "tests" / "data" / "recsys"
RULES = {
    "high-level insight": '{"insights": ["This person enjoys tense thrillers."]}',
    "rate how important": '{"sentence": "Something happened at the movies.", "importance": 8}',
    "one or two sentences": "Have you seen <Heat (1995)>? It is great. [END]",
    "Share your personal feelings": "Tense and stylish.",
    "would you rate it": "8",
    "search box": "sci-fi",
    "message that all your friends": "Everyone should watch <Heat (1995)>!",
}


def scenario(rounds=4, extra=""):
    rules = ", ".join(f'"{k}" = {json.dumps(v)}' for k, v in RULES.items())
    return f"""
name = "recagent-test"
seed = 3
rounds = {rounds}
[activity]
model = "always"
[llm]
name = "scripted"
[plugins.scripted]
rules = {{ {rules} }}
[platform]
name = "recsys"
catalogue = "movielens"
path = "{DATA / 'ml-mini'}"
[recommender]
name = "item_popularity"
{extra}
[[populations]]
name = "users"
count = 3
slots = {{ policy = "recagent_policy" }}
[populations.personas]
name = "recagent_csv"
path = "{DATA / 'user.csv'}"
relationships = "{DATA / 'relationship.csv'}"
"""


def actions(run_dir):
    db = sqlite3.connect(run_dir.path / "events.sqlite")
    try:
        return db.execute("SELECT round, agent_id, kind, target_post, target_agent, text, ok, error, detail FROM actions ORDER BY seq").fetchall()
    finally:
        db.close()


def test_recagent_run_on_recsys(make_plugins, write_scenario, run_scenario):
    run_dir, summary = run_scenario(write_scenario(scenario()))
    assert summary.rounds_completed == 4 and summary.stopped is None
    rows = actions(run_dir)
    kinds = {r[2] for r in rows}
    assert kinds <= RECSYS_ACTIONS and {"enter", "recommend", "leave"} <= kinds
    assert all(r[6] == 1 for r in rows), [r for r in rows if not r[6]]
    watches = [r for r in rows if r[2] == "watch"]
    assert watches and all(r[5] == "Tense and stylish." and json.loads(r[8])["rating"] == 8 for r in watches)
    social = [r for r in rows if r[2] in ("chat", "broadcast")]
    assert social and all(json.loads(r[8])["items"] == ["2"] for r in social)
    chats = [r for r in rows if r[2] == "chat"]
    for chat in chats:  # one line, then [END]; partners are friends from the relationship file
        assert chat[5] == "[" + {"users-0001": "Dana Reed", "users-0002": "Omar Hale", "users-0003": "Lia Park"}[chat[1]] + "]: Have you seen <Heat (1995)>? It is great."
        assert (chat[1], chat[4]) in {("users-0001", "users-0002"), ("users-0002", "users-0001"), ("users-0002", "users-0003"), ("users-0003", "users-0002")}
    _, state = run_dir.latest_checkpoint()
    agent = state["agents"]["users-0002"]["components"]
    assert set(agent) == {"memory.sensory", "memory.short_term", "memory.long_term", "reflector", "policy"}
    # identical compressed sentences enhance each other: records reach long-term memory with insights,
    # and reflection merges the identical ones
    long_term = agent["memory.long_term"]
    assert any(r["kind"] == "insight" for r in long_term["records"])
    assert all(r["meta"]["from"].startswith("st") for r in long_term["records"] if r["kind"] != "reflection")
    assert long_term["merged"] > 0 and long_term["reflections"] > 0
    # each insight and each reflection is a row of the reflections table
    db = sqlite3.connect(run_dir.events_path)
    rows = db.execute("SELECT agent_id, source, kind, text, ids FROM reflections ORDER BY seq").fetchall()
    db.close()
    assert {r[1:3] for r in rows} == {("short_term_memory", "insight"), ("long_term_memory", "reflection")}
    assert sum(1 for r in rows if r[0] == "users-0002" and r[2] == "reflection") == long_term["reflections"]
    # an insight kept in long-term memory names the short-term record it was (meta.from): a row's id
    kept = {r["meta"]["from"]: r["text"] for r in long_term["records"] if r["kind"] == "insight"}
    written = {i: text for agent, _, kind, text, ids in rows if agent == "users-0002" and kind == "insight" for i in json.loads(ids)}
    assert kept and all(i in written and text in written[i].split("\n") for i, text in kept.items())
    assert all("records" in agent[slot] for slot in ("memory.sensory", "memory.short_term", "memory.long_term"))


def test_same_seed_same_actions(write_scenario, run_scenario):
    path = write_scenario(scenario(rounds=3))
    first, _ = run_scenario(path)
    second, _ = run_scenario(path)
    assert actions(first) == actions(second)


@pytest.mark.parametrize("plugin,empty", [("sensory_memory", "memory.sensory"), ("short_term_memory", "memory.short_term"),
                                          ("long_term_memory", "memory.long_term"), ("recagent_reflection", "reflector")])
def test_each_memory_tier_ablated(plugin, empty, make_plugins, write_scenario, run_scenario):
    plugins = make_plugins(disable=[plugin], enable=["townsquare.testing.scripted"])
    run_dir, summary = run_scenario(write_scenario(scenario(rounds=2)), plugins=plugins)
    assert summary.rounds_completed == 2
    manifest = json.loads((run_dir.path / "manifest.json").read_text())
    slots = {row["slot"]: row["component"] for row in manifest["slot_table"] if row["scope"] == "users"}
    assert slots[empty] == "-"  # left empty: no other design's component stands in
    assert all(r[6] == 1 for r in actions(run_dir))


def test_social_policy_never_gets_a_recagent_tier(make_plugins, write_scenario):
    from townsquare.launch.scenario_files import load_scenario

    from helpers import scenario_text

    plugins = make_plugins(disable=["action_memory", "follow_reflection"], enable=["townsquare.testing.scripted"])
    resolved = load_scenario(write_scenario(scenario_text(policy="social_agent", llm=True)), [], plugins)
    slots = resolved.populations[0].slots
    # another design's fallback may fill them (park_reflection...), never a RecAgent component
    assert {c.spec.plugin for c in slots.values()}.isdisjoint({"short_term_memory", "recagent_reflection", "sensory_memory", "long_term_memory"})


def test_recagent_policy_needs_the_recsys_platform(write_scenario, run_scenario):
    from helpers import scenario_text

    from townsquare.api import ComponentError

    with pytest.raises(ComponentError, match="needs the platform 'recsys'"):
        run_scenario(write_scenario(scenario_text(rounds=1, count=1, policy="recagent_policy", llm=True)))


def test_example_scenario_runs_on_fixtures(make_plugins, tmp_path):
    """examples/recagent.toml, pointed at the test fixtures and shortened, with the scripted model."""
    from townsquare.launch.runner import start_run

    overrides = [f"platform.path={DATA / 'ml-mini'}", f"populations.0.personas.path={DATA / 'user.csv'}",
                 f"populations.0.personas.relationships={DATA / 'relationship.csv'}", "populations.0.count=3",
                 "rounds=2", "llm.name=scripted", "activity.model=always"]
    plugins = make_plugins(enable=["townsquare.testing.scripted"])
    run_dir, summary = start_run(ROOT / "examples" / "recagent.toml", overrides=overrides, plugins=plugins, out=tmp_path / "run")
    assert summary.rounds_completed == 2 and {r[2] for r in actions(run_dir)} <= RECSYS_ACTIONS


def test_export_writes_watches_ratings_and_chats(write_scenario, run_scenario, tmp_path):
    from townsquare.commands.export import export_run

    run_dir, _ = run_scenario(write_scenario(scenario(rounds=3)))
    paths = {p.stem: p for p in export_run(run_dir.path / "events.sqlite", "jsonl", tmp_path / "out", tables=("actions",))}
    rows = [json.loads(line) for line in paths["actions"].read_text().splitlines()]
    memories = [json.loads(line) for line in paths["memories"].read_text().splitlines()]
    assert {"memory.short_term", "memory.long_term"} <= {m["slot"] for m in memories}
    watch = next(r for r in rows if r["kind"] == "watch")
    assert watch["target_post"] in {str(n) for n in range(1, 9)} and json.loads(watch["detail"])["rating"] == 8 and watch["text"]
    assert any(r["kind"] in ("chat", "broadcast") and "<Heat (1995)>" in r["text"] for r in rows)


def test_killed_and_resumed_run_equals_uninterrupted(tmp_path):
    """Every RecAgent component's state (memory tiers, policy, platform) survives a checkpoint."""
    import os
    import subprocess
    import sys

    path = tmp_path / "s.toml"
    path.write_text(scenario(rounds=4))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support")}
    args = [sys.executable, "-m", "townsquare.cli"]
    plugins = ["-p", "townsquare.testing.scripted", "-p", "kill_switch"]
    whole = subprocess.run([*args, "run", str(path), "--out", str(tmp_path / "whole"), *plugins], capture_output=True, text=True, env=env)
    assert whole.returncode == 0, whole.stderr
    killed = subprocess.run([*args, "run", str(path), "--out", str(tmp_path / "killed"), *plugins], capture_output=True, text=True,
                            env={**env, "KILL_AT_ROUND": "2", "KILL_DURING": "action"})
    assert killed.returncode == -9, killed.stderr
    resumed = subprocess.run([*args, "resume", str(tmp_path / "killed")], capture_output=True, text=True, env=env)
    assert resumed.returncode == 0, resumed.stderr

    class Dir:
        def __init__(self, p):
            self.path = p

    assert actions(Dir(tmp_path / "killed")) == actions(Dir(tmp_path / "whole"))


def test_report_shows_watches_by_genre_and_a_chat_sample(write_scenario, run_scenario, tmp_path):
    import re

    from townsquare.plugins.report.build import build_report

    run_dir, _ = run_scenario(write_scenario(scenario(rounds=3)))
    path, _ = build_report(run_dir.path, tmp_path / "report.html", with_similarity=False)
    page = path.read_text()
    assert 'id="recsys"' in page and 'alt="watches by genre"' in page
    rows = [r for r in actions(run_dir) if r[2] == "watch"]
    genres = [g for r in rows for g in json.loads(r[8])["genres"]]
    top = max(set(genres), key=lambda g: (genres.count(g), g))
    assert re.search(rf"<td>{top}</td><td class=\"num\">{genres.count(top)}</td>", page)
    assert "Have you seen &lt;Heat (1995)&gt;? It is great." in page or "Everyone should watch &lt;Heat (1995)&gt;!" in page
