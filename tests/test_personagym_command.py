"""``townsquare eval personagym`` end to end with the scripted test model: the table, the files,
the judge ensemble, resuming from the cache, the released static questions (fixtures), a run
directory as the target, the agent answering through its own slots, an OpenAI-compatible
endpoint with faults, and bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import asyncio
import csv
import json
import sqlite3
import sys
from datetime import datetime
from pathlib import Path

import pytest

from townsquare.cli import main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
FIXTURES = ROOT / "tests" / "data" / "personagym"
SCRIPTED = ["-p", "townsquare.testing.scripted", "-p", "townsquare.plugins.personagym"]

RULES = """
"Chosen environments:" = '["Classroom", "Mars Base", "Wedding"]'
"Questions:" = '["What would you do first at the event?", "How would you greet the others there?", "Why did you leave early that night?"]'
'Score 5: Response - <example>' = "Score 1: Response - I do not care.\\nScore 2: Response - Maybe.\\nScore 3: Response - I would help a bit.\\nScore 4: Response - I would help.\\nScore 5: Response - I would gladly help everyone."
"Evaluation task: Expected Action" = "The answer fits. Therefore, the final score is 4"
"Evaluation task: Linguistic Habits" = "Generic. Therefore, the final score is 2"
"Evaluation task: Persona Consistency" = "Fine. Therefore, the final score is 5"
"Evaluation task: Toxicity Control" = "Polite. Therefore, the final score is 5"
"Evaluation task: Action Justification" = "Hmm, hard to say."
"did not end with a score" = "Therefore, the final score is 3"
"""

SCENARIO = """name = "pg-small"
seed = 3
rounds = 2
[llm]
name = "scripted"
text_reply = "I would think about {topic} first"
[llm.rules]
""" + RULES + """
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
    try:
        main([*args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def scenario(tmp_path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    return path


def results(out: Path) -> dict:
    return json.loads((out / "personagym.json").read_text())


def test_generated_questions_table_files_and_numbers(scenario, tmp_path, capsys):
    out = tmp_path / "eval"
    code, printed, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "2",
                             "--out", str(out), *SCRIPTED)
    assert code == 0, err
    rows = {line.split("  ")[0].strip(): line.split() for line in printed.splitlines() if "(users-" in line}
    # 4, 2, 5, 5 as graded; action justification repaired to 3; PersonaScore (4+2+5+5+3)/5
    assert rows["Ada (users-0001)"][-6:] == ["4.00", "2.00", "5.00", "5.00", "3.00", "3.80"]
    assert "mean (std)" in printed and "3.80 (0.00)" in printed
    assert "generated: 2 per task per environment" in printed
    saved = results(out)
    assert saved["questions_source"] == "generated" and saved["rubrics"] == ["ours"]
    assert saved["scores"] == {"Action Justification": 3.0, "Expected Action": 4.0, "Linguistic Habits": 2.0,
                               "Persona Consistency": 5.0, "Toxicity Control": 5.0, "PersonaScore": 3.8}
    ada = saved["personas"][0]
    # the selector's unknown "Mars Base" is dropped; one environment per persona by default
    assert ada["environments"] == ["Classroom"] and ada["environment_source"] == "llm"
    assert len(ada["questions"]) == 10 and ada["questions"][0]["examples"]["5"] == "I would gladly help everyone."
    with open(out / "personagym_scores.csv", newline="") as fh:
        scores = list(csv.DictReader(fh))
    assert [r["agent_id"] for r in scores] == ["users-0001", "users-0002"] and scores[0]["persona_score"] == "3.8"
    with open(out / "personagym_questions.csv", newline="") as fh:
        questions = list(csv.DictReader(fh))
    assert len(questions) == 20 and questions[0]["grade:run"] == "4"
    # every call is in the evaluation's llm_calls; the repaired justification grades are there too
    db = sqlite3.connect(out / "events.sqlite")
    purposes = dict(db.execute("SELECT purpose, COUNT(*) FROM llm_calls GROUP BY purpose").fetchall())
    db.close()
    assert purposes["personagym.environments"] == 2 and purposes["personagym.answer.expected_action"] == 4
    assert purposes["personagym.grade.action_justification.repair"] == 4 and purposes["personagym.examples.toxicity_control"] == 4

    # the same command again: everything from the cache, the same results
    code, again, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "2",
                           "--out", str(out), *SCRIPTED)
    assert code == 0, err
    assert "0 answered by the model" in again and results(out)["scores"] == saved["scores"]

    # a strict replay from that cache into another folder: every answer recorded as cached
    code, replayed, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "2",
                              "--out", str(tmp_path / "replay"), "--set", f"plugins.llm_cache.replay_from={out}", *SCRIPTED)
    assert code == 0, err
    assert "(cached 76)" in replayed, replayed
    assert results(tmp_path / "replay")["personas"] == saved["personas"]
    # asking for more than was recorded fails loudly
    code, _, err = cli(capsys, "eval", "personagym", str(scenario), "--personas", "3", "--questions-per-task", "2",
                       "--out", str(tmp_path / "more"), "--set", f"plugins.llm_cache.replay_from={out}", *SCRIPTED)
    assert code != 0 and "cache miss in replay" in err


