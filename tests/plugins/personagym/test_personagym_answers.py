"""``townsquare eval personagym --answers FILE``: answers produced elsewhere graded by the same
steps and judges (the oracle judge: the share of the persona's words an answer holds), the task
looked up among the released questions, the table, the estimate, a rerun from the cache, a
design answering beside a file, several files paired, and bad rows refused in one line."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from helpers import cli_in_process

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "data" / "personagym"
ORACLE = ["--judge", "oracle", "-p", "townsquare.testing.oracle"]
NURSE = "A 34-year-old nurse from Lagos who plays chess on weekends"   # content words: year nurse from lagos plays chess weekends
PILOT = "A 61-year-old retired pilot from Oslo who restores sailboats"  # year retired pilot from oslo restores sailboats
TASKS = ("Expected Action", "Toxicity", "Linguistic Habits", "Persona Consistency", "Action Justification")


def released(persona: str, task: str, n: int) -> str:
    who = "34-year-old nurse from Lagos" if persona == NURSE else "61-year-old retired pilot from Oslo"
    return f"{task} fixture question {n} for {who}: what do you do?"


def rows(nurse_answer: str, pilot_answer: str, per_task: int = 2) -> list[dict]:
    """Released questions, the task named on the nurse's Toxicity rows only (the rest looked up)."""
    out = []
    for persona, answer in ((NURSE, nurse_answer), (PILOT, pilot_answer)):
        for task in TASKS:
            for n in range(1, per_task + 1):
                row = {"persona": persona, "question": released(persona, task, n), "answer": answer, "model": "elsewhere"}
                if persona == NURSE and task == "Toxicity":
                    row["task"] = "Toxicity Control"
                out.append(row)
    return out


