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
    run_dir, summary = run_scenario(EXAMPLES / "conformity.toml", overrides=["rounds=4"])
    db = sqlite3.connect(run_dir.events_path)
    metrics = {(r, n): v for r, n, v in db.execute("SELECT round, name, value FROM metrics WHERE name LIKE 'conformity.%'")}
    for r in range(4):
        assert sum(metrics[r, f"conformity.scores.{s}"] for s in range(1, 11)) == 20
    friend_counts = {n.split(".")[-1] for (r, n) in metrics if n.startswith("conformity.ac.")}
    assert friend_counts == {"2", "3", "4", "5", "6", "7"}


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
"score for it last time: none yet" = "3"
"Ada Moss: 3/10" = "8"
"score for it last time: 3/10" = "3"
[plugins.conformity]
rater = "llm"
[[populations]]
name = "users"
count = 3
slots = {{ policy = "embedding_items" }}
[populations.personas]
name = "inline"
items = [
  {{ name = "Ada Moss", sentences = ["I love comedy films."], fields = {{ friends = ["Bo Lind"] }} }},
  {{ name = "Bo Lind", sentences = ["I love drama films."], fields = {{ friends = ["Ada Moss"] }} }},
  {{ name = "Cy Bell", sentences = ["I love action films."] }},
]
"""


def test_llm_rater_sees_friends_scores(write_scenario, run_scenario):
    run_dir, _ = run_scenario(write_scenario(SCENARIO.format()))
    db = sqlite3.connect(run_dir.events_path)
    assert db.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose = 'recagent.conformity'").fetchone()[0] == 9
    metrics = {(r, n): v for r, n, v in db.execute("SELECT round, name, value FROM metrics")}
    # round 0: all 3; round 1: Bo sees Ada's 3 and moves to 8, Ada sees Bo's 3 and stays, Cy has no friends
    assert metrics[0, "conformity.scores.3"] == 3
    assert metrics[1, "conformity.scores.8"] == 1 and metrics[1, "conformity.changed"] == pytest.approx(1 / 3)
    # round 2: nobody changes; AC(1) = (Ada 0/2 + Bo 1/2) / 2, AC(0) = Cy's 0
    assert metrics[2, "conformity.changed"] == 0
    assert metrics[2, "conformity.ac.1"] == pytest.approx(0.25) and metrics[2, "conformity.ac.0"] == 0
