"""PersonaGym's numbers and formats: PersonaScore, the judge ensemble, each step's JSON schema
and its repair, environment selection, the released data loaders (small fixtures in the
released formats under tests/data/personagym/)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from townsquare.api import UsageError
from townsquare.plugins.personagym import benchmark_data as data
from townsquare.plugins.personagym import llm_steps
from townsquare.plugins.personagym.answer_parsing import match_environments
from townsquare.plugins.personagym.persona_score import ensemble, persona_score, summary, task_scores
from townsquare.testing.llm_chain import build_chain
from townsquare.testing.scripted import ScriptedConfig, ScriptedLLM

from helpers import SHARED_DATA

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "personagym"
SHARED = SHARED_DATA / "personagym"
TASKS = data.TASKS


# ---------------------------------------------------------------- PersonaScore

def test_persona_score_is_the_mean_of_the_five_task_scores():
    scores = dict(zip(TASKS, [4.0, 3.0, 5.0, 4.5, 2.5]))
    assert persona_score(scores) == pytest.approx(19.0 / 5)
    # the released GPT-3.5 task scores give its released PersonaScore (4.38)
    gpt35 = {"action_justification": 4.31, "expected_action": 4.28, "linguistic_habits": 3.63,
             "persona_consistency": 4.70, "toxicity_control": 4.96}
    assert round(persona_score(gpt35), 2) == 4.38


def test_a_persona_missing_a_task_has_no_persona_score():
    assert persona_score(dict(zip(TASKS[:4], [5.0] * 4))) is None


def test_judge_ensemble_averages_the_judges_that_graded():
    assert ensemble([4, 2]) == 3.0
    assert ensemble([4, None, 5]) == 4.5          # an unreadable grade is left out, not counted as 0
    assert ensemble([None, None]) is None


def test_task_scores_average_questions_then_personas_table_one():
    rows = [("a", "expected_action", 4.0), ("a", "expected_action", 2.0), ("a", "toxicity_control", 5.0),
            ("b", "expected_action", 5.0), ("b", "toxicity_control", None)]
    by = task_scores(rows)
    assert by == {"a": {"expected_action": 3.0, "toxicity_control": 5.0}, "b": {"expected_action": 5.0}}
    full = {"a": dict(zip(TASKS, [3, 4, 5, 5, 3])), "b": dict(zip(TASKS, [5, 4, 3, 5, 3]))}
    table = summary(full)
    mean, std, n = table["expected_action"]
    assert (mean, std, n) == (4.0, 1.0, 2)           # population std over personas
    assert table["persona_score"][0] == pytest.approx(4.0) and table["persona_score"][1] == pytest.approx(0.0)


# ---------------------------------------------------------------- structured answers through the client

def _client(rules: dict[str, str]):
    chain = build_chain(ScriptedLLM(ScriptedConfig(rules=rules)))
    return chain, chain.client


def _templates():
    from townsquare.lib.prompt_files import load_prompts

    return load_prompts(data.PROMPTS, "personagym")


def test_a_batch_of_grades_is_json_of_its_schema_repaired_once_then_a_parse_failure():
    task = data.own_tasks()["expected_action"]
    items = [("A nurse", "What do you do?", "I help.", None), ("A nurse", "Why?", "Because.", None)]
    two = json.dumps({"evaluations": [{"evaluation": "Therefore, the final score is 4", "score": 4},
                                      {"evaluation": "Therefore, the final score is 2", "score": 2}]})
    chain, llm = _client({"Below are 2 rubrics": two})
    assert asyncio.run(llm_steps.grade(llm, _templates(), items, task, llm_steps.Settings())) == [4.0, 2.0]
    assert [(c.purpose, c.status) for c in chain.records] == [("personagym.grade.expected_action", "ok")]

    # one evaluation for two rubrics, then a score of 7: repaired once, then none for either
    one = json.dumps({"evaluations": [{"evaluation": "ok", "score": 4}]})
    chain, llm = _client({"Below are 2 rubrics": one, "That was not valid": json.dumps({"evaluations": [{"evaluation": "x", "score": 7}] * 2})})
    assert asyncio.run(llm_steps.grade(llm, _templates(), items, task, llm_steps.Settings())) == [None, None]
    assert [(c.purpose, c.status) for c in chain.records] == [("personagym.grade.expected_action", "ok"),
                                                               ("personagym.grade.expected_action.repair", "ok"),
                                                               ("personagym.grade.expected_action", "parse_failure")]


def test_the_schemas_hold_each_step_to_its_shape():
    grades = llm_steps.grades_schema(3)["properties"]["evaluations"]
    assert grades["minItems"] == grades["maxItems"] == 3
    assert grades["items"]["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    assert list(grades["items"]["properties"]) == ["evaluation", "score"]       # reasoning before the score
    assert llm_steps.questions_schema(10)["properties"]["questions"]["minItems"] == 10
    assert llm_steps.environments_schema(["Wedding"])["properties"]["environments"]["items"]["enum"] == ["Wedding"]


def test_score_examples_come_one_object_per_question():
    task = data.own_tasks()["toxicity_control"]
    example = {f"score_{n}": f"example {n}" for n in range(1, 6)}
    chain, llm = _client({"Below are 2 requests": json.dumps({"examples": [example, example]})})
    found = asyncio.run(llm_steps.score_examples(llm, _templates(), [("A nurse", "Q1?"), ("A nurse", "Q2?")], task, llm_steps.Settings()))
    assert found == [{n: f"example {n}" for n in range(1, 6)}] * 2


def test_fallback_environments_share_words_with_the_persona():
    pool = ["Wedding", "Science Laboratory", "Camping Trip", "Hospital Ward"]
    assert llm_steps.fallback_environments("A nurse on a hospital ward who loves camping", pool, 2) == ["Hospital Ward", "Camping Trip"]  # 2 words shared, then 1


def test_environment_selection_keeps_the_pool_and_falls_back_after_a_failed_repair():
    pool = ["Wedding", "Hospital Ward", "Courtroom"]
    chain, llm = _client({"most relevant": "I cannot choose.", "That was not valid": "Sorry."})
    chosen, source = asyncio.run(llm_steps.select_environments(llm, _templates(), "A nurse in a hospital ward", pool, 1, llm_steps.Settings()))
    assert (chosen, source) == (["Hospital Ward"], "fallback")
    assert chain.records[-1].status == "parse_failure"
    chain, llm = _client({"most relevant": json.dumps({"environments": ["Mars Base", "courtroom", "Wedding"]})})
    assert asyncio.run(llm_steps.select_environments(llm, _templates(), "A lawyer", pool, 1, llm_steps.Settings())) == (["Courtroom"], "llm")
    assert match_environments(["camping trip", "Mars Base", "Wedding", "Wedding"], ["Wedding", "Camping Trip"]) == ["Camping Trip", "Wedding"]


# ---------------------------------------------------------------- the released data

def test_fixture_rubrics_and_requirements_replace_ours():
    tasks = data.released_tasks(FIXTURES, data.own_tasks())
    toxicity = tasks["toxicity_control"]
    assert toxicity.source == "released" and toxicity.title == "Toxicity"
    assert toxicity.levels[0] == "Fixture level 1 for toxicity." and toxicity.description == "Fixture description of toxicity."
    assert tasks["expected_action"].title == "Expected Action in Given Setting"
    assert tasks["linguistic_habits"].criteria.startswith("Test criteria")


def test_a_rubric_without_five_levels_is_named(tmp_path):
    with pytest.raises(UsageError, match="bad.txt: expected 'Score = 1:'"):
        data.parse_rubric("Evaluation Task:\n\nX\n\nEvaluation Task Description:\n\nY\n\nScore = 1: only one", "bad.txt")


def test_static_questions_load_by_persona_description():
    bank = data.load_static_questions(FIXTURES)
    assert len(bank) == 2
    found = data.static_questions_for(bank, "A 34-year-old nurse from Lagos who plays chess on weekends.")
    assert found is not None and set(found) == set(TASKS) and all(len(qs) == 10 for qs in found.values())
    assert found["toxicity_control"][0].startswith("Toxicity fixture question 1")   # "Toxicity" -> toxicity_control
    assert data.static_questions_for(bank, "A 19-year-old student from Lima who writes poetry") is None


def test_bad_data_files_are_one_line_errors(tmp_path):
    (tmp_path / "environments.json").write_text('{"not": "a list"}')
    with pytest.raises(UsageError, match="environments.json: expected a non-empty JSON list"):
        data.load_environments(tmp_path)
    with pytest.raises(UsageError, match="no such persona file"):
        data.load_persona_descriptions(tmp_path / "missing.json")
    (tmp_path / "questions_benchmark-v1").mkdir()
    (tmp_path / "questions_benchmark-v1" / "A person.json").write_text('{"Expected Action": ["q?"]}')
    with pytest.raises(UsageError, match="no questions for the task 'Linguistic Habits'"):
        data.load_static_questions(tmp_path)


def test_bundled_environments_are_the_150():
    pool = data.load_environments()
    assert len(pool) == 150 and len(set(pool)) == 150 and pool[0] == "Wedding"


@pytest.mark.shared_data
def test_the_released_folder_loads_whole():
    if not SHARED.is_dir():
        pytest.skip("../shared/data/personagym is absent")
    assert data.load_environments(SHARED) == data.load_environments()
    personas = data.load_persona_descriptions(SHARED / "personas_benchmark.json")
    bank = data.load_static_questions(SHARED)
    assert len(personas) == 200 and len(bank) == 200
    assert all(data.static_questions_for(bank, p) is not None for p in personas)
    assert sum(len(qs) for found in bank.values() for qs in found.values()) == 10_000
    tasks = data.released_tasks(SHARED, data.own_tasks())
    assert {t.source for t in tasks.values()} == {"released"}
    scores = json.loads((SHARED / "evaluations" / "20240710_gpt_35.scores.json").read_text())
    by_key = {data.task_key(k): v for k, v in scores.items() if k != "PersonaScore"}
    assert round(persona_score(by_key), 2) == scores["PersonaScore"]


class Replies:
    """A provider that answers from a list and records each request."""

    name, model = "replies", "replies-model"

    def __init__(self, *texts: str):
        self.texts, self.requests = list(texts), []

    async def complete(self, request):
        from townsquare.api import LLMResponse

        self.requests.append(request)
        return LLMResponse(text=self.texts.pop(0), model=self.model, provider=self.name)


def test_every_structured_step_sends_its_schema_and_its_repair_keeps_it():
    templates, tasks = _templates(), data.own_tasks()
    settings = llm_steps.Settings()
    provider = Replies("Sure! Here are some questions.", '{"questions": ["What do you do when the bride faints?", "How do you toast?"]}')
    questions = asyncio.run(llm_steps.generate_questions(build_chain(provider).client, templates, "A nurse", "Wedding",
                                                         tasks["expected_action"], 2, settings))
    assert questions == ["What do you do when the bride faints?", "How do you toast?"]
    assert provider.requests[0].json_schema == provider.requests[1].json_schema == llm_steps.questions_schema(2)
    assert provider.requests[0].temperature == 0.9 and provider.requests[1].purpose == "personagym.questions.expected_action.repair"
    provider = Replies("I can't.", json.dumps({"examples": [{f"score_{n}": f"example {n}" for n in range(1, 6)}]}))
    examples = asyncio.run(llm_steps.score_examples(build_chain(provider).client, templates, [("A nurse", "Q?")], tasks["expected_action"], settings))
    assert examples == [{n: f"example {n}" for n in range(1, 6)}] and provider.requests[0].temperature == 0.0


def test_persona_files_are_a_json_list_or_one_description_a_line(tmp_path):
    (tmp_path / "p.txt").write_text("A chef from Lyon\n\n  A sailor from Cork  \n")
    assert data.load_persona_descriptions(tmp_path / "p.txt") == ["A chef from Lyon", "A sailor from Cork"]
    (tmp_path / "p.json").write_text('["A chef from Lyon", ""]')
    with pytest.raises(UsageError, match="p.json: expected a non-empty JSON list of strings"):
        data.load_persona_descriptions(tmp_path / "p.json")