def test_a_budget_stop_resumes_to_the_same_results(scenario, tmp_path, capsys):
    args = ["eval", "personagym", str(scenario), "--personas", "2", "--questions-per-task", "2", *SCRIPTED]
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "whole"))
    assert code == 0, err
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "stopped"), "--set", "plugins.llm_budget.max_calls=30")
    assert code == 3 and "max_calls" in err and "Traceback" not in err, err
    assert not (tmp_path / "stopped" / "personagym.json").exists()
    db = sqlite3.connect(tmp_path / "stopped" / "events.sqlite")
    paid = db.execute("SELECT COUNT(*) FROM llm_calls WHERE status = 'ok'").fetchone()[0]
    db.close()
    assert 0 < paid <= 30
    code, printed, err = cli(capsys, *args, "--out", str(tmp_path / "stopped"))
    assert code == 0, err
    assert results(tmp_path / "stopped")["personas"] == results(tmp_path / "whole")["personas"]
    new = int(printed.split(" answered by the model")[0].rsplit(" ", 1)[-1])
    assert new == 76 - paid  # the answers paid before the stop came from the cache


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
    grades = saved["personas"][0]["questions"][0]["grades"]
    assert grades == {"scripted": 4.0, "strict_judge": 2.0}


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


class Recorder:
    """A provider that records the messages it is sent."""

    name, model = "recorder", "recorder-model"

    def __init__(self):
        self.requests = []

    async def complete(self, request):
        from townsquare.api import LLMResponse

        self.requests.append(request)
        return LLMResponse(text="I would go for a long hike.", model=self.model, provider=self.name)


def test_the_agent_answers_with_its_own_persona_context_and_memory():
    from townsquare.api import Agent, MemoryRecord, Persona, StepContext
    from townsquare.plugins.personagym import llm_steps
    from townsquare.api import load_prompts
    from townsquare.plugins.personagym.benchmark_data import PROMPTS
    from townsquare.testing.llm_chain import build_chain

    class Context:
        async def render(self, ctx, query):
            return f"(persona rendered for: {query})"

    class Memory:
        async def recall(self, ctx, query, k):
            return [MemoryRecord(text="I hiked Ben Nevis last week.", kind="action", created=datetime(2024, 1, 1))]

    agent = Agent(id="users-0001", index=0, population="users", persona=Persona("Ada", ["I love hiking."]), activity=1.0, rng=None,
                  components={"persona.context": Context(), "memory.short_term": Memory()})
    provider = Recorder()
    chain = build_chain(provider)
    ctx = StepContext(agent=agent, round=0, now=datetime(2024, 1, 2), minutes_per_round=60, services=None, llm=chain.client)
    answer = asyncio.run(llm_steps.agent_answer(ctx, load_prompts(PROMPTS, "personagym"), "What do you do on a free day?",
                                                "expected_action", llm_steps.Settings()))
    assert answer == "I would go for a long hike."
    system, user = provider.requests[0].messages
    assert "You are Ada. (persona rendered for: What do you do on a free day?)" in system.content
    assert "- I hiked Ben Nevis last week." in user.content and user.content.endswith("What do you do on a free day?")


def test_an_openai_compatible_endpoint_with_faults(tmp_path, capsys, monkeypatch):
    from townsquare.testing.fault_server import FaultServer

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FaultServer(seed=4, rate_429=0.1, rate_500=0.1, rate_garbage=0.1, rate_truncated=0.05, retry_after_s=0) as server:
        text = SCENARIO.replace('[llm]\nname = "scripted"\ntext_reply = "I would think about {topic} first"\n[llm.rules]\n' + RULES,
                                f'[llm]\nname = "openai"\nmodel = "test-model"\nbase_url = "{server.base_url}"\ntimeout_s = 2\n'
                                '[plugins.llm_retry]\nbase_delay_s = 0.01\nattempts = 10\n')
        assert 'name = "openai"' in text
        (tmp_path / "s.toml").write_text(text)
        args = ["eval", "personagym", str(tmp_path / "s.toml"), "--personas", "1", "--questions-per-task", "1",
                "--out", str(tmp_path / "eval"), *SCRIPTED]  # the scripted feed policy; the LLM is the endpoint
        code, printed, err = cli(capsys, *args)
    assert code == 0, err
    assert "Traceback" not in err and "(users-0001)" in printed
    db = sqlite3.connect(tmp_path / "eval" / "events.sqlite")
    statuses = dict(db.execute("SELECT status, COUNT(*) FROM llm_calls GROUP BY status").fetchall())
    db.close()
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
    (["--population", "nobody"], "--population nobody: no such population (populations: users)"),
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
