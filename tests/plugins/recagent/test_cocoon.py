"""Information-cocoon study: the entropy metric, Soc-Strategy, the embedding item baseline and
the cocoon scenario end to end (RecAgent fig. 4)."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from townsquare.plugins.recagent.studies.cocoon_entropy import category_entropy, cocoon_entropy, interest_share
from townsquare.plugins.recagent.studies.soc_strategy import pick_different

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_entropy_of_a_hand_made_recommendation_log():
    log = {
        # 4 genre counts: A 2, B 1, C 1 -> f = 1/2, 1/4, 1/4 -> 1.5 ln 2
        "u1": [("A",), ("A", "B"), ("C",)],
        # one genre only: 0
        "u2": [("A",), ("A",), ("A",)],
        # A and B equally: ln 2; an item without genre counts as its own category
        "u3": [("A",), ()],
        "u4": [],  # no recommendation this round: not in U
    }
    assert category_entropy(log["u1"]) == pytest.approx(1.5 * math.log(2))
    assert category_entropy(log["u2"]) == 0.0
    assert category_entropy(log["u3"]) == pytest.approx(math.log(2))
    assert cocoon_entropy(log) == pytest.approx((1.5 * math.log(2) + 0 + math.log(2)) / 3)
    assert cocoon_entropy({"u": []}) is None
    # by first genre: u1 counts A, A, C -> f = 2/3, 1/3; u3: A and "(none)" -> ln 2
    first = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert category_entropy(log["u1"], first_genre=True) == pytest.approx(first)
    assert cocoon_entropy(log, first_genre=True) == pytest.approx((first + 0 + math.log(2)) / 3)
    # the share of page items meeting the user's interests: u1 2 of 3 ("A"), u3 nothing; u4 has no interests
    pages = {"u1": [("A",), ("B",), ("A", "C")], "u3": [("C",)], "u4": [("A",)]}
    assert interest_share(pages, {"u1": ["a movies"], "u3": ["Sci-Fi"], "u4": []}) == pytest.approx(2 / 4)
    assert interest_share(pages, {}) is None
    # narrowing onto two-genre items: every genre keeps the entropy at ln 2, the first genre drops it to 0
    assert category_entropy([("A", "B")] * 4) == pytest.approx(math.log(2)) and category_entropy([("A", "B")] * 4, first_genre=True) == 0.0


def test_soc_strategy_picks_the_least_similar_agents():
    vectors = np.array([[5, 0, 0], [4, 1, 0], [0, 0, 3], [1, 2, 2]], dtype=float)
    friends = [set(), set(), set(), set()]
    pairs = pick_different(vectors, 1, friends, np.random.default_rng(0))
    # 0's opposite is 2 (cosine 0); 1's least similar not yet a friend is 2 (cos 0) ...
    assert pairs[0] == (0, 2) and pairs[1] == (1, 2)
    # ... 2 is already friends with 0 and 1, so it gets 3; 3 gets 0 (cosine 1/3 against 1's 0.49)
    assert pairs[2] == (2, 3) and pairs[3] == (3, 0)
    assert all(u in friends[v] and v in friends[u] for u, v in pairs)


SCENARIO = """
name = "cocoon-mini"
seed = 3
rounds = 6
metrics = ["cocoon_entropy"]
interventions = ["rec_strategy", "soc_strategy"]
[activity]
model = "always"
[platform]
name = "recsys"
catalogue = "synthetic"
synthetic_items = 60
[recommender]
name = "item_mf"
[embedder]
name = "hash"
[plugins.cocoon_entropy]
users = "{users}"
{cocoon}
[plugins.rec_strategy]
enabled = {rec}
n = 2
every = 2
from_round = 2
[plugins.soc_strategy]
enabled = {soc}
n = 1
from_round = 3
[plugins.embedding_items]
broadcast_probability = 1.0
friend_influence = 0.5
search_probability = 0.5
[[populations]]
name = "users"
count = 8
personas = {{ name = "jsonl", path = "{personas}" }}
slots = {{ policy = "embedding_items" }}
"""


def run_mini(write_scenario, run_scenario, rec: bool, soc: bool, users: str = "paged"):
    path = write_scenario(SCENARIO.format(rec=str(rec).lower(), soc=str(soc).lower(), users=users, cocoon="",
                                          personas=EXAMPLES / "cocoon_personas.jsonl"))
    run_dir, summary = run_scenario(path)
    assert summary.rounds_completed == 6
    db = sqlite3.connect(run_dir.events_path)
    metrics = {(r, n): v for r, n, v in db.execute("SELECT round, name, value FROM metrics")}
    return db, metrics


def test_cocoon_run_with_both_strategies(write_scenario, run_scenario):
    db, metrics = run_mini(write_scenario, run_scenario, rec=True, soc=True)
    assert sum(metrics[r, "cocoon_entropy.users"] for r in range(6)) >= 10
    for r in range(6):
        paged = db.execute("SELECT COUNT(DISTINCT agent_id) FROM actions WHERE kind = 'recommend' AND round = ?", (r,)).fetchone()[0]
        assert metrics[r, "cocoon_entropy.users"] == paged
        assert paged == 0 or 0 < metrics[r, "cocoon_entropy.entropy"] < math.log(8) + 1e-9
        assert paged > 0 or (r, "cocoon_entropy.entropy") not in metrics
        assert metrics[r, "rec_strategy.active"] == (1.0 if r in (2, 4) else 0.0)
    # Soc-Strategy at the start of round 3: every agent has a friend from then on
    assert metrics[2, "soc_strategy.added"] == 0 and metrics[3, "soc_strategy.added"] >= 8
    assert db.execute("SELECT COUNT(*) FROM actions WHERE kind = 'broadcast' AND round < 3").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM actions WHERE kind = 'broadcast' AND round >= 3").fetchone()[0] > 0
    # a friend's tip is searched by title, an interest by genre
    searches = [t for (t,) in db.execute("SELECT text FROM actions WHERE kind = 'search'")]
    genres = {"Action", "Comedy", "Drama", "Sci-Fi", "Romance", "Thriller", "Animation", "Documentary"}
    assert any(t in genres for t in searches) and any(t not in genres for t in searches)
    assert db.execute("SELECT COUNT(*) FROM actions WHERE kind = 'watch'").fetchone()[0] > 0


def test_everyone_is_measured_under_every_treatment(write_scenario, run_scenario):
    runs = {(rec, soc): run_mini(write_scenario, run_scenario, rec=rec, soc=soc, users="everyone")
            for rec, soc in ((False, False), (True, False), (False, True))}
    for db, metrics in runs.values():
        # every one of the 8 agents, every round, whoever browsed; the probe pages are recorded nowhere
        assert all(metrics[r, "cocoon_entropy.users"] == 8 for r in range(6))
        assert all(0 < metrics[r, "cocoon_entropy.entropy"] <= math.log(8) + 1e-9 for r in range(6))
        assert all((r, "cocoon_entropy.entropy_cumulative") in metrics for r in range(6))
    # before any strategy starts (round 2) the treatments share their pages and so their entropy
    base, rec, soc = (runs[k][1] for k in ((False, False), (True, False), (False, True)))
    assert base[0, "cocoon_entropy.entropy"] == rec[0, "cocoon_entropy.entropy"] == soc[0, "cocoon_entropy.entropy"]
    assert base[2, "cocoon_entropy.entropy"] != rec[2, "cocoon_entropy.entropy"]  # Rec-Strategy perturbs round 2's pages


def test_measuring_everyone_changes_nothing_the_agents_do(write_scenario, run_scenario):
    paged, _ = run_mini(write_scenario, run_scenario, rec=True, soc=False, users="paged")
    everyone, _ = run_mini(write_scenario, run_scenario, rec=True, soc=False, users="everyone")
    query = "SELECT round, agent_id, kind, target_post, post_ids FROM actions ORDER BY seq"
    assert paged.execute(query).fetchall() == everyone.execute(query).fetchall()


def test_switched_off_strategies_change_nothing(write_scenario, run_scenario):
    _, off = run_mini(write_scenario, run_scenario, rec=False, soc=False)
    assert all(v == 0 for (r, n), v in off.items() if n in ("rec_strategy.active", "soc_strategy.added"))


def test_cocoon_example_scenario_loads(make_plugins):
    from townsquare.launch.scenario_files import load_scenario

    scenario = load_scenario(EXAMPLES / "cocoon.toml", ["plugins.rec_strategy.enabled=true"], make_plugins())
    assert scenario.model.rounds == 50 and scenario.populations[0].config.count == 50
    assert scenario.recommender.spec.name == "item_mf"


def test_satisfaction_is_asked_with_an_llm(write_scenario, run_scenario):
    text = SCENARIO.format(rec="false", soc="false", users="paged", cocoon="satisfaction = true\nsatisfaction_every = 2",
                           personas=EXAMPLES / "cocoon_personas.jsonl")
    text = text.replace('[plugins.rec_strategy]', '[llm]\nname = "scripted"\n[plugins.scripted.rules]\n"How satisfied" = "7"\n[plugins.rec_strategy]')
    run_dir, _ = run_scenario(write_scenario(text))
    db = sqlite3.connect(run_dir.events_path)
    values = dict(db.execute("SELECT round, value FROM metrics WHERE name = 'cocoon_entropy.satisfaction'").fetchall())
    assert set(values) <= {0, 2, 4} and values and all(v == 7 for v in values.values())
    calls = db.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose = 'recagent.satisfaction'").fetchone()[0]
    paged = db.execute("SELECT COUNT(DISTINCT agent_id || '/' || round) FROM actions WHERE kind IN ('recommend') AND round IN (0, 2, 4)").fetchone()[0]
    assert calls == paged


def test_satisfaction_without_an_llm_is_a_clear_error(write_scenario, run_scenario):
    from townsquare.errors import TownsquareError

    text = SCENARIO.format(rec="false", soc="false", users="paged", cocoon="satisfaction = true", personas=EXAMPLES / "cocoon_personas.jsonl")
    with pytest.raises(TownsquareError, match="satisfaction needs an LLM"):
        run_scenario(write_scenario(text))


@pytest.mark.parametrize("override,message", [
    ("plugins.rec_strategy.n=99", "plugins.rec_strategy.n = 99: a page has 5 items; at most 5 can be replaced"),
    ("plugins.rec_strategy.from_round=1000", "plugins.rec_strategy.from_round = 1000: the run has rounds 0..5, so it would never act"),
    ("plugins.soc_strategy.n=1000000000", "plugins.soc_strategy.n = 1000000000: the run has 8 agents, so each can get at most 7"),
    ("plugins.soc_strategy.from_round=6", "plugins.soc_strategy.from_round = 6: the run has rounds 0..5, so it would never act"),
])
def test_strategy_settings_that_cannot_act_are_one_line_errors(write_scenario, tmp_path, capsys, override, message):
    from helpers import cli_in_process

    path = write_scenario(SCENARIO.format(rec="true", soc="true", users="paged", cocoon="", personas=EXAMPLES / "cocoon_personas.jsonl"))
    code, _, err = cli_in_process(capsys, "run", str(path), "--set", override, "--out", str(tmp_path / "r"), "--quiet")
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "r").exists()
    # a switched-off strategy is a control run: its from_round may lie past the end
    code, _, err = cli_in_process(capsys, "run", str(path), "--set", "plugins.rec_strategy.enabled=false", "--set",
                                  "plugins.soc_strategy.enabled=false", "--set", "plugins.rec_strategy.from_round=1000",
                                  "--set", "rounds=1", "--out", str(tmp_path / "off"), "--quiet")
    assert code == 0, err
