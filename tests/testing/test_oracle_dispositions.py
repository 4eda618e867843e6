"""The oracle's dispositions are settings that change how it reads a prompt, never what it sees:
each one moves its answers by the amount set, shares come out as set over many prompts, and the
defaults give the answers of its fixed rules."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from townsquare.llm import LLMRequest, Message
from townsquare.plugins.generative_agents.prompt_files import fill, load_prompts
from townsquare.testing.oracle import OracleConfig, OracleLLM
from townsquare.testing.oracle.park import without_details

MEMORY = load_prompts("memory", {})
PARTY = "Isabella Rodriguez is planning a Valentine's Day party at Hobbs Cafe on February 14th, 2023, from 5pm to 7pm."
SCORES = tuple(str(n) for n in range(1, 11))


def ask(prompt: str, purpose: str, settings: dict | None = None, **fields) -> str:
    oracle = OracleLLM(OracleConfig(**(settings or {})))
    return asyncio.run(oracle.complete(LLMRequest(messages=(Message("user", prompt),), purpose=purpose, **fields))).text


def test_defaults_are_the_fixed_rules_values():
    config = OracleConfig()
    assert (config.news_importance, config.relay_fidelity, config.conformity_weight, config.follow_page) == (8, 1.0, 0.5, 0.0)
    with pytest.raises(ValidationError, match="news_importance"):
        OracleConfig(news_importance=11)
    with pytest.raises(ValidationError, match="relay_fidelity"):
        OracleConfig(relay_fidelity=1.5)


@pytest.mark.parametrize("news, note", [(4, "5"), (5, "6"), (8, "9"), (10, "10")])
def test_news_importance_rates_a_dated_event_and_a_planning_note_one_more(news, note):
    def rate(kind, memory):
        return ask(fill(MEMORY["importance"], name="Maria Lopez", kind=kind, memory=memory), "importance",
                   {"news_importance": news}, labels=SCORES)

    assert rate("chat", f"Isabella Rodriguez said to Maria Lopez: {PARTY}") == str(news)
    assert rate("reflection", f"For Maria Lopez's planning: {PARTY}") == note
    # undated news and routine are not events: the setting does not touch them
    assert rate("chat", "Sam Moore said to Maria Lopez: I am running for local mayor!") == "5"
    assert rate("observation", "the piano is idle (Hobbs Cafe, cafe)") == "1"


def relay(listener: str, settings: dict) -> str:
    me, other = "Maria Lopez", listener
    prompt = (f"Name: {me}\nStatus: going about the day\n\nIt is Monday February 13, 2023, 12:00 pm.\n{me}'s status: busy\n"
              f"Observation: x\nSummary of relevant context from {me}'s memory:\n"
              f"1. Monday February 13, 10:00 am: Isabella Rodriguez said to {me}: {PARTY.replace('Isabella Rodriguez is', 'I am')}\n\n"
              f"The conversation is about: lunch\nHere is the dialogue so far:\n(nothing has been said yet)\n\n"
              f"What would {me} say next to {other}? Reply with one JSON object and nothing else:")
    return json.loads(ask(prompt, "dialogue.turn", settings, json_schema={"type": "object"}))["utterance"]


def test_without_details_drops_date_time_and_place_and_keeps_the_news():
    assert without_details(PARTY) == "Isabella Rodriguez is planning a Valentine's Day party."
    assert without_details("Sam Moore is hosting a meeting on Feb 14 5-7 pm at Town Hall.") == "Sam Moore is hosting a meeting."
    assert without_details("Sam Moore is running for local mayor.") == "Sam Moore is running for local mayor."


@pytest.mark.parametrize("fidelity", [0.0, 0.3, 0.7, 1.0])
def test_relay_fidelity_is_the_share_of_relays_that_keep_the_details(fidelity):
    listeners = [f"Person{n} Smith" for n in range(300)]
    kept = [relay(name, {"relay_fidelity": fidelity}) for name in listeners]
    assert all(u.startswith("Have you heard? Isabella Rodriguez is planning a Valentine's Day party") for u in kept)
    share = sum("February 14th" in u and "5pm" in u and "Hobbs Cafe" in u for u in kept) / len(kept)
    assert abs(share - fidelity) < 0.08
    # the same prompt always gets the same answer
    assert relay(listeners[0], {"relay_fidelity": fidelity}) == kept[0]


def test_own_news_is_told_whole_whatever_the_relay_fidelity():
    me = "Isabella Rodriguez"
    prompt = (f"Name: {me}\nStatus: {PARTY}\n\nIt is Monday February 13, 2023, 12:00 pm.\n{me}'s status: busy\n"
              f"Observation: x\nSummary of relevant context from {me}'s memory:\n(nothing remembered)\n\n"
              f"The conversation is about: lunch\nHere is the dialogue so far:\n(nothing has been said yet)\n\n"
              f"What would {me} say next to Maria Lopez? Reply with one JSON object and nothing else:")
    answer = json.loads(ask(prompt, "dialogue.turn", {"relay_fidelity": 0.0}, json_schema={"type": "object"}))
    assert answer["utterance"] == PARTY.replace("Isabella Rodriguez is", "I am")


def test_the_speakers_status_line_is_its_own_news_told_whole():
    me = "Tom Moreno"
    status = f"{me} is busy with: attend a Valentine's Day party at Hobbs Cafe on February 14th, 2023, from 5pm to 7pm"
    prompt = (f"Name: {me}\nStatus: going about the day\n\nIt is Tuesday February 14, 2023, 5:30 pm.\n{me}'s status: {status}\n"
              f"Observation: x\nSummary of relevant context from {me}'s memory:\n(nothing remembered)\n\n"
              f"The conversation is about: the party\nHere is the dialogue so far:\n(nothing has been said yet)\n\n"
              f"What would {me} say next to Maria Lopez? Reply with one JSON object and nothing else:")
    answer = json.loads(ask(prompt, "dialogue.turn", {"relay_fidelity": 0.0}, json_schema={"type": "object"}))
    assert "February 14th" in answer["utterance"] and "5pm" in answer["utterance"] and "Hobbs Cafe" in answer["utterance"]


def conformity_prompt(previous: str) -> str:
    return ("You are Ada. You enjoy Drama.\n\nWhat you remember about it:\n- Bo posted to friends: My take on <Silent Orbit 1>: 8/10."
            f"\n\nAn interviewer asks about the movie <Silent Orbit 1> (Action: An action film.). Your score for it last time: {previous}.\n"
            "How would you score <Silent Orbit 1> now? Answer with one number.")


@pytest.mark.parametrize("weight, score", [(0.0, "4"), (0.25, "5"), (0.5, "6"), (0.75, "7"), (1.0, "8")])
def test_conformity_weight_is_how_far_a_score_moves_toward_recalled_opinions(weight, score):
    assert ask(conformity_prompt("4/10"), "recagent.conformity", {"conformity_weight": weight}, labels=SCORES) == score


@pytest.mark.parametrize("share", [0.0, 0.4, 1.0])
def test_follow_page_is_the_share_of_watches_taken_from_the_top_of_the_page(share):
    labels = ("watch 1", "watch 2", "next page", "search", "leave")
    picks = []
    for n in range(300):
        page = (f"You are Ada. You enjoy Drama.\n\nMemories that matter here:\n- (nothing comes to mind)\n\n"
                f"Situation: It is Monday, 08:00 (round {n}).\n\n"
                "On your screen:\n1. <Silent Orbit 1> (Action): An action film.\n2. <Paper Echo 3> (Drama): A drama film.\n\n"
                "Movies you have heard about but not watched: none\n\nPick one.")
        picks.append(ask(page, "recagent.page", {"follow_page": share}, labels=labels))
    assert set(picks) <= {"watch 1", "watch 2"}
    assert abs(picks.count("watch 1") / len(picks) - share) < 0.08


def test_a_scenario_sets_the_dispositions_under_llm(write_scenario, make_plugins):
    from townsquare.errors import ScenarioError
    from townsquare.launch.scenario_files import load_scenario

    plugins = make_plugins(enable=["townsquare.testing.oracle"])
    text = 'name = "d"\nrounds = 1\n[llm]\nname = "oracle"\n[[populations]]\nname = "u"\ncount = 1\npersonas = { name = "synthetic" }\n'
    path = write_scenario(text)
    config = load_scenario(path, ["llm.news_importance=5", "llm.relay_fidelity=0.5"], plugins).llm.config
    assert (config.news_importance, config.relay_fidelity, config.conformity_weight) == (5, 0.5, 0.5)
    with pytest.raises(ScenarioError, match="news_importance"):
        load_scenario(path, ["llm.news_importance=0"], plugins)
