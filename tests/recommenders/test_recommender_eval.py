"""Offline evaluation of the item recommenders (``townsquare eval recommenders``): the splits, the
measures on hand-made lists, every recommender on a MovieLens fixture and on a run, and the
RecBole atomic files of a run (``townsquare recbole``)."""

from __future__ import annotations

import json
import math

import pytest

from helpers import ROOT
from townsquare.platforms.recsys.recommender_eval import Interaction, gini, measure, ndcg_at, recall_at, split

DATA = ROOT / "tests" / "data" / "recsys"


def test_measures_on_hand_made_lists():
    assert recall_at(["a", "b", "c"], {"b", "z"}, 2) == 0.5 and recall_at(["a", "b", "c"], {"c"}, 2) == 0
    # one hit at rank 2: DCG 1/log2(3); ideal (one relevant) 1
    assert ndcg_at(["a", "b"], {"b"}, 10) == pytest.approx(1 / math.log2(3))
    assert ndcg_at(["b", "a"], {"a", "b"}, 10) == pytest.approx(1.0)
    assert gini([1, 1, 1, 1]) == 0 and gini([0, 0, 0, 4]) == pytest.approx(0.75) and gini([0, 0]) == 0
    lists = {"u1": ["a", "b"], "u2": ["a", "c"], "u3": ["d", "e"]}
    test = {"u1": {"b"}, "u2": {"x"}}
    row = measure(lists, test, ["a", "b", "c", "d", "e", "x"], {"a": 1.0, "b": 0.5, "c": 0.0}, k=2)
    assert row["users"] == 2 and row["recall"] == 0.5  # u3 has no test item: not counted
    assert row["coverage"] == pytest.approx(3 / 6)  # a, b, c are listed for u1 and u2
    assert row["gini"] == pytest.approx(gini([2, 1, 1, 0, 0, 0]))
    assert row["popularity"] == pytest.approx((0.75 + 0.5) / 2)


def test_leave_last_out_and_temporal_splits():
    log = [Interaction("u", "a", 1), Interaction("u", "b", 3), Interaction("u", "c", 2), Interaction("v", "a", 5),
           Interaction("w", "b", 4), Interaction("w", "d", 6)]
    last = split(log, "leave-last-out")
    assert last.test == {"u": {"b"}, "w": {"d"}}  # v has one interaction: it only trains
    assert sorted((x.user, x.item) for x in last.train) == [("u", "a"), ("u", "c"), ("v", "a"), ("w", "b")]
    timed = split(log, "global-temporal", test_fraction=0.34)  # the latest 2 of 6: v-a (5) and w-d (6)
    assert timed.test == {"w": {"d"}} and len(timed.train) == 4  # v has no earlier interaction
    per_user = split(log, "temporal", test_fraction=0.34)  # each user's latest third: u's b (time 3), w's d
    assert per_user.test == {"u": {"b"}, "w": {"d"}} and len(per_user.train) == 4
    with pytest.raises(Exception, match="--split sideways"):
        split(log, "sideways")


