"""``townsquare eval some`` end to end: a scripted run whose events are the hand-made run's,
the scripted model following SoMe's tool chains; bad input; replay from the cache; SoMe's own
files; the report's section."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from helpers import cli_in_process, count_scripted_calls
from test_some_tools import DATA, make_run

SCRIPTED = ["-p", "townsquare.testing.scripted"]
WINDOW = "2024-03-04 06:00:00_2024-03-04 08:00:00"

#: the scripted model's replies: the judge first, then tool results, then the task queries
RULES = {
    "Reference": "Accuracy: 4, Completeness: 3, Relevance: 5",
    "Which emotion does the comment show": "positive",
    "pull out its final verdict": "mostly-true",
    "Here are social-media posts that were grouped": "People trained for the city marathon.",
    "Result of user_search": '{"answer": "yes"}',
    "Result of post_search": f'{{"tool": "topic_clustering", "arguments": {{"folder_name": "anywhere_{WINDOW.replace("_", "_")}"}}}}',
    "Result of topic_clustering": f'{{"tool": "topic_summarization", "arguments": {{"folder_name": "anywhere_{WINDOW}_clusters"}}}}',
    "Result of topic_summarization": f'{{"tool": "data_folder", "arguments": {{"folder_name": "anywhere_{WINDOW}_clusters_summaries", "start_idx": 0, "end_idx": 5}}}}',
    "Result of data_folder": '{"answer": "- marathon: people trained for the city marathon"}',
    "Result of topic_search": '{"answer": "The marathon was announced, then run."}',
    "Result of knowledge_retrieve": '{"answer": "The documents say so: mostly-true."}',
    "Tell me which events": f'{{"tool": "post_search", "arguments": {{"location": "anywhere", "start_time": "{WINDOW.split("_")[0]}", "end_time": "{WINDOW.split("_")[1]}"}}}}',
    "Summarise the event": '{"tool": "topic_search", "arguments": {"topic_name": "marathon"}}',
    "Is this tweet true": '{"tool": "knowledge_retrieve", "arguments": {"query": "border wall", "topk": 2}}',
    "Did the user with ID": '{"answer": "no"}',
    "Which emotion will the user": '{"answer": "positive"}',
    "(Will|Is) the user with ID": '{"tool": "user_search", "arguments": {"uid": "users-0001"}}',
    "(What does|Who posted)": '{"answer": "running"}',
}


def toml_rules() -> str:
    return "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in RULES.items()) + " }"


def cli(*args, cwd=None):
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args, *SCRIPTED], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("some")
    personas = ",\n".join(f'  {{ name = "{n}", sentences = ["I am {n}."] }}' for n in ("alice", "bob", "carol", "dave"))
    (tmp / "s.toml").write_text(f"""name = "some"
