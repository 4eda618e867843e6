"""Park et al.'s controlled evaluation (§6): the battery, memory access per architecture,
judges' orderings, Bradley–Terry with bootstrap intervals, and ``townsquare eval park`` on a
town run."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from helpers import ROOT
from townsquare.api import MemoryRecord, Persona
from townsquare.plugins.generative_agents.evaluation.controlled_eval import (
    ARCHITECTURES, BATTERY, REQUIRED, interview, judge, questions_for,
)
from townsquare.plugins.generative_agents.evaluation.ranking import (
    bradley_terry, rank_conditions, table, wins_from_orderings,
)
from townsquare.plugins.generative_agents.prompt_files import load_prompts

PROMPTS = load_prompts("evaluation", REQUIRED)


def test_the_battery_has_five_categories_of_five_questions_with_names_filled_in():
    assert list(BATTERY) == ["self-knowledge", "memory", "plans", "reactions", "reflections"]
    assert all(len(qs) == 5 for qs in BATTERY.values())
    asked = questions_for("Klaus Mueller", "Maria Lopez")
    assert len(asked) == 25 and ("memory", "Who is Maria Lopez?") in asked
    assert ("self-knowledge", "Tell me about yourself, Klaus Mueller.") in asked
    assert len(questions_for("A", "B", per_category=2)) == 10


def test_bradley_terry_matches_the_closed_form_and_the_likelihood_equations():
    # two conditions, 3 wins to 1: p1/p2 = 3 (no prior)
    scores = bradley_terry(np.array([[0, 3], [1, 0]]), prior=0.0)
    assert scores[0] - scores[1] == pytest.approx(math.log(3), abs=1e-6)
    assert scores.sum() == pytest.approx(0.0, abs=1e-9)
    # three conditions: the fitted strengths satisfy W_i = sum_j n_ij p_i / (p_i + p_j)
    wins = np.array([[0, 4, 5], [2, 0, 3], [1, 3, 0]], dtype=float)
    p = np.exp(bradley_terry(wins, prior=0.0))
    n = wins + wins.T
    for i in range(3):
        expected = sum(n[i, j] * p[i] / (p[i] + p[j]) for j in range(3) if j != i)
        assert wins[i].sum() == pytest.approx(expected, rel=1e-6)
    # a condition that never wins keeps a finite score with the prior
    assert np.isfinite(bradley_terry(np.array([[0, 5], [0, 0]]), prior=0.5)).all()


def test_orderings_become_pairwise_wins_and_a_ranking_with_intervals():
    conditions = ["full", "no_reflection", "none"]
    orderings = [["full", "no_reflection", "none"]] * 8 + [["no_reflection", "full", "none"]] * 2
    wins = wins_from_orderings(orderings, conditions)
    assert wins.tolist() == [[0, 8, 10], [2, 0, 10], [0, 0, 0]]
    ranked = rank_conditions(orderings, conditions, rounds=200, seed=1)
    assert [r.condition for r in ranked] == conditions
    assert all(r.low <= r.score <= r.high for r in ranked) and ranked[0].comparisons == 20
    assert rank_conditions(orderings, conditions, rounds=200, seed=1) == ranked  # seeded
    text = table(ranked)
    assert text.splitlines()[0].startswith("architecture") and "full" in text.splitlines()[2]


class StubLLM:
    def __init__(self, answer="an answer", ranking=None):
        self.answer, self.ranking, self.prompts = answer, ranking, []

    async def text(self, prompt, **_):
        self.prompts.append(prompt)
        return self.answer

    async def json(self, prompt, schema, *, validate, default, **_):
        self.prompts.append(prompt)
        try:
            return validate(self.ranking)
        except ValueError:
            return default


RECORDS = [MemoryRecord("I saw Maria at the cafe", kind="observation"), MemoryRecord("I plan to study at 10 am", kind="plan"),
           MemoryRecord("I value my friends", kind="reflection")]


def ctx_with_memory(llm):
    async def recall(ctx, query, k):
        return RECORDS[:k]

    memory = SimpleNamespace(recall=recall, since=lambda when: RECORDS, remember=None)
    agent = SimpleNamespace(id="v-1", persona=Persona("Klaus Mueller", ["Klaus is a student."]),
                            components={"memory.stream": memory})
    return SimpleNamespace(agent=agent, require_llm=lambda name: llm)


@pytest.mark.parametrize("architecture,shown", [
    ("full", {"observation", "plan", "reflection"}),
    ("no_reflection", {"observation", "plan"}),
    ("no_reflection_no_planning", {"observation"}),
    ("no_observation_reflection_planning", set()),
])
def test_each_architecture_recalls_only_its_memory_kinds(architecture, shown):
    llm = StubLLM()
    assert asyncio.run(interview(ctx_with_memory(llm), "What will you do tomorrow?", architecture, PROMPTS)) == "an answer"
    prompt = llm.prompts[0]
    texts = {"observation": "I saw Maria", "plan": "I plan to study", "reflection": "I value my friends"}
    assert {kind for kind, text in texts.items() if text in prompt} == shown
    assert 'An interviewer asks you: "What will you do tomorrow?"' in prompt


def test_a_judges_letters_map_back_to_architectures_and_bad_orderings_are_dropped():
    answers = {a: f"answer of {a}" for a in ARCHITECTURES}
    rng = np.random.default_rng(3)
    llm = StubLLM(ranking={"ranking": ["A", "B", "C", "D"]})
    order = asyncio.run(judge(llm, PROMPTS, ctx_with_memory(llm), "Who are you?", answers, rng))
    prompt = llm.prompts[0]
    # the architecture shown as A is ranked first, and so on
    shown = [line.split(") ", 1)[1].removeprefix("answer of ") for line in prompt.splitlines() if line[:3] in ("A) ", "B) ", "C) ", "D) ")]
    assert order == shown and sorted(order) == sorted(ARCHITECTURES)
    assert asyncio.run(judge(StubLLM(ranking={"ranking": ["A", "A", "B", "C"]}), PROMPTS, ctx_with_memory(llm), "Q",
                             answers, rng)) is None


def test_evaluate_command_interviews_a_town_runs_agents(tmp_path):
    mini = ROOT / "tests" / "data" / "smallville" / "base_mini"
    text = (ROOT / "examples" / "smallville.toml").read_text()
    text = text.replace('"data:smallville-3"', f'"{mini}"')
    text += '[llm]\nname = "scripted"\n[plugins.scripted]\nrules = { "Rank the answers" = "{\\"ranking\\": [\\"A\\", \\"B\\", \\"C\\", \\"D\\"]}" }\n'
    scenario = tmp_path / "s.toml"
    scenario.write_text(text)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "townsquare.cli", *args, "-p", "townsquare.testing.scripted"],
                              capture_output=True, text=True)

    ran = cli("run", str(scenario), "--out", str(tmp_path / "run"), "--set", "rounds=2")
    assert ran.returncode == 0, ran.stderr
    out = cli("eval", "park", str(tmp_path / "run"), "--agents", "2", "--questions", "1", "--bootstrap", "50",
              "--topic", "a Valentine's Day party")
    assert out.returncode == 0, out.stderr
    assert "answered by the model" in out.stdout and "0 answered by the model" not in out.stdout, out.stdout
    assert out.stdout.splitlines()[0].startswith("architecture")
    assert {line.split()[0] for line in out.stdout.splitlines()[2:6]} == set(ARCHITECTURES)
    assert "10 orderings of 10 questions" in out.stdout
    saved = json.loads((tmp_path / "run" / "evaluation.json").read_text())
    assert len(saved["judgements"]) == 10 and len(saved["ranking"]) == 4
    assert "know about a Valentine's Day party:" in out.stdout and "relationship density" in out.stdout
    assert saved["social"]["agents"] == 2 and 0 <= saved["social"]["density"] <= 1
    assert all(set(j["answers"]) == set(ARCHITECTURES) for j in saved["judgements"])
    # every call of the agents and the judge is journaled beside the result, and none went into the run's tables
    calls = llm_calls(tmp_path / "run" / "evaluation" / "events.sqlite")
    assert calls["eval.judge"] == 10 and calls["eval.answer.full"] == 10 and calls["eval.knows_topic"] == 2
    made = sum(calls.values())
    assert f"{made} LLM calls" in out.stdout
    # the estimate: calls within 25 % of those made (repairs of malformed answers aside)
    estimate = cli("eval", "park", str(tmp_path / "run"), "--agents", "2", "--questions", "1", "--topic", "a Valentine's Day party",
                   "--estimate")
    assert estimate.returncode == 0, estimate.stderr
    estimated = int(estimate.stdout.split("ESTIMATE: ")[1].split(" LLM calls")[0].replace(",", ""))
    first_tries = sum(n for purpose, n in calls.items() if not purpose.endswith(".repair"))
    assert abs(estimated - first_tries) <= 0.25 * first_tries, (estimated, first_tries)
    # the same command again: every answer from the cache, each call journaled once
    again = cli("eval", "park", str(tmp_path / "run"), "--agents", "2", "--questions", "1", "--bootstrap", "50",
                "--topic", "a Valentine's Day party")
    assert again.returncode == 0, again.stderr
    assert f"{made} LLM calls" in again.stdout and "0 answered by the model" in again.stdout, again.stdout
    assert sum(llm_calls(tmp_path / "run" / "evaluation" / "events.sqlite").values()) == made


def llm_calls(path) -> dict:
    import sqlite3

    db = sqlite3.connect(path)
    try:
        return dict(db.execute("SELECT purpose, COUNT(*) FROM llm_calls GROUP BY purpose").fetchall())
    finally:
        db.close()


def test_social_interviews_count_backed_yeses_and_mutual_acquaintance():
    from ga_support import RuleLLM
    from townsquare.plugins.generative_agents.evaluation.social_interviews import REQUIRED as SOCIAL, interview_town

    prompts = load_prompts("evaluation", {**REQUIRED, **SOCIAL})
    memories = {"a": ["Ann is planning a Valentine's Day party."], "b": ["Ann told me about her party."], "c": []}
    names = {"a": "Ann Lee", "b": "Ben Ode", "c": "Cy Tan"}
    # everyone says yes about the party (Cy without a memory of it); Ann and Ben know each other,
    # Cy claims to know Ann but Ann does not know Cy
    llm = RuleLLM([(r"You are Ann Lee.*Do you know (Ben Ode|about)", "yes"), (r"You are Ben Ode.*Do you know (Ann Lee|about)", "yes"),
                   (r"You are Cy Tan.*Do you know (Ann Lee|about)", "yes")], label_default="no")

    def ctx(agent_id):
        records = [MemoryRecord(t) for t in memories[agent_id]]

        async def recall(ctx, query, k):
            return records[:k]

        memory = SimpleNamespace(recall=recall, since=lambda when: records, remember=None)
        agent = SimpleNamespace(id=agent_id, persona=Persona(names[agent_id]), components={"memory.stream": memory})
        return SimpleNamespace(agent=agent, require_llm=lambda name: llm)

    result = asyncio.run(interview_town([ctx(a) for a in "abc"], prompts, "a Valentine's Day party", "valentine|party"))
    assert result.said_yes == ["a", "b", "c"] and result.informed == ["a", "b"] and result.hallucinated == ["c"]
    assert result.knows_share == pytest.approx(2 / 3)
    assert result.acquaintances == {"a": ["b"], "b": ["a"], "c": ["a"]}
    assert result.density == pytest.approx(2 / 6)  # only a-b is mutual
    # every answer, per agent
    assert result.answers[2] == {"agent": "c", "name": "Cy Tan", "knows_topic": "yes", "evidence": False,
                                 "knows": {"a": "yes", "b": "no"}}
    assert [a["evidence"] for a in result.answers] == [True, True, False]
    # the evidence a town counts: a conversation (or the seed), not a memory of another kind
    memories["b"] = ["Ann told me about her party."]
    kinds = asyncio.run(interview_town([ctx(a) for a in "ab"], prompts, "a Valentine's Day party", "valentine|party",
                                       people=False, evidence_kinds=["chat"]))
    assert kinds.informed == [] and kinds.hallucinated == ["a", "b"] and kinds.answers[0]["knows"] == {}


def test_a_measured_topic_is_asked_in_its_words_and_each_day_ends_at_its_last_checkpoint():
    from datetime import date, datetime

    from townsquare.plugins.generative_agents.evaluation.social_interviews import day_ends, topic_question
    from townsquare.launch.scenario_files import read_scenario
    from townsquare.scenario import validate_scenario

    path = ROOT / "examples" / "valentines.toml"
    model = validate_scenario(read_scenario(path), str(path))
    assert topic_question(model, "party", None) == ("a Valentine's Day party", "valentine|party", ["chat"])
    assert topic_question(model, "candidacy", None)[0] == "Sam Moore running for mayor"
    assert topic_question(model, "party", "party") == ("a Valentine's Day party", "party", ["chat"])
    assert topic_question(model, "the mayor's race", None) == ("the mayor's race", "valentine|party", None)  # free text
    # quarter-hour rounds from 6 am on the 13th: round 71 is the last of that day (11:45 pm), 147 the run's last
    start = datetime(2023, 2, 13, 6, 0)
    assert day_ends(start, 15, 147, list(range(3, 148, 4)) + [147]) == ([71, 147], [])
    assert day_ends(start, 15, 147, [145, 146, 147]) == ([147], [date(2023, 2, 13)])
    assert day_ends(start, 60, 5, [5]) == ([5], [])
