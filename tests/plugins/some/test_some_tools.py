"""SoMe's eight tools over a small hand-made run (its events store written directly), and the
corpus they read (the run cut at a round, SoMe's database folders)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import numpy as np
import pytest

from townsquare.api import UsageError
from townsquare.api.commands import EventStore
from townsquare.plugins.some.corpus import Corpus, Document, corpus_from_run, corpus_from_some
from townsquare.plugins.some.tools import PAPER_NAMES, ToolSettings, Toolbox, cluster_posts, openai_tools, top_k

DATA = Path(__file__).resolve().parents[2] / "data" / "some"
START = "2024-03-04T06:00:00"

#: agent ids of the hand-made run
AGENTS = ["users-0001", "users-0002", "users-0003", "users-0004"]  # alice, bob, carol, dave

#: (post id, author index, round, text, reply_to)
POSTS = [
    ("p1", 0, 0, "Loving the #marathon training this morning, ten miles done", None),
    ("p2", 1, 0, "The city #marathon route was announced today", None),
    ("p3", 2, 1, "New pasta recipe with fresh basil tonight", None),
    ("p4", 3, 1, "Anyone else following the #marathon qualifiers?", None),
    ("p5", 0, 2, "Baking bread again, the sourdough starter is alive", None),
    ("p6", 1, 2, "Election debate tonight, who is watching", None),
    ("p7", 2, 3, "Marathon day! #marathon runners everywhere", None),
    ("p8", 1, 3, "Great pace, keep going!", "p1"),
    ("p9", 3, 4, "See you at the start line", "p1"),
    ("p10", 0, 4, "Election results are in, turnout was high", None),
]

#: (round, agent index, kind, target post, text, result id)
ACTIONS = [
    (1, 1, "like", "p1", None, None),
    (2, 2, "like", "p2", None, None),
    (3, 1, "comment", "p1", "Great pace, keep going!", "p8"),
    (4, 3, "comment", "p1", "See you at the start line", "p9"),
    (3, 0, "like", "p4", None, None),
    (4, 2, "reblog", "p6", None, None),
    (5, 3, "like", "p5", None, None),
]

#: (round, agent index, post ids shown): what each agent browsed; negatives come from these
BROWSES = [
    (1, 1, ["p1", "p3"]),
    (3, 0, ["p4", "p2", "p3", "p6"]),
    (3, 1, ["p1", "p3", "p7"]),
    (4, 2, ["p6", "p4", "p10"]),
    (4, 3, ["p1", "p2"]),
    (5, 3, ["p5", "p7", "p3"]),
]


def time_of(round: int) -> str:
    from datetime import datetime, timedelta

    return (datetime.fromisoformat(START) + timedelta(hours=round)).isoformat()


def make_run(events: Path, agent_ids: list[str] | None = None, rounds: int = 6) -> list[str]:
    """Write the hand-made run into ``events`` (an existing run's store keeps its agents); its agent ids."""
    store = EventStore(events)
    ids = agent_ids or AGENTS
    with store.transaction() as db:
        for table in ("posts", "actions", "follows"):
            db.execute(f"DELETE FROM {table}")
        if agent_ids is None:
            persona = lambda n: json.dumps({"name": n, "sentences": [f"I am {n}."], "fields": {"hobby": "running"}})  # noqa: E731
            db.executemany("INSERT OR REPLACE INTO agents VALUES (?,?,?,?,?,?,?,?)",
                           [(a, i, "users", n, persona(n), 1.0, 0, None) for i, (a, n) in enumerate(zip(ids, ["alice", "bob", "carol", "dave"]))])
        db.executemany("INSERT OR REPLACE INTO rounds VALUES (?,?,?,?,?,?)", [(r, time_of(r), 4, 2, 0, 0.0) for r in range(rounds)])
        db.executemany("INSERT INTO posts VALUES (?,?,?,?,?,?,?)",
                       [(pid, ids[a], r, time_of(r), text, reply, None) for pid, a, r, text, reply in POSTS])
        db.executemany("INSERT INTO actions (round, created_at, agent_id, kind, target_post, target_agent, text, post_ids, ok, result_id, error, detail)"
                       " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                       [(r, time_of(r), ids[a], k, t, None, x, None, 1, res, None, None) for r, a, k, t, x, res in ACTIONS]
                       + [(r, time_of(r), ids[a], "browse", None, None, None, json.dumps(shown), 1, None, None, None)
                          for r, a, shown in BROWSES])
        db.executemany("INSERT INTO follows (round, created_at, follower, followee, kind) VALUES (?,?,?,?,?)",
                       [(0, time_of(0), ids[1], ids[0], "follow"), (1, time_of(1), ids[2], ids[0], "follow"),
                        (4, time_of(4), ids[3], ids[0], "follow")])
    store.close()
    return ids


@pytest.fixture
def run_events(tmp_path):
    path = tmp_path / "events.sqlite"
    make_run(path)
    return path


TOPICS = {"marathon": 0, "bread": 1, "pasta": 1, "basil": 1, "sourdough": 1}


async def topic_embed(texts):
    """Three topic directions: running, food, anything else."""
    rows = []
    for text in texts:
        vector = np.zeros(3)
        hits = [TOPICS[w] for w in re.findall(r"[a-z]+", text.lower()) if w in TOPICS]
        vector[hits[0] if hits else 2] = 1.0
        rows.append(vector)
    return np.array(rows)


def run(coro):
    return asyncio.run(coro)


def test_the_run_cut_at_a_round_hides_later_posts_and_interactions(run_events):
    history, whole = corpus_from_run(run_events, 3), corpus_from_run(run_events)
    assert [p.id for p in history.posts] == ["p1", "p2", "p3", "p4", "p5", "p6"]
    assert len(whole.posts) == 10
    # p1: one like before round 3; its two comments come later
    assert (history.by_id["p1"].likes, history.by_id["p1"].comments) == (1, 0)
    assert (whole.by_id["p1"].likes, whole.by_id["p1"].comments) == (1, 2)
    assert history.by_id["p4"].likes == 0 and whole.by_id["p4"].likes == 1
    assert history.by_id["p3"].created == "2024-03-04 07:00:00"
    # alice has two followers before round 3, three in the whole run
    assert history.users["users-0001"].followers == 2 and whole.users["users-0001"].followers == 3
    assert history.users["users-0001"].name == "alice" and "I am alice." in history.users["users-0001"].description


def test_user_search_shows_the_profile_and_stores_the_users_posts(run_events):
    box = Toolbox(corpus_from_run(run_events, 3), topic_embed, None)
    answer = run(box.call("user_search", {"uid": "users-0001"}))
    assert "user ID users-0001, name alice; followers 2, following 0" in answer
    assert "2 posts the user published" in answer and "'users-0001_posts'" in answer
    assert [p.id for p in box.folders["users-0001_posts"].items] == ["p5", "p1"]  # newest first
    assert run(box.call("user_search", {"uid": "bob"})).startswith("Profile: user ID users-0002")  # by unique name
    assert run(box.call("user_search", {"uid": "nobody"})) == "Error: no user with ID 'nobody'"


def test_data_folder_shows_a_slice_and_names_its_bounds(run_events):
    box = Toolbox(corpus_from_run(run_events), topic_embed, None)
    run(box.call("topic_search", {"topic_name": "#marathon"}))
    answer = run(box.call("data_folder", {"folder_name": "#marathon", "start_idx": 1, "end_idx": 3}))
    assert answer.startswith("Items 1 to 2 of 4 in '#marathon':")
    assert "#1 [post p2]" in answer and "#2 [post p4]" in answer and "p1]" not in answer
    assert "reposts 0, comments 0, likes 1" in answer
    assert run(box.call("data_folder", {"folder_name": "#marathon", "start_idx": "9", "end_idx": 12})).startswith(
        "Error: folder '#marathon' holds items 0 to 3")
    assert "folders: '#marathon'" in run(box.call("data_folder", {"folder_name": "x", "start_idx": 0, "end_idx": 1}))
    assert run(box.call("data_folder", {"folder_name": "#marathon", "start_idx": "one", "end_idx": 2})) == \
        "Error: data_folder: start_idx must be a whole number, got 'one'"


def test_post_search_keeps_the_period_and_the_place(run_events):
    box = Toolbox(corpus_from_run(run_events), topic_embed, None)
    answer = run(box.call("post_search", {"location": "anywhere", "start_time": "2024-03-04 06:00:00", "end_time": "2024-03-04 08:00:00"}))
    assert answer.startswith("4 posts published in that place and period")
    assert [p.id for p in box.folders["anywhere_2024-03-04 06:00:00_2024-03-04 08:00:00"].items] == ["p1", "p2", "p3", "p4"]
    run(box.call("post_search", {"location": "city", "start_time": "2024-03-04 06:00", "end_time": "2024-03-05"}))
    assert [p.id for p in box.folders["city_2024-03-04 06:00_2024-03-05"].items] == ["p2"]  # the place named in the text
    assert "is not a time" in run(box.call("post_search", {"location": "", "start_time": "noon", "end_time": "2024-03-05"}))
    assert "not after" in run(box.call("post_search", {"location": "", "start_time": "2024-03-05", "end_time": "2024-03-04"}))


def test_topic_search_needs_every_keyword(run_events):
    box = Toolbox(corpus_from_run(run_events, 3), topic_embed, None)
    assert run(box.call("topic_search", {"topic_name": "marathon"})).startswith("3 posts about that topic")
    assert run(box.call("topic_search", {"topic_name": "#marathon route"})).startswith("1 posts")
    assert run(box.call("topic_search", {"topic_name": "   "})) == "Error: topic_name is empty"


def test_post_retrieve_ranks_a_folder_by_similarity(run_events):
    box = Toolbox(corpus_from_run(run_events, 3), topic_embed, None)
    run(box.call("user_search", {"uid": "users-0001"}))
    answer = run(box.call("post_retrieve", {"query": "sourdough bread", "folder_name": "users-0001_posts", "topk": 1}))
    assert answer.startswith("The 1 posts of 'users-0001_posts' closest to 'sourdough bread':") and "[post p5]" in answer
    assert "[post p1]" not in answer
    assert run(box.call("post_retrieve", {"query": "x", "folder_name": "nope", "topk": 3})) == "Error: no folder of posts 'nope'"
    assert top_k(np.array([1.0, 0.0]), np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 0.1]]), 2) == [2, 1]


