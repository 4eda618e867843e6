"""``townsquare eval personagym`` end to end with the scripted test model: the table, the files,
the judge ensemble, resuming from the cache after a budget stop (the message names the command),
``--estimate``, the benchmark persona as the agent's persona, two designs compared, the released
static questions (fixtures), a run directory as the target, the agent answering through its own
slots, an OpenAI-compatible endpoint with faults, and bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import asyncio
import csv
import json
import shlex
import sqlite3
import sys
from datetime import datetime
from pathlib import Path

import pytest

from helpers import cli_in_process

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "support"))
FIXTURES = ROOT / "tests" / "data" / "personagym"
SCRIPTED = ["-p", "townsquare.testing.scripted", "-p", "townsquare.plugins.personagym"]
GRADES = {"Expected Action": 4, "Linguistic Habits": 2, "Persona Consistency": 5, "Toxicity Control": 5}
GRADES_TASKS = ("expected_action", "linguistic_habits", "persona_consistency", "toxicity_control", "action_justification")
EXAMPLE = {"score_1": "I do not care.", "score_2": "Maybe.", "score_3": "I would help a bit.", "score_4": "I would help.",
           "score_5": "I would gladly help everyone."}


def _rule(pattern: str, reply: object) -> str:
    return f"{json.dumps(pattern)} = {json.dumps(json.dumps(reply) if not isinstance(reply, str) else reply)}"


def rules() -> str:
    """Replies by prompt: JSON of each step's schema, for batches of 1 to 5 questions; the
    Action Justification grade comes back unreadable, and its repair gives 3."""
    lines = [_rule("most relevant to this persona", {"environments": ["Classroom", "Mars Base", "Wedding"]}),
             _rule("demanding questions", {"questions": ["What would you do first at the event?", "How would you greet the others there?",
                                                         "Why did you leave early that night?"]})]
    for n in range(1, 6):
        lines.append(_rule(f"Below are {n} requests", {"examples": [EXAMPLE] * n}))
        for title, score in GRADES.items():
            lines.append(_rule(f"Below are {n} rubrics[\\s\\S]*Evaluation task: {title}",
                               {"evaluations": [{"evaluation": f"Therefore, the final score is {score}", "score": score}] * n}))
        lines.append(_rule(f"Below are {n} rubrics[\\s\\S]*Evaluation task: Action Justification", "Hmm, hard to say."))
        lines.append(_rule(f"That was not valid[\\s\\S]*\"minItems\": {n},", {"evaluations": [{"evaluation": "so so", "score": 3}] * n}))
    return "\n".join(lines)


SCENARIO = """name = "pg-small"
seed = 3
rounds = 2
[llm]
name = "scripted"
text_reply = "I would think about {topic} first"
[llm.rules]
""" + rules() + """
[[populations]]
name = "users"
count = 3
slots = { policy = "scripted_feed" }
[populations.personas]
name = "inline"
items = [
  { name = "Ada", sentences = ["I love hiking in the mountains.", "I cook vegan food."] },
  { name = "Bo", sentences = ["I play jazz piano at night."] },
  { name = "Cy", sentences = ["I follow football every weekend."] },
]
"""


def cli(capsys, *args: str) -> tuple[int, str, str]:
    return cli_in_process(capsys, *args)


@pytest.fixture
def scenario(tmp_path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    return path


def results(out: Path) -> dict:
    return json.loads((out / "personagym.json").read_text())


def calls_by(path: Path, column: str = "purpose", where: str = "1") -> dict:
    db = sqlite3.connect(path)
    try:
        return dict(db.execute(f"SELECT {column}, COUNT(*) FROM llm_calls WHERE {where} GROUP BY {column}").fetchall())
    finally:
        db.close()


def test_generated_questions_table_files_and_numbers(scenario, tmp_path, capsys):
    out = tmp_path / "eval"
    code, printed, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "2",
                             "--out", str(out), *SCRIPTED)
    assert code == 0, err
    rows = {line.split("  ")[0].strip(): line.split() for line in printed.splitlines() if "(users-" in line}
    # 4, 2, 5, 5 as graded; action justification repaired to 3; PersonaScore (4+2+5+5+3)/5
    assert rows["Ada (users-0001)"][-6:] == ["4.00", "2.00", "5.00", "5.00", "3.00", "3.80"]
    assert "mean (std)" in printed and "3.80 (0.00)" in printed
    assert "generated: 2 per task per environment" in printed and "5 question(s) a grading call" in printed
    # the generator and the judge are the model under test: said so
    assert "warning: judge run is scripted, the model under test" in err and "the question generator is scripted" in err
    saved = results(out)
    assert saved["questions_source"] == "generated" and saved["rubrics"] == ["ours"] and len(saved["warnings"]) == 2
    assert saved["scores"] == {"Action Justification": 3.0, "Expected Action": 4.0, "Linguistic Habits": 2.0,
                               "Persona Consistency": 5.0, "Toxicity Control": 5.0, "PersonaScore": 3.8}
    ada = saved["personas"][0]
    assert ada["description"] == "Name: Ada. I love hiking in the mountains. I cook vegan food."
    # the selector's unknown "Mars Base" is dropped; one environment per persona by default
    assert ada["environments"] == ["Classroom"] and ada["environment_source"] == "llm"
    assert len(ada["questions"]) == 10 and ada["questions"][0]["examples"]["5"] == "I would gladly help everyone."
    with open(out / "personagym_scores.csv", newline="") as fh:
        scores = list(csv.DictReader(fh))
    assert [r["agent_id"] for r in scores] == ["users-0001", "users-0002"] and scores[0]["persona_score"] == "3.8"
    with open(out / "personagym_questions.csv", newline="") as fh:
        questions = list(csv.DictReader(fh))
    assert len(questions) == 20 and questions[0]["grade:run"] == "4"
    # the two questions of a task share one score-examples call and one grading call (the released batching)
    purposes = calls_by(out / "events.sqlite")
    assert purposes["personagym.environments"] == 2 and purposes["personagym.answer.expected_action"] == 4
    assert purposes["personagym.examples.toxicity_control"] == 2 and purposes["personagym.grade.expected_action"] == 2
    assert purposes["personagym.grade.action_justification.repair"] == 2
    # the one-judge table, and the sheet for people with its key
    assert "grader  items  mean" in printed and "run        20  3.80" in printed
    with open(out / "personagym_raters.csv", newline="") as fh:
        sheet = list(csv.DictReader(fh))
    assert len(sheet) == 20 and all(row["grade"] == "" for row in sheet) and sheet[0]["item"] == "item-00001"
    assert "users-0001" not in json.dumps(sheet) and len(json.loads((out / "personagym_raters_key.json").read_text())) == 20

    # the same command again: everything from the cache, the same results, each answer one llm_calls row
    code, again, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "2",
                           "--out", str(out), *SCRIPTED)
    assert code == 0, err
    assert "0 answered by the model" in again and results(out)["scores"] == saved["scores"]
    assert sum(calls_by(out / "events.sqlite", "status").values()) == sum(purposes.values())

    # a strict replay from that cache into another folder: every answer recorded as cached
    code, replayed, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "2",
                              "--out", str(tmp_path / "replay"), "--set", f"plugins.llm_cache.replay_from={out}", *SCRIPTED)
    assert code == 0, err
    assert f"(cached {sum(purposes.values())})" in replayed, replayed
    assert results(tmp_path / "replay")["personas"] == saved["personas"]
    # asking for more than was recorded fails loudly
    code, _, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "3", "--questions-per-task", "2",
                       "--out", str(tmp_path / "more"), "--set", f"plugins.llm_cache.replay_from={out}", *SCRIPTED)
    assert code != 0 and "cache miss in replay" in err


def test_one_question_a_call_gives_the_same_scores(scenario, tmp_path, capsys):
    code, printed, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "1", "--questions-per-task", "2",
                             "--batch", "1", "--out", str(tmp_path / "eval"), *SCRIPTED)
    assert code == 0, err
    assert results(tmp_path / "eval")["scores"]["PersonaScore"] == 3.8
    assert calls_by(tmp_path / "eval" / "events.sqlite")["personagym.grade.expected_action"] == 2


def test_a_budget_stop_names_the_command_that_resumes_it(scenario, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "2", *SCRIPTED]
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "whole"))
    assert code == 0, err
    whole = calls_by(tmp_path / "whole" / "events.sqlite", "status")
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "stopped"), "--set", "plugins.llm_budget.max_calls=30")
    assert code == 3 and "max_calls" in err and "Traceback" not in err, err
    assert not (tmp_path / "stopped" / "personagym.json").exists()
    paid = calls_by(tmp_path / "stopped" / "events.sqlite", "status")["ok"]
    assert 0 < paid <= 30
    # the message names this evaluation's command (not `townsquare resume`), with the budget raised
    command = err.split("raise it with: ")[1].strip()
    assert command.startswith("townsquare eval personagym ") and "resume" not in command.split()[1]
    assert command.endswith("--set plugins.llm_budget.max_calls=60") and "--out" in command
    code, printed, err = cli(capsys, *shlex.split(command)[1:])
    assert code == 0, err
    assert results(tmp_path / "stopped")["personas"] == results(tmp_path / "whole")["personas"]
    new = int(printed.split(" answered by the model")[0].rsplit(" ", 1)[-1])
    assert new == whole["ok"] - paid  # the answers paid before the stop came from the cache
    # the table holds each answer once: the resumed attempt's rows replaced the stopped one's
    assert calls_by(tmp_path / "stopped" / "events.sqlite", "status") == whole


def test_estimate_counts_every_call_and_calls_no_model(scenario, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "2", *SCRIPTED]
    code, printed, err = cli(capsys, *args, "--estimate")
    assert code == 0, err
    total = int(printed.split("ESTIMATE: ")[1].split(" LLM calls")[0].replace(",", ""))
    assert not (tmp_path / "runs").exists()                      # nothing written
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "real"))
    real = calls_by(tmp_path / "real" / "events.sqlite")
    # the estimate is every call but the repairs of malformed answers
    assert total == sum(n for purpose, n in real.items() if not purpose.endswith(".repair"))
    stages = {line.split()[0]: line.split() for line in printed.splitlines() if line.startswith("personagym.")}
    assert stages["personagym.answer"][2] == "20" and stages["personagym.grade"][2] == "10"

    # priced: an OpenAI-compatible endpoint that is not there (any call would fail) and its price table
    priced = SCENARIO.replace('[llm]\nname = "scripted"\ntext_reply = "I would think about {topic} first"\n[llm.rules]\n' + rules(),
                              '[llm]\nname = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = ""\n'
                              'price_prompt_per_1k = 0.01\nprice_completion_per_1k = 0.03\n')
    (tmp_path / "p.toml").write_text(priced)
    code, printed, err = cli(capsys, "eval", "personagym", str(tmp_path / "p.toml"), "--personas", "2", "--estimate", *SCRIPTED)
    assert code == 0, err
    total_line = next(line for line in printed.splitlines() if line.startswith("total"))
    assert "$" in total_line and "no model was called" in printed


def test_benchmark_personas_are_the_agents_personas(scenario, tmp_path, capsys, monkeypatch):
    from townsquare.testing.scripted import ScriptedLLM

    seen = []
    original = ScriptedLLM.complete

    async def recording(self, request):
        seen.append(request)
        return await original(self, request)

    monkeypatch.setattr(ScriptedLLM, "complete", recording)
    text = SCENARIO.replace('slots = { policy = "scripted_feed" }', 'slots = { policy = "scripted_feed", "persona.context" = "dynamic_persona" }')
    (tmp_path / "z.toml").write_text(text)
    out = tmp_path / "eval"
    code, printed, err = cli(capsys, "eval", "personagym", str(tmp_path / "z.toml"), "--data", str(FIXTURES), "--questions", "benchmark",
                             "--personas", "2", "--questions-per-task", "1", "--out", str(out), *SCRIPTED)
    assert code == 0, err
    benchmark = json.loads((FIXTURES / "personas_benchmark.json").read_text())[:2]
    answers = [r for r in seen if r.purpose.startswith("personagym.answer")]
    assert len(answers) == 10
    for request in answers:
        prompt = "\n".join(m.content for m in request.messages)
        assert any(b in prompt for b in benchmark), prompt
        assert not any(name in prompt for name in ("Ada", "Bo", "Cy", "hiking", "jazz", "football")), prompt
        assert "remember" not in prompt          # no memories unless asked for
        assert request.max_tokens == 3000 and request.temperature == 0.9
    # the judges see the same persona
    for request in (r for r in seen if r.purpose.startswith("personagym.grade") and not r.purpose.endswith(".repair")):
        assert any(f"Persona: {b}" in request.messages[-1].content for b in benchmark)
    assert [p["name"] for p in results(out)["personas"]] == benchmark
    # asking for more personas than the benchmark has: one line, and all of them evaluated
    code, _, err = cli(capsys, "eval", "personagym", str(tmp_path / "z.toml"), "--persona-file", str(FIXTURES / "personas_benchmark.json"),
                       "--personas", "9", "--questions-per-task", "1", "--environment", "Wedding", "--out", str(tmp_path / "more"), *SCRIPTED)
    assert code == 0, err
    assert "note: --personas 9: only 3 personas in" in err and len(results(tmp_path / "more")["personas"]) == 3


def test_two_designs_are_compared_on_the_same_questions_and_judges(scenario, tmp_path, capsys):
    harsh = SCENARIO.replace('name = "pg-small"', 'name = "pg-harsh"').replace(
        "[llm.rules]\n", '[llm.rules]\n"^What would you do first" = "whatever"\n')
    (tmp_path / "harsh.toml").write_text(harsh)
    out = tmp_path / "cmp"
    code, printed, err = cli(capsys, "eval", "personagym", str(scenario), str(tmp_path / "harsh.toml"), "--personas", "3",
                             "--questions-per-task", "2", "--judge", "scripted", "--judge", "strict_judge", "--out", str(out),
                             *SCRIPTED, "-p", "personagym_strict_judge")
    assert code == 0, err
    assert "== s (" in printed and "== harsh (" in printed and "harsh - s: paired over personas" in printed
    first, second = results(out / "s"), results(out / "harsh")
    # the same questions and score examples for both designs, made once
    assert [q["question"] for q in first["personas"][0]["questions"]] == [q["question"] for q in second["personas"][0]["questions"]]
    assert calls_by(out / "events.sqlite")["personagym.environments"] == 3
    assert "personagym.environments" not in calls_by(out / "s" / "events.sqlite")
    comparison = json.loads((out / "personagym_comparison.json").read_text())["paired"]
    rows = {r["task"]: r for r in comparison}
    assert set(rows) == {"expected_action", "linguistic_habits", "persona_consistency", "toxicity_control",
                         "action_justification", "persona_score"}
    assert all(r["pairs"] == 3 and r["difference"] == 0.0 for r in rows.values())  # graded alike: no difference
    line = next(line for line in printed.splitlines() if line.startswith("PersonaScore"))
    assert "[+0.00, +0.00]" in line and line.split()[-1] == "3"
    # two judges: the per-judge table and Krippendorff's alpha
    assert "agreement: Krippendorff's alpha (interval metric" in printed
    assert "strict_judge" in printed and "scripted" in printed
    saved = first["judge_agreement"]
    assert {j["judge"] for j in saved["judges"]} == {"scripted", "strict_judge"}


def test_paired_differences_have_an_interval_and_a_test():
    from townsquare.plugins.personagym.comparison import paired
    from townsquare.plugins.personagym.evaluation import PersonaResult, QuestionResult

    tasks = ("expected_action", "linguistic_habits", "persona_consistency", "toxicity_control", "action_justification")

    def design(scores):
        return [PersonaResult(f"a{i}", "x", "p", "d", [], "given", [QuestionResult(t, None, "q", grades={"j": s}) for t in tasks])
                for i, s in enumerate(scores)]

    rows = {r["task"]: r for r in paired({"A": design([3, 3, 4, 2]), "B": design([4, 5, 5, 3])})}
    row = rows["persona_score"]
    # d = 1, 2, 1, 1: mean 1.25, s = 0.5, t_{0.975,3} = 3.182 -> 1.25 +- 0.796; t = 5.0, p = 0.0154
    assert row["difference"] == pytest.approx(1.25) and row["low"] == pytest.approx(1.25 - 3.1824 * 0.25, abs=1e-3)
    assert row["t"] == pytest.approx(5.0) and row["p"] == pytest.approx(0.0154, abs=1e-3) and row["pairs"] == 4


def test_judge_ensemble_averages_per_question(scenario, tmp_path, capsys):
    out = tmp_path / "eval"
    code, printed, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "1", "--questions-per-task", "1",
                             "--environment", "wedding", "--judge", "scripted", "--judge", "strict_judge",
                             "--out", str(out), *SCRIPTED, "-p", "personagym_strict_judge")
    assert code == 0, err
    saved = results(out)
    assert saved["judges"] == ["scripted", "strict_judge"]
    assert saved["personas"][0]["environments"] == ["Wedding"] and saved["personas"][0]["environment_source"] == "given"
    # (4+2)/2, (2+2)/2, (5+2)/2, (5+2)/2, (3+2)/2 -> PersonaScore 2.9
    assert saved["personas"][0]["task_scores"] == {"expected_action": 3.0, "linguistic_habits": 2.0, "persona_consistency": 3.5,
                                                   "toxicity_control": 3.5, "action_justification": 2.5}
    assert saved["personas"][0]["persona_score"] == pytest.approx(2.9)
    assert saved["personas"][0]["questions"][0]["grades"] == {"scripted": 4.0, "strict_judge": 2.0}
    # strict_judge is another model: only the run's own judge is warned about
    assert "judge strict_judge" not in err and "judge scripted is scripted" in err


def test_human_grades_are_read_back_beside_the_judges(scenario, tmp_path, capsys):
    out = tmp_path / "eval"
    code, _, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "1",
                       "--judge", "scripted", "--judge", "strict_judge", "--out", str(out), *SCRIPTED, "-p", "personagym_strict_judge")
    assert code == 0, err
    with open(out / "personagym_raters.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    key = json.loads((out / "personagym_raters_key.json").read_text())
    saved = results(out)
    for i, row in enumerate(rows):           # one rater follows the scripted judge, one grades everything 3
        design, p, q = key[row["item"]].split("|")
        row["grade"] = str(int(saved["personas"][int(p)]["questions"][int(q)]["grades"]["scripted"]))
    for name, grade_of in (("alice", lambda r: r["grade"]), ("bob", lambda r: "3")):
        with open(tmp_path / f"{name}.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows([{**r, "grade": grade_of(r)} for r in rows])
    code, printed, err = cli(capsys, "eval", "personagym-grades", str(out), str(tmp_path / "alice.csv"), str(tmp_path / "bob.csv"), *SCRIPTED)
    assert code == 0, err
    assert "human:alice" in printed and "human:bob" in printed and "Krippendorff's alpha" in printed
    assert "Spearman rho" in printed
    human = json.loads((out / "personagym_human_grades.json").read_text())
    assert human["answers_graded_by_both"] == 10 and len(human["humans"]["human:alice"]) == 10
    # per task, Kendall's tau beside Spearman's rho (the paper's Table 2); each task's two answers
    # here were graded alike by the judges, so per task there is no spread: no correlation
    assert "Kendall tau" in printed and set(human["by_task"]) == {*GRADES_TASKS, "all"}
    assert human["by_task"]["all"]["answers"] == 10 and human["by_task"]["all"]["kendall_tau"] is not None
    # a grade outside 1-5 is one line naming the file and row
    rows[0]["grade"] = "7"
    with open(tmp_path / "bad.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, _, err = cli(capsys, "eval", "personagym-grades", str(out), str(tmp_path / "bad.csv"), *SCRIPTED)
    assert code == 2 and "bad.csv: row 2: grade '7' is not 1, 2, 3, 4 or 5" in err


def test_krippendorffs_alpha_on_krippendorffs_own_example():
    from townsquare.plugins.personagym.agreement import krippendorff_alpha

    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", example C: four
    # observers, twelve units, missing values; alpha (interval) = 0.849
    n = None
    data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n], [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
            [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n], [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n]]
    units = [[row[i] for row in data if row[i] is not None] for i in range(12)]
    assert krippendorff_alpha(units) == pytest.approx(0.8491, abs=1e-4)
    assert krippendorff_alpha([[1, 1], [4, 4], [2, 2]]) == 1.0
    assert krippendorff_alpha([[3, 3], [3, 3]]) is None      # no variation: undefined


def test_released_static_questions_and_rubrics_from_the_data_folder(scenario, tmp_path, capsys):
    out = tmp_path / "eval"
    code, printed, err = cli(capsys, "eval", "personagym", str(scenario), "--data", str(FIXTURES), "--questions", "benchmark",
                             "--personas", "2", "--questions-per-task", "1", "--out", str(out), *SCRIPTED)
    assert code == 0, err
    assert "the released static set (benchmark-v1)" in printed and "the released rubrics" in printed
    saved = results(out)
    first = saved["personas"][0]
    assert first["description"] == "A 34-year-old nurse from Lagos who plays chess on weekends"
    assert first["environment_source"] == "benchmark" and first["environments"] == []
    assert [q["question"] for q in first["questions"]][:2] == [
        "Expected Action fixture question 1 for 34-year-old nurse from Lagos: what do you do?",
        "Linguistic Habits fixture question 1 for 34-year-old nurse from Lagos: what do you do?"]
    # the fixture rubric's title reaches the judge: "Toxicity", not our "Toxicity Control" (no rule: repaired to 3)
    assert first["task_scores"]["toxicity_control"] == 3.0 and first["task_scores"]["expected_action"] == 4.0

    # the third benchmark persona has no released questions: named, exit 2, nothing written
    code, _, err = cli(capsys, "eval", "personagym", str(scenario), "--data", str(FIXTURES), "--questions", "benchmark",
                       "--out", str(tmp_path / "none"), *SCRIPTED)
    assert code == 2 and "no released questions for the persona 'A 19-year-old student from Lima" in err
    assert not (tmp_path / "none").exists()


def test_a_run_directory_is_evaluated_from_its_checkpoint(scenario, tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(scenario), "--out", str(run), *SCRIPTED)
    assert code == 0, err
    code, printed, err = cli(capsys, "eval", "personagym", str(run), "--personas", "1", "--questions-per-task", "1", *SCRIPTED)
    assert code == 0, err
    assert "Ada (users-0001)" in printed and (run / "personagym" / "personagym.json").is_file()
    assert results(run / "personagym")["personas"][0]["persona_score"] == pytest.approx(3.8)
    # the run's report has the PersonaGym section with the distribution plot
    code, _, err = cli(capsys, "report", str(run), *SCRIPTED)
    assert code == 0, err
    page = (run / "report.html").read_text()
    section = page[page.index('<section id="personagym">'):]
    assert "<h2>PersonaGym</h2>" in section and 'alt="PersonaGym score distribution"' in section
    assert "<td>PersonaScore</td><td class=\"num\">3.80</td>" in section and "Ada" in section
    assert "<th>answers graded</th>" in section and "<strong>judge run is scripted, the model under test" in section
    # a run's memories go to benchmark personas only when asked, and only from a run
    code, _, err = cli(capsys, "eval", "personagym", str(tmp_path / "s.toml"), "--persona-file", str(FIXTURES / "personas_benchmark.json"),
                       "--with-run-memories", *SCRIPTED)
    assert code == 2 and "--with-run-memories: " in err and "scenario file" in err


class Recorder:
    """A provider that records the messages it is sent."""

    name, model = "recorder", "recorder-model"

    def __init__(self):
        self.requests = []

    async def complete(self, request):
        from townsquare.api import LLMResponse

        self.requests.append(request)
        return LLMResponse(text="I would go for a long hike.", model=self.model, provider=self.name)


def _agent_with_memory():
    from townsquare.api import Agent, MemoryRecord, Persona

    class Context:
        async def render(self, ctx, query):
            return f"(persona rendered for: {query})"

    class Memory:
        async def recall(self, ctx, query, k):
            return [MemoryRecord(text="I hiked Ben Nevis last week.", kind="action", created=datetime(2024, 1, 1))]

    return Agent(id="users-0001", index=0, population="users", persona=Persona("Ada", ["I love hiking."]), activity=1.0, rng=None,
                 components={"persona.context": Context(), "memory.short_term": Memory()})


@pytest.mark.parametrize("memories", [True, False])
def test_the_agent_answers_with_its_own_persona_context_and_memory(memories):
    from townsquare.api import StepContext
    from townsquare.lib.prompt_files import load_prompts
    from townsquare.plugins.personagym import llm_steps
    from townsquare.plugins.personagym.benchmark_data import PROMPTS
    from townsquare.testing.llm_chain import build_chain

    provider = Recorder()
    chain = build_chain(provider)
    ctx = StepContext(agent=_agent_with_memory(), round=0, now=datetime(2024, 1, 2), minutes_per_round=60, services=None, llm=chain.client)
    answer, _ = asyncio.run(llm_steps.agent_answer(ctx, load_prompts(PROMPTS, "personagym"), "What do you do on a free day?",
                                                   "expected_action", llm_steps.Settings(use_memories=memories)))
    assert answer == "I would go for a long hike."
    system, user = provider.requests[0].messages
    assert system.content.endswith("(persona rendered for: What do you do on a free day?)")
    if memories:
        assert "- I hiked Ben Nevis last week." in user.content and user.content.endswith("What do you do on a free day?")
    else:  # the released agent's user message: the question alone
        assert user.content == "What do you do on a free day?"


def test_run_memories_are_lent_to_the_benchmark_agents_by_place():
    from types import SimpleNamespace

    from townsquare.plugins.personagym.agent_session import Design

    class Tier:
        def __init__(self):
            self.state = None

        def set_state(self, state):
            self.state = state

    agents = [SimpleNamespace(id=f"users-000{i}", population="users", components={"memory.short_term": Tier(), "policy": Tier()})
              for i in (1, 2)]
    design = Design.__new__(Design)
    design.agents = lambda: agents
    design._lend_memories({"agents": {"users-0001": {"components": {"memory.short_term": {"records": ["a"]}, "policy": {"x": 1}}}}})
    assert agents[0].components["memory.short_term"].state == {"records": ["a"]}
    assert agents[0].components["policy"].state is None and agents[1].components["memory.short_term"].state is None


def test_an_openai_compatible_endpoint_with_faults(tmp_path, capsys, monkeypatch):
    from townsquare.testing.fault_server import FaultServer

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FaultServer(seed=4, rate_429=0.1, rate_500=0.1, rate_garbage=0.1, rate_truncated=0.05, retry_after_s=0) as server:
        text = SCENARIO.replace('[llm]\nname = "scripted"\ntext_reply = "I would think about {topic} first"\n[llm.rules]\n' + rules(),
                                f'[llm]\nname = "openai"\nmodel = "test-model"\nbase_url = "{server.base_url}"\ntimeout_s = 2\n'
                                '[plugins.llm_retry]\nbase_delay_s = 0.01\nattempts = 10\n')
        assert 'name = "openai"' in text
        (tmp_path / "s.toml").write_text(text)
        args = ["eval", "personagym", str(tmp_path / "s.toml"), "--personas", "1", "--questions-per-task", "1",
                "--environment", "Wedding", "--out", str(tmp_path / "eval"), *SCRIPTED]  # the scripted feed policy; the LLM is the endpoint
        code, printed, err = cli(capsys, *args)
    assert code == 0, err
    assert "Traceback" not in err and "(users-0001)" in printed
    statuses = calls_by(tmp_path / "eval" / "events.sqlite", "status")
    assert statuses.get("error", 0) > 0 and statuses["ok"] > 0      # faults were met, retried and survived
    first = results(tmp_path / "eval")
    # the server is gone: the same command answers from the cache alone (a replay)
    code, again, err = cli(capsys, *args)
    assert code == 0, err
    assert "0 answered by the model" in again
    assert results(tmp_path / "eval")["personas"] == first["personas"]


@pytest.mark.parametrize("extra,message", [
    (["--persona-file", "missing.json"], "missing.json: no such persona file"),
    (["--environment", "Moon Base"], "--environment 'Moon Base': not one of the 150 environments"),
    (["--judge", "nosuchprovider:x"], "--judge nosuchprovider:x:"),
    (["--judge", ":gpt"], "--judge ':gpt': expected PROVIDER[:MODEL]"),
    (["--questions", "benchmark"], "--questions benchmark needs --data DIR"),
    (["--data", "no/such/folder"], "--data no/such/folder: no such folder"),
    (["--population", "nobody"], "--population nobody: no such population in"),
    (["--prompts", "missing.toml"], "missing.toml: cannot read prompts file"),
])
def test_bad_input_is_one_line_and_exit_2(scenario, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "eval", "personagym", str(scenario), "--out", str(tmp_path / "eval"), *SCRIPTED, *extra)
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "eval").exists()


def test_a_target_that_is_no_run_directory(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = cli(capsys, "eval", "personagym", str(tmp_path / "empty"), *SCRIPTED)
    assert code == 2 and "not a run directory (no manifest.json)" in err
    code, _, err = cli(capsys, "eval", "personagym", str(tmp_path / "nothing.toml"), *SCRIPTED)
    assert code == 2 and "no such scenario file or run directory" in err


def test_the_plugin_is_declared_as_an_entry_point():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["townsquare"]["personagym"] == "townsquare.plugins.personagym"


@pytest.mark.shared_data
def test_the_released_benchmark_is_estimated_before_anything_is_spent(scenario, tmp_path, capsys, monkeypatch):
    from helpers import SHARED_DATA

    released = SHARED_DATA / "personagym"
    if not released.is_dir():
        pytest.skip("../shared/data/personagym is absent")
    monkeypatch.chdir(tmp_path)
    code, printed, err = cli(capsys, "eval", "personagym", str(scenario), "--questions", "benchmark", "--data", str(released),
                             "--personas", "2", "--estimate", *SCRIPTED)
    assert code == 0, err
    # 2 personas x 50 released questions: 100 answers, 2 x 5 tasks x 2 batches of 5 for examples and for grades
    stages = {line.split()[0]: int(line.split()[2]) for line in printed.splitlines() if line.startswith("personagym.")}
    assert stages == {"personagym.answer": 100, "personagym.examples": 20, "personagym.grade": 20}
    assert "ESTIMATE: 140 LLM calls" in printed and not (tmp_path / "runs").exists()


def test_designs_that_send_identical_prompts_are_said_to_and_get_no_p_value(tmp_path, capsys):
    # on one-sentence benchmark personas the dynamic persona renders the whole description, as
    # the full persona does: the two designs differ in a slot that changes no prompt
    dynamic = SCENARIO.replace('slots = { policy = "scripted_feed" }', 'slots = { policy = "scripted_feed", "persona.context" = "dynamic_persona" }')
    (tmp_path / "dynamic.toml").write_text(dynamic)
    (tmp_path / "full.toml").write_text(dynamic.replace('"dynamic_persona"', '"full_persona"'))
    args = ["eval", "personagym", str(tmp_path / "dynamic.toml"), str(tmp_path / "full.toml"), "--data", str(FIXTURES),
            "--questions", "benchmark", "--personas", "2", "--questions-per-task", "1", *SCRIPTED]
    # several designs and no judge: refused, the rule said
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "none"))
    assert code == 2 and "2 designs: name the judges (--judge" in err and not (tmp_path / "none").exists()
    code, printed, err = cli(capsys, *args, "--judge", "scripted", "--out", str(tmp_path / "cmp"))
    assert code == 0, err
    said = [line for line in err.splitlines() if "identical prompts" in line]
    assert said == ["warning: designs dynamic and full sent identical prompts for all 10 questions (they differ in persona.context "
                    "(dynamic_persona vs full_persona), which gave these personas the same prompt): the comparison measures "
                    "sampling alone, no p-value is reported"], err
    rows = json.loads((tmp_path / "cmp" / "personagym_comparison.json").read_text())["paired"]
    assert all(r["p"] is None and r["p_holm"] is None and r["identical_prompts"] for r in rows)
    assert next(line for line in printed.splitlines() if line.startswith("PersonaScore")).split()[-3:-1] == ["same", "prompts"]


def test_holm_kendall_and_the_two_stage_bootstrap():
    from townsquare.lib.stats import holm, kendall_tau, two_stage_bootstrap

    # Holm (1979): m = 4 sorted 0.005, 0.01, 0.03, 0.04 -> 0.02, 0.03, 0.06, 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, None, 0.005]) == pytest.approx([0.03, 0.06, 0.06, None, 0.02])
    # Kendall's tau-b: scipy.stats.kendalltau gives 0.2 and 0.8 (ties in both) for these
    assert kendall_tau([1, 2, 3, 4, 5], [3, 4, 1, 2, 5]) == pytest.approx(0.2)
    assert kendall_tau([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(0.8)
    assert kendall_tau([1, 1], [2, 3]) is None
    # no spread anywhere: a point interval; the interval covers the mean and is seeded
    flat, overall = two_stage_bootstrap([[[3.0, 3.0], [4.0]], [[3.0], [4.0, 4.0]]], rounds=200)
    assert flat == [(3.0, 3.0), (4.0, 4.0)] and overall == (3.5, 3.5)
    units = [[[1.0, 2.0, 5.0]], [[4.0, 4.0]], [[2.0, 3.0]], [[5.0, 5.0, 1.0]]]
    (low, high), = two_stage_bootstrap(units, rounds=500, seed=3)[0]
    mean = sum(sum(u[0]) / len(u[0]) for u in units) / 4
    assert low < mean < high and two_stage_bootstrap(units, rounds=500, seed=3)[0] == [(low, high)]
    # more resamples of questions widen nothing they should not: within-persona spread counts
    between_only, _ = two_stage_bootstrap([[[2.5]], [[4.0]], [[2.5]], [[3.67]]], rounds=500, seed=3)
    assert high - low > between_only[0][1] - between_only[0][0]


def test_the_table_has_an_interval_in_every_cell_and_the_released_scores_are_checked(scenario, tmp_path, capsys):
    import re
    import shutil

    data = tmp_path / "data"
    shutil.copytree(FIXTURES, data)
    (data / "evaluations").mkdir()
    # the released Claude 3 Haiku file as published: Persona Consistency 4.47 where the paper prints 3.47
    (data / "evaluations" / "20240710_claude_3_haiku.scores.json").write_text(json.dumps(
        {"Action Justification": 2.47, "Expected Action": 4.28, "Linguistic Habits": 3.04, "Persona Consistency": 4.47,
         "Toxicity Control": 4.94, "PersonaScore": 3.64}))
    out = tmp_path / "eval"
    code, printed, err = cli(capsys, "eval", "personagym", str(scenario), "--data", str(data), "--questions", "benchmark",
                             "--personas", "2", "--questions-per-task", "1", "--table", "--out", str(out), *SCRIPTED)
    assert code == 0, err
    cell = re.compile(r"^\d\.\d\d \[\d\.\d\d, \d\.\d\d\]$")
    with open(out / "personagym_table.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["", "Action Justification", "Expected Action", "Linguistic Habits", "Persona Consistency", "Toxicity Control",
                       "PersonaScore"]
    assert [r[0] for r in rows[1:]] == ["s", *(f"{m} (paper)" for m in ("LLaMA-2-13b", "GPT 3.5", "LLaMA-2-70b", "LLaMA-3-8b",
                                                                           "Claude 3 Haiku", "Claude 3.5 Sonnet"))]
    assert all(cell.match(c) for r in rows[1:] for c in r[1:]), rows
    # the paper's Haiku consistency 3.47 (sd 1.57, 200 personas): 3.47 +- 1.972 * 1.57 / sqrt(200) = [3.25, 3.69]
    assert rows[6][4] == "3.47 [3.25, 3.69]"
    markdown = (out / "personagym_table.md").read_text().splitlines()
    assert markdown[0].startswith("| | Action Justification |") and len(markdown[2].split("|")) == 9
    assert all(cell.match(c.strip()) for c in markdown[2].split("|")[2:-1])
    assert "\\begin{tabular}{lcccccc}" in (out / "personagym_table.tex").read_text()
    assert "note: released data: 20240710_claude_3_haiku.scores.json: Persona Consistency 4.47, the paper's Table 1 prints 3.47" in printed
    assert "PersonaScore 3.64 is not the mean of its five tasks (3.84)" in printed


def test_the_docs_comparison_of_zhous_agent_and_the_generative_agent_runs_on_the_oracle(tmp_path, capsys):
    """docs/personagym.md's example: two designs that differ (their prompts differ), the oracle
    as agent, generator and judge (it grades the share of the persona's words an answer holds)."""
    out = tmp_path / "cmp"
    code, printed, err = cli(capsys, "eval", "personagym", str(ROOT / "examples" / "social_agent_townsfolk.toml"),
                             str(ROOT / "examples" / "generative_agents_social.toml"), "--llm", "oracle", "--judge", "oracle",
                             "--generator", "oracle", "--questions-per-task", "2", "--table", "--out", str(out),
                             "-p", "townsquare.testing.oracle")
    assert code == 0, err
    assert "identical prompts" not in err
    rows = {r["task"]: r for r in json.loads((out / "personagym_comparison.json").read_text())["paired"]}
    assert rows["persona_score"]["pairs"] == 4 and rows["persona_score"]["p"] is not None and rows["persona_score"]["p_holm"] == 1.0
    first = results(out / "social_agent_townsfolk")["personas"][1]["questions"][0]
    second = results(out / "generative_agents_social")["personas"][1]["questions"][0]
    assert first["prompt"] != second["prompt"] and first["question"] == second["question"]
    assert "Tom Becker" in first["answer"] and "Status:" in second["answer"]  # the agent summary's paragraphs


def test_the_oracle_judge_grades_the_share_of_persona_words_an_answer_holds():
    from townsquare.testing.oracle.personagym import score_of

    persona = "Name: Tom. I hike mountains every weekend."    # name, hike, mountains, every, weekend
    assert score_of(persona, "Nothing at all.") == 1
    assert score_of(persona, "I hike the mountains.") == 2     # 2 of 5: 1 + floor(1.6)
    assert score_of(persona, "Name: Tom. I hike mountains every weekend.") == 5
