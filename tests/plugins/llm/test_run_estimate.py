"""``townsquare estimate``: the typical model's answers (shares held exactly, labels the prompt
names, typical JSON), the designs' priors, and the forecast held against runs whose model acts:
the oracle test model on Park's town, RecAgent and Zhou's set-up, within 25 % of calls and of
prompt tokens with the same settings. ``benchmarks/estimate.py`` holds it against the offline
quickstart."""

from __future__ import annotations

import json
import sqlite3

import pytest

from helpers import ROOT
from townsquare.lib.answer_priors import AnswerPrior
from townsquare.commands.typical_answers import TypicalModel, nothing_label, typical_value
from townsquare.llm import LLMRequest, Message
from townsquare.plugins.llm.run_estimate import forecast_run

ORACLE = "townsquare.testing.oracle"
DRY = ["llm_cache", "llm_budget", "llm_retry", "llm_concurrency"]


def ask(model: TypicalModel, purpose: str, text: str = "Would they?", **fields) -> str:
    request = LLMRequest(messages=(Message("user", text),), purpose=purpose, **fields)
    import asyncio

    return asyncio.run(model.complete(request)).text


def test_declared_shares_are_held_exactly_in_order_and_scaled_by_the_disposition():
    prior = AnswerPrior("talk", shares={"yes": 0.3})
    typical = TypicalModel([prior])
    answers = [ask(typical, "talk", labels=("yes", "no")) for _ in range(100)]
    assert answers.count("yes") == 30 and "yes" in answers[:4]
    more = TypicalModel([prior], disposition=1.5)
    assert [ask(more, "talk", labels=("yes", "no")) for _ in range(100)].count("yes") == 45
    # a rating has no "do nothing" label: its shares are proportions, whatever the disposition
    rating = AnswerPrior("rate", shares={"2": 0.5, "3": 0.5})
    half = TypicalModel([rating], disposition=0.5)
    assert sorted({ask(half, "rate", labels=("1", "2", "3")) for _ in range(10)}) == ["2", "3"]
    # "*": any label that acts (a follow decision's candidates), the one the prompt names last
    follow = TypicalModel([AnswerPrior("follow", shares={"*": 1.0})])
    text = "Posts by u2 and u3.\nYou liked the post of u3."
    assert ask(follow, "follow", text, labels=("u2", "u3", "do not follow")) == "u3"


def test_without_a_prior_the_label_the_prompt_names_wins_over_the_place_the_agent_is_in():
    typical = TypicalModel()
    places = ("Home", "Hobbs Cafe", "Oak Hill College")
    text = ("Places you know: Home, Hobbs Cafe, Oak Hill College.\nYou are now in Home.\n"
            "You are planning to: teach at Oak Hill College\nWhere do you go?")
    assert ask(typical, "town.sector", text, labels=places) == "Oak Hill College"
    text = text.replace("teach at Oak Hill College", "sleep")
    assert ask(typical, "town.sector", text, labels=places) == "Home"
    assert ask(typical, "react", "Should they react?", labels=("yes", "no")) == "no"
    assert nothing_label(("like", "no operation")) == "no operation" and nothing_label(("a", "b")) is None


def test_typical_json_fills_the_schema_as_asked_and_text_differs_with_the_request():
    schema = {"type": "object", "required": ["topics"],
              "properties": {"topics": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"type": "string", "maxLength": 40}},
                             "score": {"type": "integer", "minimum": 1, "maximum": 9}}}
    value = typical_value(schema, "one two three four five six seven eight")
    assert len(value["topics"]) == 4 and len(set(value["topics"])) == 4 and value["score"] == 5
    typical = TypicalModel()
    one = ask(typical, "post", "Write one post about: gardening in spring")
    other = ask(typical, "post", "Write one post about: jazz records")
    assert one != other and abs(len(one) - 80 * 4) < 40  # as long as the completion expected (80 tokens)
    sized = TypicalModel([AnswerPrior("summary", completion_tokens=40)], completion_tokens={"post": 10})
    assert sized.expected_completion("summary", "text") == 40 and sized.expected_completion("post", "text") == 10


