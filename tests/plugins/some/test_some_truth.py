"""Ground truth from a run in SoMe's label formats, and task queries from SoMe's own files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from townsquare.api import UsageError
from townsquare.plugins.some.corpus import corpus_from_run, corpus_from_some
from townsquare.plugins.some.run_truth import ground_truth, label_emotions, read_run, trending
from townsquare.plugins.some.some_command import load_some_prompts
from townsquare.plugins.some.tasks import TASKS, read_ground_truth, some_queries, task_type

from test_some_tools import DATA, make_run

PROMPTS = load_some_prompts()


@pytest.fixture
def log(tmp_path):
    make_run(tmp_path / "events.sqlite")
    return read_run(tmp_path / "events.sqlite")


def truth(log, short, per_task=10, seed=0):
    return ground_truth(task_type(short), log, 3, per_task, np.random.default_rng(seed), PROMPTS)


def test_the_run_log_knows_its_rounds_and_clock(log):
    assert (log.rounds, log.minutes_per_round, log.start) == (6, 60, "2024-03-04 06:00:00")
    assert log.time_of(2) == "2024-03-04 08:00:00" and len(log.posts) == 10


def test_behaviour_labels_come_from_later_actions_with_balanced_negatives(log):
    ubp = truth(log, "UBP")
    assert sorted(ubp) == ["comment", "like", "repost"]
    like = ubp["like"]["users-0001"]
    assert like[0] == {"weibo_id": "p4", "label": "是"} and like[1]["label"] == "否"
    # a negative: shown to her from the split on (round 3: p4, p2, p3, p6), not hers, never liked by her
    assert like[1]["weibo_id"] in {"p2", "p3", "p6"}
    # bob's comment negative comes from what he was shown from round 3 on (p1, p3, p7), not from round 1
    assert ubp["comment"]["users-0002"][1]["weibo_id"] in {"p3", "p7"}
    dave = {e["weibo_id"] for e in ubp["like"]["users-0004"] if e["label"] == "否"}
    assert dave <= {"p7", "p3", "p1", "p2"} and "p5" not in dave
    assert ubp["like"]["users-0004"][0] == {"weibo_id": "p5", "label": "是"}
    assert ubp["comment"]["users-0002"][0] == {"weibo_id": "p1", "comment": "Great pace, keep going!", "label": "是"}
    assert ubp["repost"]["users-0003"][0] == {"weibo_id": "p6", "repost": "", "label": "是"}
    labels = [e["label"] for users in ubp.values() for entries in users.values() for e in entries]
    assert (labels.count("是"), labels.count("否")) == (5, 5)
    # the history-only actions (bob liked p1 in round 1) are no label
    assert "users-0002" not in ubp["like"]
    small = truth(log, "UBP", per_task=4)
    assert sum(len(e) for users in small.values() for e in users.values()) == 4
    one = truth(log, "UBP", per_task=1)  # a positive comes with its negative
    assert sorted(e["label"] for users in one.values() for entries in users.values() for e in entries) == ["否", "是"]


def test_interest_comment_and_emotion_labels(log):
    mcr = truth(log, "MCR")
    positives = sorted((uid, e["weibo_id"]) for uid, entries in mcr.items() for e in entries if e["label"] == "是")
    assert positives == [("users-0001", "p4"), ("users-0002", "p1"), ("users-0003", "p6"), ("users-0004", "p1"), ("users-0004", "p5")]
    negatives = [e["weibo_id"] for entries in mcr.values() for e in entries if e["label"] == "否"]
    assert len(negatives) == 5 and "p1" not in negatives[:1]
    ucs = truth(log, "UCS")
    # the hard negative: another user's comment under the same post
    assert ucs["users-0002"] == [{"weibo_id": "p1", "comment": "Great pace, keep going!", "label": "是"},
                              {"weibo_id": "p1", "comment": "See you at the start line", "label": "否"}]
    uea = truth(log, "UEA")
    assert sorted((uid, e["comment"]) for uid, entries in uea.items() for e in entries) == \
        [("users-0002", "Great pace, keep going!"), ("users-0004", "See you at the start line")]


class Votes:
    """A judge whose readings are given in order."""

    def __init__(self, readings):
        self.readings = iter(readings)
        self.prompts = []

    def for_agent(self, agent_id):
        return self

    async def choose(self, prompt, labels, **_):
        self.prompts.append(prompt)
        return next(self.readings)


def test_emotion_labels_are_the_judges_majority_of_three(log):
    pending = truth(log, "UEA")
    judge = Votes(["positive", "angry", "positive", "sad", "fear", "surprise"])
    labelled = asyncio.run(label_emotions(pending, judge, PROMPTS, 3, {p.id: p for p in log.posts}))
    assert labelled["users-0002"] == [{"weibo_id": "p1", "emotion": "积极"}]
    assert labelled["users-0004"] == [{"weibo_id": "p1", "emotion": "悲伤"}]  # no majority: the first reading
    assert 'Post: "Loving the #marathon training' in judge.prompts[0] and 'Comment: "Great pace' in judge.prompts[0]


def test_trending_terms_need_two_authors_and_skip_background_words(log):
    background = {"marathon": 4, "scripted": 10}
    posts = log.posts[:4]
    assert trending(posts, background, 10, 2, 3) == ["marathon"]
    assert trending(posts, {"marathon": 6}, 10, 2, 3) == []  # in more than half the run's posts: background


def test_post_centred_ground_truth(log):
    red = truth(log, "RED")
    assert list(red) == ["2024-03-04 06:00:00_2024-03-04 08:00:00_anywhere"]
    event = red["2024-03-04 06:00:00_2024-03-04 08:00:00_anywhere"][0]
    assert event["标题"] == "marathon" and event["摘要"].startswith("Loving the #marathon") and event["时间"] == "2024-03-04"
    ses = truth(log, "SES")
    assert list(ses) == ["marathon"]
    assert ses["marathon"].splitlines()[1] == "4 posts by 4 users, from 2024-03-04 06:00:00 to 2024-03-04 09:00:00."
    smq = truth(log, "SMQ")
    assert len(smq) == 5
    assert smq["Who posted most about \"marathon\", and what did the first post on it say?"].startswith(
        "alice (ID users-0001), with 1 posts; the first post, by alice at 2024-03-04 06:00:00")
    assert smq["What does the user with ID users-0003 mostly post about?"].startswith("Mostly about ")


def test_run_ground_truth_becomes_queries_in_some_format(log, tmp_path):
    whole = corpus_from_run(tmp_path / "events.sqlite")
    queries, skipped = some_queries(TASKS["user_behavior_prediction"], truth(log, "UBP"), whole, PROMPTS, "x")
    assert skipped == 0 and len(queries) == 10
    first = next(q for q in queries if q.label == "yes" and q.behavior == "like" and "users-0001" in q.text)
    assert first.text == "Will the user with ID users-0001 like this post? ```Anyone else following the #marathon qualifiers?```"
    red, _ = some_queries(TASKS["realtime_event_detection"], truth(log, "RED"), whole, PROMPTS, "x")
    assert red[0].text == ("Tell me which events were discussed on social media between 2024-03-04 06:00:00 and "
                           "2024-03-04 08:00:00 (anywhere).")
    assert red[0].label.startswith("- marathon | Loving the #marathon")
    # the written ground truth reads back as SoMe's files do
    (tmp_path / "gt" / "user_behavior_prediction").mkdir(parents=True)
    (tmp_path / "gt" / "user_behavior_prediction" / "ground_truth.json").write_text(json.dumps(truth(log, "UBP"), ensure_ascii=False))
    again, _ = some_queries(TASKS["user_behavior_prediction"], read_ground_truth(tmp_path / "gt", TASKS["user_behavior_prediction"]),
                            whole, PROMPTS, "x")
    assert [(q.text, q.label) for q in again] == [(q.text, q.label) for q in queries]


def test_queries_from_somes_own_files():
    corpus = corpus_from_some(DATA / "database")
    datasets = DATA / "datasets"
    expected = {"UBP": (3, 1), "MCR": (2, 0), "UCS": (2, 0), "UEA": (2, 0), "MID": (2, 0), "SMQ": (1, 0), "RED": (1, 0), "SES": (1, 0)}
    for short, (count, skipped) in expected.items():
        task = task_type(short)
        queries, missing = some_queries(task, read_ground_truth(datasets, task), corpus, PROMPTS, short)
        assert (len(queries), missing) == (count, skipped), short
    mid, _ = some_queries(task_type("MID"), read_ground_truth(datasets, task_type("mid")), corpus, PROMPTS, "x")
    assert [q.label for q in mid] == ["true", "false"] and "literally years" in mid[0].text
    uea, _ = some_queries(task_type("UEA"), read_ground_truth(datasets, task_type("UEA")), corpus, PROMPTS, "x")
    assert [q.label for q in uea] == ["positive", "fear"] and "北京今天举行马拉松比赛" in uea[0].text
    red, _ = some_queries(task_type("RED"), read_ground_truth(datasets, task_type("RED")), corpus, PROMPTS, "x")
    assert red[0].text == "Tell me which events in 北京 were discussed on social media between 2025-06-01 00:00:00 and 2025-06-02 00:00:00."


@pytest.mark.parametrize("data, message", [
    ({"100": [{"label": "是"}]}, "100[0]: missing field 'weibo_id'"),
    ({"100": {"weibo_id": "1"}}, "100: expected a list of posts"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_ground_truth_is_one_line_naming_the_field(data, message):
    with pytest.raises(UsageError) as err:
        some_queries(TASKS["media_content_recommend"], data, None, PROMPTS, "gt.json")
    assert str(err.value) == f"gt.json: {message}" or message in str(err.value)


def test_tasks_are_named_by_folder_or_abbreviation():
    assert task_type("ubp").name == "user_behavior_prediction" and task_type("user_comment_simulation").short == "UCS"
    with pytest.raises(UsageError, match="unknown task 'xyz'; the tasks are: RED"):
        task_type("xyz")
    with pytest.raises(UsageError, match="no such file"):
        read_ground_truth(Path("/nonexistent"), TASKS["media_content_recommend"])
