"""Traces from their sources: Twitter15/16 propagation trees, MADOC-style Parquet, MovieLens
(RecBole's atomic files among its layouts) and run directories; ``--against`` finds each by
its files, and bad input is one line naming the file."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pytest

from helpers import ROOT, read_table, scenario_text
from townsquare.api import UsageError
from townsquare.plugins.validation.dimensions.cascade_shape import max_breadth, structural_virality
from townsquare.plugins.validation.traces.movielens_trace import movielens_trace
from townsquare.plugins.validation.traces.run_trace import run_trace
from townsquare.plugins.validation.traces.trace_source import read_trace
from townsquare.plugins.validation.traces.twitter_trees import read_tree, twitter_trace

TWITTER = ROOT / "tests" / "data" / "validation" / "twitter15"
ATOMIC = ROOT / "tests" / "data" / "recsys" / "ml-100k-atomic-mini"


def test_twitter_trees_become_cascades():
    trace = twitter_trace(TWITTER, "twitter15")
    star, headless, chain = trace.cascades
    assert (star.id, star.users, star.parent.tolist()) == ("100", ["u1", "u2", "u3", "u4"], [-1, 0, 0, 0])  # u3's line twice: once
    assert star.times.tolist() == [0.0, 90.0, 120.0, 1800.0]  # minutes after the source tweet, in seconds
    # no ROOT line: the first parent is the source; a parent that is no earlier node hangs from it
    assert (headless.users, headless.parent.tolist()) == (["u5", "u6", "u7", "u8"], [-1, 0, 1, 0])
    assert chain.depths().tolist() == [0, 1, 2, 3, 4] and max_breadth(chain) == 1
    assert structural_virality(chain) == pytest.approx(2.0)  # a path of n nodes: (n + 1) / 3
    assert structural_virality(star) == pytest.approx(2 * 3 / 4)  # a star of n nodes: 2 (n - 1) / n
    assert not trace.absolute_times and sorted(set(trace.kinds.tolist())) == ["post", "repost"]
    assert ("u1", "u7") in trace.interactions and ("u8", "u5") in trace.interactions and len(trace) == 13


def test_a_malformed_tree_line_names_the_file_and_line(tmp_path):
    bad = tmp_path / "1.txt"
    bad.write_text("['ROOT', 'ROOT', '0.0']->['u1', '1', '0.0']\n['u1', '1', '0.0']->['u2', '1']\n")
    with pytest.raises(UsageError, match=r"1.txt: line 2: expected \['user', 'tweet', 'minutes'\]"):
        read_tree(bad)
    bad.write_text("['ROOT', 'ROOT', '0.0']->['u1', '1', 'soon']\n")
    with pytest.raises(UsageError, match="line 1: delay 'soon' is not a number of minutes"):
        read_tree(bad)


def _madoc(path, rows, columns=("post_id", "user_id", "publish_date", "interaction_type", "parent_id", "parent_user_id")):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({c: [r[k] for r in rows] for k, c in enumerate(columns)})
    pq.write_table(table, path)
    return path


MADOC_ROWS = [
    ("p1", "a", 100, "post", None, None),
    ("p2", "d", 150, "POST", None, None),
    ("c1", "b", 200, "comment", "p1", "a"),
    ("c2", "a", 300, "comment", "c1", "b"),
    ("r1", "c", 400, "repost", "p1", "a"),
    ("c3", "e", 500, "comment", "gone", "z"),  # its parent is not in the file: a root of its own
]


def test_madoc_rows_become_events_interactions_and_cascades(tmp_path):
    trace = read_trace(str(_madoc(tmp_path / "voat_technology_madoc.parquet", MADOC_ROWS)))
    assert trace.name == "voat_technology_madoc" and trace.absolute_times
    assert trace.kinds.tolist() == ["post", "post", "comment", "comment", "repost", "comment"]
    assert sorted(trace.interactions) == [("a", "b"), ("b", "a"), ("c", "a"), ("e", "z")]
    by_root = {c.id: c for c in trace.cascades}
    assert sorted(by_root) == ["c3", "p1", "p2"]
    assert by_root["p1"].users == ["a", "b", "a", "c"] and by_root["p1"].parent.tolist() == [-1, 0, 1, 0]


def test_madoc_files_without_its_columns_or_kinds_are_one_line(tmp_path):
    with pytest.raises(UsageError, match="no 'parent_id' column"):
        read_trace(str(_madoc(tmp_path / "a.parquet", [r[:4] for r in MADOC_ROWS], ("post_id", "user_id", "publish_date", "interaction_type"))))
    with pytest.raises(UsageError, match="interaction_type 'vote' is none of"):
        read_trace(str(_madoc(tmp_path / "b.parquet", [("p1", "a", 1, "vote", None, None)])))
    (tmp_path / "c.parquet").write_text("not parquet")
    with pytest.raises(UsageError, match="c.parquet: not a readable Parquet file"):
        read_trace(str(tmp_path / "c.parquet"))


def test_movielens_in_recbole_atomic_files_is_a_rating_trace():
    trace = movielens_trace(ATOMIC, "ml")
    assert trace.rating_scale == (1.0, 5.0) and len(trace) == 10 and len(trace.catalogue) == 8
    assert trace.genres["4"] == ("Film-Noir", "Sci-Fi") and trace.population == ("1", "2", "3")
    assert set(trace.kinds.tolist()) == {"rate"} and trace.times.min() == 1000


def test_against_finds_the_layout_and_says_what_is_wrong(tmp_path, data_home):
    assert read_trace(str(ATOMIC)).cascades == []
    shutil.copytree(TWITTER, tmp_path / "rumdetect" / "twitter15")
    assert len(read_trace(str(tmp_path / "rumdetect")).cascades) == 3  # the one dataset folder inside
    shutil.copytree(TWITTER, tmp_path / "rumdetect" / "twitter16")
    with pytest.raises(UsageError, match="holds both twitter15/ and twitter16/: name one"):
        read_trace(str(tmp_path / "rumdetect"))
    with pytest.raises(UsageError, match="is none of the trace layouts"):
        read_trace(str(tmp_path))
    with pytest.raises(UsageError, match="not installed.*townsquare data fetch movielens-100k"):
        read_trace("movielens-100k")
    with pytest.raises(UsageError, match="no such file or folder"):
        read_trace("./nowhere")
    shifted = read_trace(str(ATOMIC), utc_offset=-6)
    assert shifted.times.min() == 1000 - 6 * 3600


def test_a_run_is_a_trace_with_cascades_along_follows(write_scenario, run_scenario, make_plugins):
    run_dir, _ = run_scenario(write_scenario(scenario_text(rounds=4, count=6)), plugins=make_plugins())
    trace = run_trace(run_dir.path)
    actions = read_table(run_dir.path, "actions")
    reblogs = [a for a in actions if a[4] == "reblog" and a[9] == 1]
    assert sum(c.size - 1 for c in trace.cascades) == len(reblogs) and len(trace.cascades) == len(read_table(run_dir.path, "posts"))
    assert trace.population == tuple(f"users-{k:04d}" for k in range(1, 7)) and trace.resolution == 3600.0
    assert trace.span == 4 * 3600.0 and set(trace.kinds.tolist()) <= {"post", "repost", "like", "comment"}
    follows = {(f[3], f[4]) for f in read_table(run_dir.path, "follows")}
    for cascade in trace.cascades:
        assert cascade.parent[0] == -1 and all(0 <= cascade.parent[n] < n for n in range(1, cascade.size))
        for n in range(1, cascade.size):  # a reshare hangs from someone its author follows, else from the post
            up = cascade.parent[n]
            assert up == 0 or (cascade.users[n], cascade.users[up]) in follows
    db = sqlite3.connect(run_dir.events_path)
    assert len(trace) == db.execute("SELECT COUNT(*) FROM actions WHERE ok = 1 AND kind IN ('post', 'comment', 'reblog', 'like')").fetchone()[0]
    db.close()
    assert np.all(np.diff(trace.times) >= 0)