def test_a_prior_says_what_it_gives():
    with pytest.raises(ValueError, match="at most one of shares and answer"):
        AnswerPrior("x", shares={"yes": 0.5}, answer=lambda prompt, d: "yes")
    with pytest.raises(ValueError, match="sum to at most 1"):
        AnswerPrior("x", shares={"a": 0.7, "b": 0.6})


def test_the_designs_declare_their_priors(make_plugins):
    from townsquare.api.commands import answer_priors

    declared = {p.purpose: p for p in answer_priors(make_plugins())}
    assert {"plan", "comment", "dialogue.initiate", "plan.actions", "recagent.activity", "recagent.sensory"} <= set(declared)
    plan = declared["plan"].answer("Your activity level is 0.50, where 1 is the most active.", 1.0)
    assert plan["probability_of_liking"] == 25 and plan["probability_of_forwarding"] == 10 and plan["posts_per_week"] == 2
    busier = declared["plan"].answer("Your activity level is 0.50, where 1 is the most active.", 1.5)
    assert busier["probability_of_liking"] > plan["probability_of_liking"]


def test_parks_priors_answer_what_the_design_reads():
    """The re-plan after a conversation keeps the day as the prompt shows it from now on, and
    insights cite statements that were shown: the design's own readers take both (no fallback
    in the dry run)."""
    from townsquare.plugins.generative_agents import park_answer_priors as park
    from townsquare.plugins.generative_agents.planning.day_plan import REQUIRED as PLAN_REQUIRED
    from townsquare.plugins.generative_agents.planning.schedule import read_timed
    from townsquare.plugins.generative_agents.prompt_files import fill, load_prompts
    from townsquare.plugins.generative_agents.reflection.park_reflection import REQUIRED, read_insights
    from townsquare.api import MemoryRecord

    planning = load_prompts("planning", PLAN_REQUIRED)
    prompt = fill(planning["conversation"], summary="Name: Maria Lopez", name="Maria Lopez", today="Monday February 13",
                  now="2:00 pm", schedule="8:00 am: study\n1:00 pm: work at the cafe\n5:00 pm: stream games\n10:00 pm: sleep",
                  other="Klaus Mueller", notes="Klaus will be at the library at 4.")
    assert read_timed(park.typical_rest_of_day(prompt, 1.0)) == {14 * 60: "work at the cafe", 17 * 60: "stream games", 22 * 60: "sleep"}
    shown = [MemoryRecord("Maria studies physics", id="m1"), MemoryRecord("Maria streams games", id="m2")]
    prompt = fill(load_prompts("reflection", REQUIRED)["insights"], name="Maria Lopez", question="What does Maria love?", count=3,
                  statements="1. Maria studies physics\n2. Maria streams games")
    insights = read_insights(park.typical_insights(prompt, 1.0), shown, 3)
    assert [ids for _, ids in insights] == [("m1", "m2")] * 3
    one = read_insights(park.typical_insights(prompt.replace("2. Maria streams games", ""), 1.0), shown[:1], 3)
    assert [ids for _, ids in one] == [("m1",)] * 3


# --------------------------------------------------------------------------- held against oracle runs


def run_totals(path) -> tuple[int, int]:
    with sqlite3.connect(path / "events.sqlite") as db:
        calls, tokens = db.execute("SELECT COUNT(*), SUM(prompt_tokens) FROM llm_calls WHERE status IN ('ok', 'cached')").fetchone()
    return int(calls), int(tokens or 0)