seed = 3
rounds = 6
[clock]
start = 2024-03-04T06:00:00
minutes_per_round = 60
[llm]
name = "scripted"
[plugins.scripted]
rules = {toml_rules()}
[[populations]]
name = "users"
count = 4
slots = {{ policy = "scripted_feed" }}
[populations.personas]
name = "inline"
items = [
{personas}
]
""")
    ran = cli("run", str(tmp / "s.toml"), "--out", str(tmp / "run"))
    assert ran.returncode == 0, ran.stderr
    events = tmp / "run" / "events.sqlite"
    db = sqlite3.connect(events)
    ids = [a for (a,) in db.execute("SELECT agent_id FROM agents ORDER BY idx")]
    db.close()
    assert ids == ["users-0001", "users-0002", "users-0003", "users-0004"]
    make_run(events, ids)  # the hand-made run's posts and actions replace the scripted ones
    return tmp / "run"


def test_bad_input_is_one_line_and_exit_2_before_anything_is_written(run_dir):
    for args, message in [
        (["--tasks", "UBP,nope"], "--tasks: unknown task 'nope'; the tasks are: RED (realtime_event_detection)"),
        (["--split", "9"], "--split 9: the run has 6 rounds; give a round from 1 to 5"),
        (["--some-data", str(run_dir / "nowhere")], "nowhere/realtime_event_detection/ground_truth.json: no such file"),
        (["--database", str(DATA / "database")], "--database: give --some-data too"),
        (["--prompts", str(run_dir / "manifest.json")], "manifest.json"),
    ]:
        out = cli("eval", "some", str(run_dir), *args)
        assert out.returncode == 2, (args, out.stderr)
        lines = [line for line in out.stderr.splitlines() if "llm.scripted" not in line]
        assert len(lines) == 1 and message in lines[0], (args, out.stderr)
    assert cli("eval", "some", str(run_dir / "missing")).returncode == 2
    assert not (run_dir / "some").exists()


def test_the_suite_runs_on_the_run_and_replays_from_its_cache(run_dir):
    out = cli("eval", "some", str(run_dir), "--label-with-agent")
    assert out.returncode == 0, out.stderr
    table = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:] if line.split()[0] in
             ("RED", "SES", "UBP", "UEA", "UCS", "MCR", "SMQ")}
    # task: queries, ACC, score, TCR (the agent always says yes / no / positive; the judge gives 4, 3, 5)
    assert table["UBP"][1:5] == ["10", "50.0", "-", "100.0"]
    assert table["MCR"][1:5] == ["10", "50.0", "-", "100.0"]
    assert table["UCS"][1:5] == ["4", "50.0", "-", "100.0"]
    assert table["UEA"][1:5] == ["2", "100.0", "-", "100.0"]
    assert table["RED"][1:6] == ["1", "-", "80.0", "100.0", "4.0"]  # post_search, topic_clustering, topic_summarization, data_folder
    assert table["SES"][1:5] == ["1", "-", "70.0", "100.0"]
    assert table["SMQ"][1:5] == ["5", "-", "80.0", "100.0"]
    assert "note: MID: skipped" in out.stderr
    some = run_dir / "some"
    summary = json.loads((some / "summary.json").read_text())
    assert summary["split"] == 3 and summary["source"] == "run" and [t["short"] for t in summary["tasks"]][0] == "RED"
    results = json.loads((some / "results.json").read_text())
    assert len(results) == 33
    red = next(r for r in results if r["task"] == "realtime_event_detection")
    assert [c["tool"] for c in red["tool_calls"]] == ["post_search", "topic_clustering", "topic_summarization", "data_folder"]
    assert all(c["ok"] for c in red["tool_calls"])
    truth = json.loads((some / "ground_truth" / "user_behavior_prediction" / "ground_truth.json").read_text())
    assert truth["like"]["users-0001"][0] == {"weibo_id": "p4", "label": "是"}
    assert json.loads((some / "ground_truth" / "user_emotion_analysis" / "ground_truth.json").read_text())["users-0002"] == \
        [{"weibo_id": "p1", "emotion": "积极"}]
    assert (some / "summary.csv").read_text().splitlines()[0].startswith("task,short,kind,queries,accuracy,score,tcr")
    db = sqlite3.connect(some / "llm_calls.sqlite")
    calls = dict(db.execute("SELECT status, COUNT(*) FROM llm_calls GROUP BY status").fetchall())
    purposes = {p for (p,) in db.execute("SELECT DISTINCT purpose FROM llm_calls")}
    db.close()
    assert calls.get("ok", 0) == summary["llm_calls"] > 0
    assert {"some.step", "some.tool.summarize", "some.label.emotion", "some.score.red"} <= purposes
    cache = sqlite3.connect(some / "llm_cache.sqlite")
    answers = cache.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    cache.close()

    again = cli("eval", "some", str(run_dir), "--label-with-agent")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:9] == out.stdout.splitlines()[:9]
    cache = sqlite3.connect(some / "llm_cache.sqlite")
    assert cache.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == answers  # nothing asked anew
    cache.close()

    from townsquare.plugins.report.some_section import some_section

    section = some_section(run_dir)
    assert "<td>UBP</td><td class=\"num\">10</td><td class=\"num\">50.0</td>" in section
    assert "Agent scripted, judged by scripted" in section and "labels from round 3 on" in section


def test_somes_own_files_with_a_database_and_its_knowledge_base(run_dir, tmp_path):
    out = cli("eval", "some", str(run_dir), "--some-data", str(DATA / "datasets"), "--database", str(DATA / "database"),
              "--tasks", "MID,UBP,mcr", "--out", str(tmp_path / "eval"))
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:4]}
    # MID: "mostly-true" is right for the true claim, wrong for the false one
    assert rows["MID"][1:5] == ["2", "50.0", "-", "100.0"]
    # UBP: the fixture's post 9999 is not in the database: 3 queries; 5001 like 是, 5004 like 否, 5001 comment 是
    assert rows["UBP"][1:5] == ["3", "66.7", "-", "100.0"]
    assert rows["MCR"][1:5] == ["2", "50.0", "-", "100.0"]
    assert "UBP: 1 queries skipped" in out.stderr
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    mid = [r for r in results if r["task"] == "misinformation_detection"]
    assert [r["extracted"] for r in mid] == ["mostly-true", "mostly-true"] and "[document k1] Border wall" in mid[0]["tool_calls"][0]["result"]


def test_unchanged_on_an_openai_compatible_endpoint_that_faults(run_dir, tmp_path):
    """The same command on a real HTTP endpoint (the fault server: 429s, 500s, cut-off and garbage
    answers): every fault is retried and counted, the evaluation finishes."""
    from townsquare.testing.fault_server import FaultServer

    faults = dict(seed=4, rate_429=0.06, rate_500=0.04, rate_body_truncated=0.04, rate_garbage=0.04, rate_null_content=0.04,
                  retry_after_s=0)
    with FaultServer(latency_ms=1, **faults) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key", "PYTHONIOENCODING": "utf-8"}
        out = subprocess.run([sys.executable, "-m", "townsquare.cli", "eval", "some", str(run_dir), "--llm", "openai:test-model",
                              "--set", "plugins.llm_retry.base_delay_s=0.001", "--tasks", "UBP,SMQ", "--per-task", "4",
                              "--out", str(tmp_path / "eval"), *SCRIPTED], capture_output=True, text=True, env=env)
        served = dict(server.counts)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:3]}
    assert rows["UBP"][1] == "4" and rows["SMQ"][1] == "4"
    db = sqlite3.connect(tmp_path / "eval" / "llm_calls.sqlite")
    statuses = dict(db.execute("SELECT status, COUNT(*) FROM llm_calls GROUP BY status").fetchall())
    models = {m for (m,) in db.execute("SELECT DISTINCT model FROM llm_calls")}
    db.close()
    assert statuses["error"] >= 1 and statuses["ok"] >= 8 and models == {"test-model"}
    # one row per request the server saw; garbage answers arrive as ok and fail to parse later
    assert served["requests"] == statuses["ok"] + statuses["error"] and served["requests"] > served["ok"]
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["agent_model"] == "openai:test-model"


def test_the_report_section_is_absent_without_an_evaluation_and_says_so_when_broken(tmp_path):
    from townsquare.plugins.report.some_section import some_section

    assert some_section(tmp_path) is None
    (tmp_path / "some").mkdir()
    (tmp_path / "some" / "summary.json").write_text("{broken")
    assert some_section(tmp_path).startswith('<p class="none">') and "could not be read" in some_section(tmp_path)
    (tmp_path / "some" / "summary.json").write_text(json.dumps({
        "agent_model": "local:smollm2", "judges": ["local:smollm2"], "source": "run", "split": 2, "llm_calls": 9, "wall_seconds": 1.5,
        "notes": ["MID: skipped"], "tasks": [{"short": "UBP", "queries": 4, "accuracy": 75.0, "score": None, "tcr": 100.0,
                                               "mean_tool_calls": 2.0, "tool_errors": 0, "repairs": 1, "unparsable": 0, "llm_failures": 0}]}))
    section = some_section(tmp_path)
    assert '<td class="num">75.0</td><td>–</td><td class="num">100.0</td>' in section
    assert "Mean of ACC/score over 1 tasks: 75.0" in section and "MID: skipped" in section


def in_process(capsys, *args):
    return cli_in_process(capsys, *args, *SCRIPTED)


def test_uea_labels_never_come_from_the_agent_unless_asked_and_p_is_honoured(run_dir, tmp_path, capsys):
    sys.path.insert(0, str(DATA.parent.parent / "support"))
    code, out, err = in_process(capsys, "eval", "some", str(run_dir), "--tasks", "UEA,SMQ", "--per-task", "2", "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert "warning: UEA: skipped: its labels on a run come from an LLM, and that LLM would be the agent's own" in err
    assert "warning: the judge is the agent's own model (scripted)" in err
    assert "UEA" not in out and "SMQ" in out
    code, _, err = in_process(capsys, "eval", "some", str(run_dir), "--tasks", "UEA", "--out", str(tmp_path / "b"))
    assert code == 2 and "UEA: skipped" in err
    # a labeller that is another model (a plugin loaded with -p, which eval some honours)
    code, out, err = in_process(capsys, "eval", "some", str(run_dir), "--tasks", "UEA", "--labeller", "strict_judge",
                                "--out", str(tmp_path / "c"), "-p", "personagym_strict_judge")
    assert code == 0, err
    db = sqlite3.connect(tmp_path / "c" / "llm_calls.sqlite")
    labelled_by = {p for (p,) in db.execute("SELECT DISTINCT provider FROM llm_calls WHERE purpose LIKE 'some.label%'")}
    db.close()
    assert labelled_by == {"strict_judge"} and "UEA" in out
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["labeller"] == "strict_judge"


def test_estimate_and_a_budget_stop_that_names_the_command(run_dir, tmp_path, capsys, monkeypatch):
    calls = count_scripted_calls(monkeypatch)
    code, out, err = in_process(capsys, "eval", "some", str(run_dir), "--tasks", "UBP,SMQ", "--per-task", "4", "--estimate",
                                "--out", str(tmp_path / "est"))
    assert code == 0, err
    assert calls == [] and not (tmp_path / "est").exists()
    assert "ESTIMATE: " in out and "some.step" in out and "at most" in out
    code, _, err = in_process(capsys, "eval", "some", str(run_dir), "--tasks", "UBP,SMQ", "--per-task", "4",
                              "--set", "plugins.llm_budget.max_calls=5", "--out", str(tmp_path / "stopped"))
    assert code == 3, err
    assert f"raise it with: townsquare eval some {run_dir} " in err and err.strip().endswith("--set plugins.llm_budget.max_calls=10")
    assert 0 < len(calls) <= 5


@pytest.mark.shared_data
def test_the_released_ground_truth_loads_and_scores_with_the_scripted_model(run_dir, tmp_path, capsys):
    from helpers import SHARED_DATA

    released = SHARED_DATA / "some"
    if not (released / "misinformation_detection" / "ground_truth.json").is_file():
        pytest.skip("../shared/data/some is absent")
    code, out, err = in_process(capsys, "eval", "some", str(run_dir), "--some-data", str(released), "--per-task", "2",
                                "--out", str(tmp_path / "released"))
    assert code == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.split() and line.split()[0].isupper()}
    # the tasks whose ground truth carries its own text run (claims, questions, event windows, topics)
    assert {"MID", "RED", "SES", "SMQ"} <= set(rows) and all(rows[t][1] == "2" for t in ("MID", "RED", "SES", "SMQ"))
    # MID: the scripted agent says mostly-true, which is right only for a "true" claim (released labels true/half/false)
    results = json.loads((tmp_path / "released" / "results.json").read_text())
    mid = [r for r in results if r["task"] == "misinformation_detection"]
    assert all(r["correct"] == (r["label"] == "true") for r in mid) and all(r["extracted"] == "mostly-true" for r in mid)
    # the user-centred tasks need SoMe's post database, which is not released with the ground truth: said so
    for short in ("UBP", "MCR", "UCS", "UEA"):
        assert f"{short}: " in err and "queries skipped: their posts are not in" in err


def test_the_estimate_of_a_multi_step_agent_is_within_25_percent_and_a_rerun_calls_no_provider(run_dir, tmp_path, capsys):
    args = ["eval", "some", str(run_dir), "--some-data", str(DATA / "datasets"), "--database", str(DATA / "database"),
            "--tasks", "MID,UBP,mcr"]
    code, printed, err = in_process(capsys, *args, "--estimate")
    assert code == 0, err
    estimated = int(printed.split("ESTIMATE: ")[1].split(" LLM calls")[0].replace(",", ""))
    code, out, err = in_process(capsys, *args, "--out", str(tmp_path / "eval"))
    assert code == 0, err
    db = sqlite3.connect(tmp_path / "eval" / "llm_calls.sqlite")
    made = db.execute("SELECT COUNT(*) FROM llm_calls WHERE status != 'parse_failure' AND purpose NOT LIKE '%.repair'").fetchone()[0]
    steps = db.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose = 'some.step'").fetchone()[0]
    db.close()
    # the agents call tools before they answer (MID: knowledge_retrieve; UBP, MCR: user_search): more than one step a query
    assert steps > 7 and abs(estimated - made) <= 0.25 * made, (estimated, made, printed)
    assert f"{made} answered by the model" in out
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["provider_calls"] == made
    # again: every answer from the cache, and the summary says no provider was called
    code, again, err = in_process(capsys, *args, "--out", str(tmp_path / "eval"))
    assert code == 0, err
    assert " 0 answered by the model" in again and json.loads((tmp_path / "eval" / "summary.json").read_text())["provider_calls"] == 0


# --------------------------------------------------------------------------- answers produced elsewhere (--answers)

JUDGE_RULES = ('plugins.scripted.rules={"pull out its final judgement" = "yes", "pull out its final verdict" = "mostly-true", '
               '"Reference" = "Accuracy: 4"}')


def write_rows(path, rows) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def made_calls(folder) -> int:
    db = sqlite3.connect(folder / "llm_calls.sqlite")
    try:
        return db.execute("SELECT COUNT(*) FROM llm_calls WHERE status != 'parse_failure' AND purpose NOT LIKE '%.repair'").fetchone()[0]
    finally:
        db.close()


def test_the_agents_answers_graded_again_from_a_file_score_the_same(run_dir, tmp_path, capsys):
    args = ["eval", "some", str(run_dir), "--tasks", "UBP,SMQ", "--per-task", "4"]
    code, first, err = in_process(capsys, *args, "--out", str(tmp_path / "agent"))
    assert code == 0, err
    answered = json.loads((tmp_path / "agent" / "results.json").read_text())
    # the agent's answers as another framework would hand them in: task by abbreviation, SMQ's id its question
    rows = [{"task": {"user_behavior_prediction": "UBP"}.get(r["task"], r["task"]),
             "id": r["query"] if r["task"] == "social_media_question_answering" else r["id"], "answer": r["answer"]} for r in answered]
    answers = write_rows(tmp_path / "answers.jsonl", rows)
    graded = [*args, "--answers", answers, "--judge", "scripted"]
    code, printed, err = in_process(capsys, *graded, "--estimate")
    assert code == 0, err
    estimated = int(printed.split("ESTIMATE: ")[1].split(" LLM calls")[0].replace(",", ""))
    assert f"to grade {len(rows)} answers produced elsewhere" in printed and "some.step" not in printed
    code, out, err = in_process(capsys, *graded, "--out", str(tmp_path / "graded"))
    assert code == 0, err
    # the same judge's rules, the same scorers: the same table, and no agent call
    table = lambda text: [line.split()[:5] for line in text.splitlines() if line.split() and line.split()[0] in ("UBP", "SMQ")]  # noqa: E731
    assert table(out) == table(first) and len(table(out)) == 2
    summary = json.loads((tmp_path / "graded" / "summary.json").read_text())
    assert summary["agent_model"] == "answers produced elsewhere (--answers)" and summary["answers"] == [answers]
    made = made_calls(tmp_path / "graded")
    db = sqlite3.connect(tmp_path / "graded" / "llm_calls.sqlite")
    assert not db.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose LIKE 'some.step%'").fetchone()[0]
    db.close()
    assert made > 0 and abs(estimated - made) <= 0.25 * made, (estimated, made)
    # again: every grade from the cache
    code, again, err = in_process(capsys, *graded, "--out", str(tmp_path / "graded"))
    assert code == 0, err
    assert " 0 answered by the model" in again and json.loads((tmp_path / "graded" / "summary.json").read_text())["provider_calls"] == 0


def test_somes_queries_answered_elsewhere_in_both_formats_need_no_run(tmp_path, capsys):
    lines = write_rows(tmp_path / "answers.jsonl", [
        {"task": "MID", "id": "11972.json", "answer": "Judging by the documents, this is mostly-true."},   # true: right
        {"task": "misinformation_detection", "id": "11685.json", "answer": "false"},                   # a plain label
        {"task": "MCR", "id": "100:1", "answer": "Probably yes"},                                        # 否: wrong
        {"task": "SMQ", "id": "用户ID为100的用户经常发什么内容？", "answer": "跑步"}])
    released = tmp_path / "results" / "user_behavior_prediction" / "model.json"   # the released test scripts' layout
    released.parent.mkdir(parents=True)
    released.write_text(json.dumps({"like": {"100": {"0": "是", "1": "Error"}}, "comment": {"100": {"0": "我认为会，是", "1": "否"}}},
                                   ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "graded"
    code, printed, err = in_process(capsys, "eval", "some", "--answers", lines, "--answers", str(released), "--some-data",
                                    str(DATA / "datasets"), "--judge", "scripted", "--set", JUDGE_RULES, "--out", str(out))
    assert code == 0, err
    rows = {line.split()[0]: line.split()[1:5] for line in printed.splitlines() if line.split() and line.split()[0].isupper()}
    # task: queries, ACC, score, TCR; UBP's "Error" is the release's mark of a query that failed: wrong, not completed
    assert rows["MID"] == ["2", "100.0", "-", "100.0"] and rows["MCR"] == ["1", "0.0", "-", "100.0"]
    assert rows["UBP"] == ["4", "75.0", "-", "75.0"] and rows["SMQ"] == ["1", "-", "80.0", "100.0"]
    results = {r["id"]: r for r in json.loads((out / "results.json").read_text())}
    assert results["like:100:1"]["status"] == "llm_failure" and results["comment:100:0"]["extracted"] == "yes"
    assert "UBP: 4 queries' posts are not in" in err and "MCR: 1 of its 2 queries answered" in err
    # MID, MCR and UBP: one extraction each for the answers that are not a bare label; SMQ: one score
    assert made_calls(out) == 4 and "4 answered by the model" in printed


@pytest.mark.parametrize("content, message", [
    ("not json\n", "answers.jsonl:1: invalid JSON"),
    ('{"task": "XYZ", "id": "a", "answer": "yes"}\n', "answers.jsonl:1: unknown task 'XYZ'"),
    ('{"task": "MID", "answer": "yes"}\n', 'answers.jsonl:1: no "id"'),
    ('{"task": "MID", "id": "11972.json", "answer": null}\n', 'answers.jsonl:1: no "answer" (a string)'),
    ('\n{"task": "MID", "id": "nope.json", "answer": "true"}\n', "answers.jsonl:2: no MID query 'nope.json' in"),
    ('{"task": "MID", "id": "11972.json", "answer": "true"}\n{"task": "MID", "id": "11972.json", "answer": "false"}\n',
     "answers.jsonl:2: a second answer to MID query '11972.json'"),
])
def test_an_answer_that_cannot_be_read_or_matched_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "answers.jsonl"
    path.write_text(content, encoding="utf-8")
    code, _, err = in_process(capsys, "eval", "some", "--answers", str(path), "--some-data", str(DATA / "datasets"),
                              "--judge", "scripted", "--out", str(tmp_path / "out"))
    lines = [line for line in err.splitlines() if "llm.scripted" not in line]
    assert code == 2 and len(lines) == 1 and message in lines[0], err
    assert not (tmp_path / "out").exists()


def test_answers_need_judges_and_somes_queries_and_refuse_the_agents_options(run_dir, tmp_path, capsys):
    path = write_rows(tmp_path / "a.jsonl", [{"task": "MID", "id": "11972.json", "answer": "true"}])
    wrong = tmp_path / "results" / "somewhere" / "model.json"
    wrong.parent.mkdir(parents=True)
    wrong.write_text("{}")
    nested = tmp_path / "results" / "media_content_recommend" / "model.json"
    nested.parent.mkdir(parents=True)
    nested.write_text('{"100": "yes"}')
    some = ["--some-data", str(DATA / "datasets")]
    for args, message in [
        (["--answers", path, *some], "--answers: name the judges"),
        (["--answers", path, "--judge", "scripted"], "--answers without RUN: give --some-data DIR"),
        ([], "missing RUN"),
        (["--answers", path, *some, "--judge", "scripted", "--llm", "scripted"], "--llm: no agent is asked with --answers"),
        (["--answers", path, *some, "--judge", "scripted", "--per-task", "3"], "--per-task: with --answers and --some-data"),
        (["--answers", str(wrong), *some, "--judge", "scripted"], "model.json: a released results file lives in its task's folder"),
        (["--answers", str(nested), *some, "--judge", "scripted"], "model.json: 100: expected a JSON object"),
    ]:
        code, _, err = in_process(capsys, "eval", "some", *args)
        assert code == 2 and message in err, (args, err)
    # on a run, an answer to a task the run has no queries for is left out with a note
    code, out, err = in_process(capsys, "eval", "some", str(run_dir), "--answers", path, "--judge", "scripted", "--tasks", "UBP",
                                "--out", str(tmp_path / "run"))
    assert code == 0 and "1 answer(s) to tasks not evaluated here (MID) left out" in err, err