def test_knowledge_retrieve_ranks_the_reports():
    docs = [Document("d1", "Bread needs flour and a sourdough starter", "Baking"), Document("d2", "The marathon is 42 km", "Running")]
    box = Toolbox(Corpus([], {}, docs), topic_embed, None)
    answer = run(box.call("knowledge_retrieve", {"query": "how long is a marathon", "topk": 1}))
    assert "[document d2] Running" in answer and "d1" not in answer
    assert run(Toolbox(Corpus([], {}), topic_embed, None).call("knowledge_retrieve", {"query": "q", "topk": 2})) == \
        "Error: this evaluation has no knowledge base"


def test_topic_clustering_groups_at_the_papers_threshold(run_events):
    box = Toolbox(corpus_from_run(run_events, 3), topic_embed, None)
    run(box.call("post_search", {"location": "", "start_time": "2024-03-04 06:00:00", "end_time": "2024-03-05 06:00:00"}))
    answer = run(box.call("topic_clustering", {"folder_name": "_2024-03-04 06:00:00_2024-03-05 06:00:00"}))
    assert answer.startswith("3 clusters of similar posts")
    clusters = box.folders["_2024-03-04 06:00:00_2024-03-05 06:00:00_clusters"].items
    assert [[p.id for p in c] for c in clusters] == [["p1", "p2", "p4"], ["p3", "p5"], ["p6"]]
    # 0.5 (Xue et al., appendix): cosine 0.51 joins, 0.49 does not
    posts = corpus_from_run(run_events).posts[:2]
    for cosine, sizes in ((0.51, [2]), (0.49, [1, 1])):
        vectors = np.array([[1.0, 0.0], [cosine, np.sqrt(1 - cosine**2)]])
        assert [len(c) for c in cluster_posts(posts, vectors, 0.5)] == sizes