def held_against_the_oracle(scenario, overrides, make_plugins, tmp_path) -> tuple[tuple[int, int], tuple[int, int]]:
    from townsquare.launch.runner import start_run

    forecast = forecast_run(str(scenario), make_plugins(disable=DRY), overrides=overrides, dispositions=(1.0,))
    calls, prompt, _ = forecast.totals()
    run_dir, summary = start_run(scenario, overrides=[*overrides, "llm.name=oracle"], plugins=make_plugins(enable=[ORACLE]),
                                 out=tmp_path / "oracle")
    assert summary.stopped is None
    return (calls, prompt), run_totals(run_dir.path)


def within(estimate: tuple[int, int], actual: tuple[int, int], share: float = 0.25) -> bool:
    return all(abs(e - a) <= share * a for e, a in zip(estimate, actual))


def test_estimate_of_the_party_town_is_within_a_quarter_of_the_oracle_run(make_plugins, write_scenario, tmp_path):
    """examples/valentines.toml on the six-agent base (as tests/plugins/generative_agents/test_park_party.py)."""
    base = ROOT / "tests" / "data" / "smallville" / "base_party"
    text = (ROOT / "examples" / "valentines.toml").read_text().replace("data:smallville-n25", str(base))
    text = text.replace("rounds = 148", "rounds = 37").replace("count = 25", "count = 6")
    text = text.replace("minutes_per_round = 15 ", "minutes_per_round = 60 ").split("[populations.personas.currently]")[0]
    estimate, actual = held_against_the_oracle(write_scenario(text), [], make_plugins, tmp_path)
    assert actual[0] > 300 and within(estimate, actual), (estimate, actual)


def test_estimate_of_recagent_is_within_a_quarter_of_the_oracle_run(make_plugins, tmp_path):
    data = ROOT / "tests" / "data" / "recsys"
    overrides = [f"platform.path={data / 'ml-mini'}", f"populations.0.personas.path={data / 'user.csv'}",
                 f"populations.0.personas.relationships={data / 'relationship.csv'}", "populations.0.count=8", "rounds=6"]
    estimate, actual = held_against_the_oracle(ROOT / "examples" / "recagent.toml", overrides, make_plugins, tmp_path)
    assert actual[0] > 100 and within(estimate, actual), (estimate, actual)


def test_estimate_of_zhous_set_up_is_within_a_quarter_of_the_oracle_run(make_plugins, tmp_path):
    """examples/social_media.toml as its "Smaller" line has it: 15 + 30 agents, two one-day stages
    (fewer agents leave it to where a handful of browsing windows fall)."""
    overrides = ["populations.0.count=15", "populations.1.count=30", "rounds=49", "populations.1.feed_stages.0.end_round=25",
                 "populations.1.feed_stages.1.start_round=25"]
    estimate, actual = held_against_the_oracle(ROOT / "examples" / "social_media.toml", overrides, make_plugins, tmp_path)
    assert actual[0] > 500 and within(estimate, actual), (estimate, actual)


def test_estimate_command_prints_each_purpose_with_its_range(write_scenario, tmp_path, capsys):
    from townsquare.cli import main

    overrides = ["--set", "populations.0.count=3", "--set", "populations.1.count=4", "--set", "rounds=13",
                 "--set", "populations.1.feed_stages.0.end_round=7", "--set", "populations.1.feed_stages.1.start_round=7"]
    main(["estimate", str(ROOT / "examples" / "social_media.toml"), *overrides])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    header = next(line for line in lines if line.startswith("purpose"))
    assert header.split() == ["purpose", "calls", "range", "prompt", "tokens", "range", "completion", "tokens", "cost"]
    plan = next(line for line in lines if line.startswith("plan "))
    assert plan.split()[1:3] == ["4", "4-4"]  # one plan per regular agent, whatever the model
    total = next(line for line in lines if line.startswith("total")).split()
    low, high = (int(x.replace(",", "")) for x in total[2].split("-"))
    assert low <= int(total[1].replace(",", "")) <= high
    assert "typical answers declared for: " in captured.out and "monitor." not in captured.err