def write_genre_loyal(folder, users=12, movies=40):
    """Users 1-6 rate comedies, 7-12 dramas; the same popular items first, then their own."""
    folder.mkdir()
    rows = ["movieId,title,genres"] + [f"{m},{'Comedy' if m % 2 else 'Drama'} tale {m} (2001),{'Comedy' if m % 2 else 'Drama'}"
                                       for m in range(1, movies + 1)]
    (folder / "movies.csv").write_text("\n".join(rows) + "\n")
    ratings = ["userId,movieId,rating,timestamp"]
    for u in range(1, users + 1):
        own = [m for m in range(1, movies + 1) if (m % 2 == 1) == (u <= users // 2)]
        for t, m in enumerate(own[: 8 + u % 5]):
            ratings.append(f"{u},{m},4.0,{1000 + t}")
    (folder / "ratings.csv").write_text("\n".join(ratings) + "\n")
    return folder


def test_every_item_recommender_on_a_movielens_fixture(tmp_path, capsys):
    from townsquare.cli import main

    folder = write_genre_loyal(tmp_path / "ml")
    main(["eval", "recommenders", str(folder), "--k", "5", "--json"])
    out = json.loads(capsys.readouterr().out)
    [rows] = out["sections"].values()
    assert set(rows) == {"item_random", "item_popularity", "item_mf", "item_embedding"}
    assert all(r["users"] == 12 for r in rows.values())
    # genre-loyal users: each user's next item is the next of its genre's list, the collaborative signal MF learns
    assert rows["item_mf"]["recall"] > rows["item_random"]["recall"]
    assert rows["item_popularity"]["coverage"] <= rows["item_random"]["coverage"]
    main(["eval", "recommenders", str(folder), "--recommender", "item_popularity", "--split", "temporal"])
    text = capsys.readouterr().out
    assert "real ratings (temporal)" in text and "Recall@10" in text and "item_mf" not in text


@pytest.mark.parametrize("folder", ["ml-100k-mini", "ml-1m-mini"])
def test_the_other_layouts_evaluate_too(folder, capsys):
    from townsquare.cli import main

    main(["eval", "recommenders", str(DATA / folder), "--recommender", "item_popularity", "--json"])
    rows = json.loads(capsys.readouterr().out)["sections"]
    assert list(rows) == [f"{folder}: real ratings (leave-last-out)"]


def test_bad_sources_stop_with_one_line(tmp_path, capsys):
    from townsquare.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["eval", "recommenders", str(tmp_path)])
    assert stop.value.code == 2 and "not a MovieLens folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["eval", "recommenders", str(DATA / "ml-mini"), "--recommender", "chronological"])
    assert stop.value.code == 2 and "not an item recommender" in capsys.readouterr().err


RUN = """
name = "eval-run"
seed = 2
rounds = 4
metrics = ["activity"]
[activity]
model = "always"
[platform]
name = "recsys"
catalogue = "movielens"
path = "{data}"
[recommender]
name = "item_popularity"
[embedder]
name = "hash"
[plugins.embedding_items]
watch_threshold = -1.0
[[populations]]
name = "users"
count = 3
slots = {{ policy = "embedding_items" }}
[populations.personas]
name = "movielens_history"
path = "{data}"
history_fraction = 0.5
"""


def test_a_run_is_evaluated_on_its_watches_and_held_out_real_ratings(write_scenario, run_scenario, capsys):
    from townsquare.cli import main

    run_dir, _ = run_scenario(write_scenario(RUN.format(data=DATA / "ml-mini")))
    main(["eval", "recommenders", str(run_dir.path), "--json", "--recommender", "item_popularity", "--recommender", "item_random",
          "-p", "townsquare.testing.scripted"])
    sections = json.loads(capsys.readouterr().out)["sections"]
    assert list(sections) == ["simulated feedback (leave-last-out)", "held-out real ratings (future_items)"]
    simulated = sections["simulated feedback (leave-last-out)"]
    assert simulated["item_popularity"]["users"] == 3  # two watches each: the last one is held out
    held = sections["held-out real ratings (future_items)"]
    assert 1 <= held["item_popularity"]["users"] <= 3


def test_recbole_atomic_files_of_a_run(write_scenario, run_scenario, tmp_path):
    from townsquare.cli import main
    from townsquare.platforms.recsys.recbole import export_recbole

    run_dir, _ = run_scenario(write_scenario(RUN.format(data=DATA / "ml-mini")))
    main(["recbole", str(run_dir.path), "--out", str(tmp_path / "rb"), "--name", "sim", "-p", "townsquare.testing.scripted"])
    inter = (tmp_path / "rb" / "sim.inter").read_text().splitlines()
    assert inter[0] == "user_id:token\titem_id:token\trating:float\ttimestamp:float"
    rows = [line.split("\t") for line in inter[1:]]
    import sqlite3

    db = sqlite3.connect(run_dir.events_path)
    watches = db.execute("SELECT agent_id, target_post FROM actions WHERE kind = 'watch' ORDER BY seq").fetchall()
    # the 8-movie catalogue less each user's 2 earlier ratings, never shown twice: 2 watches each
    assert [(r[0], r[1]) for r in rows] == watches and len(rows) == 6
    assert all(1 <= float(r[2]) <= 10 and float(r[3]) > 0 for r in rows)
    assert [float(r[3]) for r in rows] == sorted(float(r[3]) for r in rows)
    item = (tmp_path / "rb" / "sim.item").read_text().splitlines()
    assert item[0] == "item_id:token\ttitle:token_seq\tgenre:token_seq" and len(item) == 9
    assert "2\tHeat (1995)\tAction Crime Thriller" in item
    user = (tmp_path / "rb" / "sim.user").read_text().splitlines()
    assert user[0].startswith("user_id:token\tname:token_seq\tage:float") and len(user) == 4
    # impressions and the earlier ratings, as the reference code's 1/0 interaction file
    paths = export_recbole(str(run_dir.path), tmp_path / "rb2", "sim", impressions=True, history=True,
                           plugin_options=["townsquare.testing.scripted"])
    rows = [line.split("\t") for line in paths[0].read_text().splitlines()[1:]]
    assert {r[4] for r in rows} == {"1", "0"} and sum(r[4] == "0" for r in rows) > 0
    assert min(float(r[3]) for r in rows if r[4] == "1") < min(float(r[3]) for r in rows if r[4] == "0")
    # the earlier ratings keep their real MovieLens times (ratings.csv: user 1 rated Heat at 1000, Blade Runner at 1010)
    first = {(r[1], float(r[2]), float(r[3])) for r in rows if r[0] == watches[0][0] and r[2]}
    assert {("2", 8.0, 1000.0), ("4", 10.0, 1010.0)} <= first