def test_topic_summarization_summarises_each_cluster_with_the_agents_llm(run_events):
    seen = []

    async def summarize(posts: str) -> str:
        seen.append(posts)
        return f"event {len(seen)}: {posts.count('[post ')} posts"

    box = Toolbox(corpus_from_run(run_events, 3), topic_embed, summarize, ToolSettings(summary_clusters=2, summary_posts=2))
    assert run(box.call("topic_summarization", {"folder_name": "marathon"})).startswith("Error: no folder of clusters")
    run(box.call("topic_search", {"topic_name": "marathon"}))
    run(box.call("topic_clustering", {"folder_name": "marathon"}))
    run(box.call("post_search", {"location": "", "start_time": "2024-03-04 06:00:00", "end_time": "2024-03-05 06:00:00"}))
    name = "_2024-03-04 06:00:00_2024-03-05 06:00:00"
    run(box.call("topic_clustering", {"folder_name": name}))
    answer = run(box.call("topic_summarization", {"folder_name": f"{name}_clusters"}))
    assert answer.startswith("2 event summaries (one per cluster)")  # two largest of three clusters
    assert box.folders[f"{name}_clusters_summaries"].items == ["event 1: 2 posts", "event 2: 2 posts"]
    assert "[post p1]" in seen[0] and "[post p6]" not in "".join(seen)  # the most engaged of the running cluster