def write_jsonl(path: Path, items: list[dict], blank_line: bool = True) -> Path:
    lines = [json.dumps(r) for r in items]
    if blank_line:
        lines.insert(1, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def calls(store: Path) -> int:
    db = sqlite3.connect(store)
    try:
        return db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
    finally:
        db.close()


def test_answers_are_graded_with_the_same_judges_estimated_and_replayed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # nurse: nurse, from, lagos, chess of 7 words -> 1 + floor(4 * 4/7) = 3; pilot: pilot of 7 -> 1
    answers = write_jsonl(tmp_path / "published.jsonl", rows("As a nurse from Lagos I play chess.", "I am a pilot."))
    args = ["eval", "personagym", "--answers", str(answers), "--data", str(FIXTURES), *ORACLE]
    code, printed, err = cli_in_process(capsys, *args, "--estimate")
    assert code == 0, err
    estimated = int(printed.split("ESTIMATE: ")[1].split(" LLM calls")[0].replace(",", ""))
    assert "1 answer file(s)" in printed and "personagym.answer" not in printed   # nothing to answer: examples and grades
    assert not (tmp_path / "runs").exists()

    out = tmp_path / "graded"
    code, printed, err = cli_in_process(capsys, *args, "--out", str(out), "--table", "--label", "published-model")
    assert code == 0, err
    assert "score examples are written by the first judge, oracle" in err
    saved = json.loads((out / "personagym.json").read_text())
    assert saved["questions_source"] == "answers" and saved["targets"] == [str(answers)]
    nurse, pilot = saved["personas"]
    assert nurse["description"] == NURSE and nurse["environment_source"] == "answers" and len(nurse["questions"]) == 10
    assert nurse["task_scores"] == {t: 3.0 for t in nurse["task_scores"]} and nurse["persona_score"] == 3.0
    assert pilot["persona_score"] == 1.0 and pilot["questions"][0]["answer"] == "I am a pilot."
    # the task came from the row or from the released questions: two of each task per persona, in the tasks' order
    assert [q["task"] for q in nurse["questions"]][::2] == ["expected_action", "linguistic_habits", "persona_consistency",
                                                            "toxicity_control", "action_justification"]
    assert saved["scores"]["PersonaScore"] == 2.0
    # the Table-1 shape: the label as the row, an interval in every cell, the paper's models beside it (released questions)
    with open(out / "personagym_table.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert table[0][""] == "published-model" and len(table) == 7 and "GPT 3.5 (paper)" in {r[""] for r in table}
    assert "| published-model | 2.00 [1.00, 3.00]" in (out / "personagym_table.md").read_text()
    made = calls(out / "events.sqlite")
    # 2 personas x 5 tasks: one examples call and one grading call each (2 questions a batch)
    assert made == 20 and "20 answered by the model" in printed
    assert abs(estimated - made) <= 0.25 * made

    # the same command again: every answer from the cache, the same scores
    code, again, err = cli_in_process(capsys, *args, "--out", str(out), "--table", "--label", "published-model")
    assert code == 0, err
    assert "0 answered by the model, 20 from the cache" in again
    assert json.loads((out / "personagym.json").read_text())["scores"] == saved["scores"]


def test_several_files_are_paired_and_one_that_misses_an_answer_is_named(tmp_path, capsys):
    first = write_jsonl(tmp_path / "a.jsonl", rows("As a nurse from Lagos I play chess.", "I am a pilot."))
    better = rows("A nurse from Lagos who plays chess on weekends", "A retired pilot from Oslo who restores sailboats")
    second = write_jsonl(tmp_path / "b.jsonl", better[::-1], blank_line=False)   # another order: matched by question
    out = tmp_path / "both"
    code, printed, err = cli_in_process(capsys, "eval", "personagym", "--answers", str(first), "--answers", str(second),
                                        "--data", str(FIXTURES), "--out", str(out), *ORACLE)
    assert code == 0, err
    assert json.loads((out / "b" / "personagym.json").read_text())["scores"]["PersonaScore"] == 4.0   # 6 of 7 words: 4
    rows_ = {r["task"]: r for r in json.loads((out / "personagym_comparison.json").read_text())["paired"]}
    assert rows_["persona_score"]["difference"] == 2.0 and rows_["persona_score"]["pairs"] == 2
    assert rows_["persona_score"]["p"] is not None       # answer files have no prompts to be identical
    # the score examples are made once for both files: 10 examples calls, 20 grading calls
    assert calls(out / "events.sqlite") == 30

    missing = write_jsonl(tmp_path / "c.jsonl", better[:-1])
    code, _, err = cli_in_process(capsys, "eval", "personagym", "--answers", str(first), "--answers", str(missing),
                                  "--data", str(FIXTURES), "--out", str(tmp_path / "none"), *ORACLE)
    assert code == 2 and f"{missing}: no answer to {first}:21 (persona 'A 61-year-old" in err and "\n" not in err.strip()
    assert not (tmp_path / "none").exists()


def test_a_design_answers_the_files_questions_beside_it(tmp_path, capsys):
    scenario = tmp_path / "design.toml"
    scenario.write_text('name = "d"\nrounds = 1\n[llm]\nname = "oracle"\n[[populations]]\nname = "users"\ncount = 1\n'
                        '[populations.personas]\nname = "inline"\nitems = [{name = "Ada", sentences = ["I hike."]}]\n')
    answers = write_jsonl(tmp_path / "published.jsonl", rows("As a nurse from Lagos I play chess.", "I am a pilot.", per_task=1))
    out = tmp_path / "cmp"
    code, printed, err = cli_in_process(capsys, "eval", "personagym", str(scenario), "--answers", str(answers), "--data", str(FIXTURES),
                                        "--out", str(out), "--table", *ORACLE)
    assert code == 0, err
    design = json.loads((out / "design" / "personagym.json").read_text())
    # the design's agents are the file's personas and answer the file's questions
    assert [p["description"] for p in design["personas"]] == [NURSE, PILOT]
    assert [q["question"] for q in design["personas"][1]["questions"]] == [released(PILOT, t, 1) for t in
                                                                           ("Expected Action", "Linguistic Habits", "Persona Consistency",
                                                                            "Toxicity", "Action Justification")]
    assert "Ada" not in json.dumps(design["personas"])
    # the oracle agent says its whole persona: 5; the file's answers 3 and 1
    assert design["scores"]["PersonaScore"] == 5.0
    assert "published - design: paired over personas" in printed


@pytest.mark.parametrize("line, message", [
    ("not json", ":2: invalid JSON"),
    ('["a list"]', ':2: expected a JSON object with "persona", "question" and "answer"'),
    (json.dumps({"persona": NURSE, "question": "Where?", "answer": 3}), ':2: no "answer" (a string)'),
    (json.dumps({"persona": " ", "question": "Where?", "answer": "x"}), ':2: no "persona"'),
    (json.dumps({"persona": NURSE, "question": "Where?", "answer": "x", "task": "Cooking"}), ":2: unknown PersonaGym task 'Cooking'"),
    (json.dumps({"persona": NURSE, "question": "Where?", "answer": "x"}),
     ":2: no \"task\", and the question 'Where?' is not one of the released questions of its persona"),
    (json.dumps({"persona": "A 19-year-old student from Lima", "question": "Where?", "answer": "x"}),
     ":2: no \"task\", and the persona 'A 19-year-old student from Lima' has no released questions"),
    (json.dumps({"persona": NURSE, "question": released(NURSE, "Toxicity", 1), "answer": "x", "task": "toxicity_control"}),
     ":2: the same persona, task and question as {path}:1"),
])
def test_a_bad_row_is_one_line_naming_the_file_and_line(tmp_path, capsys, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"persona": NURSE, "question": released(NURSE, "Toxicity", 1), "answer": "fine"}) + "\n" + line + "\n")
    code, printed, err = cli_in_process(capsys, "eval", "personagym", "--answers", str(path), "--data", str(FIXTURES),
                                        "--out", str(tmp_path / "out"), *ORACLE)
    assert code == 2 and f"{path}{message.format(path=path)}" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_answers_without_a_task_need_the_released_questions_and_options_that_do_not_apply_are_refused(tmp_path, capsys):
    path = write_jsonl(tmp_path / "a.jsonl", rows("x", "y", per_task=1))
    code, _, err = cli_in_process(capsys, "eval", "personagym", "--answers", str(path), *ORACLE)
    assert code == 2 and f'{path}:1: no "task", and no released questions to look it up in' in err
    for option, message in ((["--questions", "benchmark"], "--questions: does not apply with --answers"),
                            (["--llm", "oracle"], "--llm: no agent answers with --answers alone"),
                            (["--label", "a", "--label", "b"], "--label: 2 label(s) for 1 --answers file(s)")):
        code, _, err = cli_in_process(capsys, "eval", "personagym", "--answers", str(path), "--data", str(FIXTURES), *option, *ORACLE)
        assert code == 2 and message in err, err
    code, _, err = cli_in_process(capsys, "eval", "personagym", "--answers", str(path), "--data", str(FIXTURES), "-p",
                                  "townsquare.testing.oracle")
    assert code == 2 and "--answers: name the judges" in err
    code, _, err = cli_in_process(capsys, "eval", "personagym", "-p", "townsquare.testing.oracle")
    assert code == 2 and "nothing to evaluate" in err
