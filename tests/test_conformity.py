"""User conformity (RecAgent fig. 5): AC(i) on a hand-made rating log, and the metric in runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from townsquare.plugins.recagent.studies.conformity import attitude_change

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_attitude_change_on_a_hand_made_rating_log():
    scores = {
        "a": [5, 5, 6, 6, 7, 7, 7, 7, 7, 7, 7],  # 2 changes in 10 steps
        "b": [3, 4, 5, 6, 7, 8, 7, 6, 5, 4, 3],  # 10 changes
        "c": [8] * 11,                           # none
        "d": [1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 9, 9],  # 10 changes in r = 1..10; the 11th step is not counted
    }
    friends = {"a": 1, "b": 3, "c": 3, "d": 1}
    ac = attitude_change(scores, friends, rounds_counted=10)
    assert ac == {1: pytest.approx((2 + 10) / (10 * 2)), 3: pytest.approx((10 + 0) / (10 * 2))}
    # fewer rounds than 10 so far: divided by the steps seen
    assert attitude_change({"a": [5, 6, 6]}, {"a": 2}) == {2: pytest.approx(0.5)}
    assert attitude_change({"a": [5]}, {"a": 2}) == {}


def test_conformity_example_runs_offline(run_scenario, make_plugins):
    offline = ["rounds=4", "plugins.conformity.rater=embedding", "populations.0.slots.policy=embedding_items"]
    run_dir, summary = run_scenario(EXAMPLES / "conformity.toml", overrides=offline)
    db = sqlite3.connect(run_dir.events_path)
    metrics = {(r, n): v for r, n, v in db.execute("SELECT round, name, value FROM metrics WHERE name LIKE 'conformity.%'")}
    for r in range(4):
        assert sum(metrics[r, f"conformity.scores.{s}"] for s in range(1, 11)) == 20
    friend_counts = {n.split(".")[-1] for (r, n) in metrics if n.startswith("conformity.ac.")}
    assert friend_counts == {"2", "3", "4", "5", "6", "7"}


def oracle_run(run_scenario, make_plugins, *disabled, rounds=6):
    plugins = make_plugins(enable=["townsquare.testing.oracle"], disable=list(disabled))
    run_dir, _ = run_scenario(EXAMPLES / "conformity.toml", plugins=plugins, overrides=[f"rounds={rounds}", "llm.name=oracle"])
    _, state = run_dir.latest_checkpoint()
    return run_dir, state["metrics"]["conformity"]["scores"]


class Prompts:
    """The oracle's conformity prompts, kept by agent (the oracle itself reads only them)."""

    def __init__(self, monkeypatch):
        from townsquare.testing.oracle import OracleLLM

        self.seen: list[tuple[str, str, str]] = []
        original = OracleLLM.complete

        async def complete(oracle, request):
            response = await original(oracle, request)
            if request.purpose == "recagent.conformity":
                self.seen.append((request.agent_id, request.messages[-1].content, response.text))
            return response

        monkeypatch.setattr(OracleLLM, "complete", complete)


def test_friends_opinions_reach_the_rater_only_through_its_memory(run_scenario, make_plugins, monkeypatch):
    prompts = Prompts(monkeypatch)
    run_dir, scores = oracle_run(run_scenario, make_plugins)
    assert len(prompts.seen) == 20 * 6  # every agent, every round
    # no friend's score is handed over: every score in a prompt sits in a memory line
    for _, prompt, _ in prompts.seen:
        remembered = prompt.split("What you remember about it:")[1].split("An interviewer asks")[0]
        rest = prompt.replace(remembered, "")
        assert "/10" not in rest.split("last time:")[0] and "out of 5" not in rest
    # opinions travel: some agents that never watched the movie remember a friend's score of it and change theirs
    told = [(a, p) for a, p, _ in prompts.seen if "posted to friends" in p and "<Silent Orbit 1>:" in p]
    assert told
    changed = [a for a, s in scores.items() if len(set(s)) > 1]
    assert len(changed) >= 5
    # a change is always a step toward what the agent's memory holds (the seeds' 3-9 and the relays)
    assert all(1 <= v <= 10 for s in scores.values() for v in s)


def test_without_memory_no_opinion_reaches_the_rater(run_scenario, make_plugins, monkeypatch):
    prompts = Prompts(monkeypatch)
    run_dir, scores = oracle_run(run_scenario, make_plugins, "short_term_memory", "long_term_memory")
    assert all("(nothing comes to mind)" in p for _, p, _ in prompts.seen)
    assert all(len(set(s)) == 1 for s in scores.values())  # nobody ever changes: AC(i) = 0 for every i
    db = sqlite3.connect(run_dir.events_path)
    ac = dict(db.execute("SELECT name, value FROM metrics WHERE round = 5 AND name LIKE 'conformity.ac.%'").fetchall())
    assert set(ac.values()) == {0.0}


SCENARIO = """
name = "conformity-llm"
seed = 1
rounds = 3
metrics = ["conformity"]
[activity]
model = "always"
[platform]
name = "recsys"
catalogue = "synthetic"
synthetic_items = 20
[recommender]
name = "item_random"
[llm]
name = "scripted"
[plugins.scripted.rules]
"Bo Lind thinks it is great" = "8"
"last time: none yet" = "3"
"last time: 3/10" = "3"
"last time: 8/10" = "8"
[plugins.conformity]
rater = "llm"
[[populations]]
name = "users"
count = 2
slots = {{ policy = "recagent_policy" }}
[populations.personas]
name = "inline"
items = [
  {{ name = "Ada Moss", sentences = ["I love comedy films."], fields = {{ friends = ["Bo Lind"], memories = ["Bo Lind thinks it is great."] }} }},
  {{ name = "Bo Lind", sentences = ["I love drama films."], fields = {{ friends = ["Ada Moss"] }} }},
]
"""


def test_llm_rater_reads_the_agents_memory(write_scenario, run_scenario):
    run_dir, _ = run_scenario(write_scenario(SCENARIO.format()))
    db = sqlite3.connect(run_dir.events_path)
    assert db.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose = 'recagent.conformity'").fetchone()[0] == 6
    _, state = run_dir.latest_checkpoint()
    scores = state["metrics"]["conformity"]["scores"]
    # Ada remembers what Bo said (her persona's memory, written before her first step): 8 from round 0 on;
    # Bo remembers nothing of the kind and keeps his 3
    assert scores["users-0001"] == [8, 8, 8] and scores["users-0002"] == [3, 3, 3]