def test_wrong_tools_and_arguments_are_answered_not_raised(run_events):
    box = Toolbox(corpus_from_run(run_events), topic_embed, None)
    assert run(box.call("SearchPost", {})).startswith("Error: there is no tool 'SearchPost'")
    assert run(box.call("user_search", {"id": "users-0001"})) == \
        "Error: user_search: unknown argument(s) id; missing argument(s) uid (takes uid)"
    assert box.calls == [("SearchPost", False), ("user_search", False)]
    long = Toolbox(Corpus(corpus_from_run(run_events).posts * 40, {}), topic_embed, None, ToolSettings(max_answer_chars=500))
    run(long.call("topic_search", {"topic_name": "marathon"}))
    cut = run(long.call("data_folder", {"folder_name": "marathon", "start_idx": 0, "end_idx": 100}))
    assert len(cut) < 600 and cut.endswith("ask data_folder for fewer items at a time]")


def test_the_tools_as_openai_function_schemas():
    tools = openai_tools()
    assert [t["function"]["name"] for t in tools] == list(PAPER_NAMES)
    folder = tools[0]["function"]["parameters"]
    assert folder["required"] == ["folder_name", "start_idx", "end_idx"] and folder["properties"]["start_idx"]["type"] == "integer"


def test_a_some_database_folder_is_read_and_searched():
    corpus = corpus_from_some(DATA / "database")
    assert set(corpus.users) == {"100", "200"} and corpus.users["100"].followers == 52
    assert corpus.by_id["5001"].region == "北京" and corpus.by_id["5001"].likes == 12
    assert [p.id for p in corpus.posts_of("100")] == ["5002", "5003"]  # the user file's posts, time order
    assert len(corpus.knowledge) == 3 and corpus.knowledge[0].title == "Border wall"
    box = Toolbox(corpus, topic_embed, None)
    answer = run(box.call("post_search", {"location": "北京", "start_time": "2025-06-01 00:00:00", "end_time": "2025-06-02 00:00:00"}))
    assert answer.startswith("1 posts")


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON (line 1"),
    ('{"1": {"text": "no id?"}, "2": 5}', "a post needs id and text"),
])
def test_a_broken_some_file_is_one_line_naming_it(tmp_path, content, message):
    (tmp_path / "post_data").mkdir()
    (tmp_path / "post_data" / "all_posts.json").write_text(content)
    with pytest.raises(UsageError) as err:
        corpus_from_some(tmp_path)
    assert "all_posts.json" in str(err.value) and message in str(err.value) and "\n" not in str(err.value)
