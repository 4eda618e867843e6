"""Zhou §3.1.3 activity plan: the declared answer read strictly, fallback, windows, quotas, posting schedule."""

from __future__ import annotations

import asyncio
import json
import math
from datetime import datetime, timedelta

import numpy as np
import pytest

from test_sa_policy_world import HIKER, PLAN, START, World, scripted
from townsquare.components import BuildContext
from townsquare.plugins.social_agent.planning import activity_plan
from townsquare.plugins.social_agent.planning.activity_plan import ActivityPlanConfig, build_activity_plan
from townsquare.plugins.social_agent.planning.plan_parsing import (Clock, Plan, PlanFormatError, PlanSession, Window, activity_fraction,
                                                          fallback_plan, full_activity_level, in_window, plan_from_answer, posts_in_round, quota)
from townsquare.plugins.social_agent.actions.action_prompts import action_answers

GOOD_ANSWER = {"browsing_start": "19:00", "browsing_end": "21:30", "probability_of_liking": 30, "probability_of_forwarding": 10,
               "probability_of_commenting": 5, "posting_day": 3, "posting_start": "18:00", "posting_end": "20:00", "posts_per_week": 4}
GOOD = json.dumps(GOOD_ANSWER)
#: the plan in the paper's own six lines (Plan.text)
PAPER_LINES = """Browsing time period: 19:00-21:30
Probability of liking: 30%
Probability of forwarding: 10%
Probability of commenting: 5%
Posting time period: day 3-18:00-20:00
Frequency of posting: 4 times per week"""


def answer(**changes):
    return json.dumps({**GOOD_ANSWER, **changes})


def test_well_formed_plan():
    plan = plan_from_answer(GOOD_ANSWER)
    assert plan == Plan(Window(19 * 60, 21 * 60 + 30), 30.0, 10.0, 5.0, 3, Window(18 * 60, 20 * 60), 4)
    assert plan.text() == PAPER_LINES
    assert plan_from_answer(plan.to_answer()) == plan
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_a_window_past_midnight_and_the_whole_day():
    plan = plan_from_answer({**GOOD_ANSWER, "browsing_start": "22:00", "browsing_end": "01:00", "posting_start": "00:00",
                             "posting_end": "24:00", "probability_of_liking": 12.5})
    assert (plan.browse, plan.browse.length, plan.like) == (Window(22 * 60, 60), 180, 12.5)
    assert plan.post == Window(0, 24 * 60)


def test_the_declared_schema_holds_the_plans_values():
    schema = action_answers(None)["plan"].schema
    assert set(schema["required"]) == set(GOOD_ANSWER)
    times = schema["properties"]["browsing_start"]["enum"]
    assert len(times) == 48 and times[0] == "00:00" and times[-1] == "23:30"
    assert schema["properties"]["browsing_end"]["enum"][-1] == "24:00"
    for value in schema["properties"]["browsing_start"]["enum"]:  # every value the schema allows reads
        plan_from_answer({**GOOD_ANSWER, "browsing_start": value, "browsing_end": "24:00" if value != "00:00" else "23:30"})


@pytest.mark.parametrize("changes, problem", [
    ({"probability_of_liking": 130}, "probability of liking: 130 is outside 0-100"),
    ({"probability_of_liking": "often"}, "probability of liking: 'often' is not a number"),
    ({"browsing_start": "25:00"}, "25:00-21:30 is not a valid time period"),
    ({"browsing_end": "19:75"}, "not a valid time period"),
    ({"browsing_end": "19:00"}, "the period 19:00-19:00 is empty"),
    ({"posting_day": 8}, "posting day: 8 is outside 1-7"),
    ({"posting_day": 2.5}, "posting day: 2.5 is not a whole number"),
    ({"posts_per_week": -1}, "posts per week: -1 is outside 0-70"),
    ({"posts_per_week": 400}, "posts per week: 400 is outside 0-70"),
    ({"probability_of_forwarding": True}, "probability of forwarding: True is not a number"),
])
def test_malformed_plans_are_rejected(changes, problem):
    with pytest.raises(PlanFormatError) as info:
        plan_from_answer(json.loads(answer(**changes)))
    assert problem in str(info.value)
    with pytest.raises(PlanFormatError, match="missing key 'posts_per_week'"):
        plan_from_answer({k: v for k, v in GOOD_ANSWER.items() if k != "posts_per_week"})
    with pytest.raises(PlanFormatError, match="not a JSON object"):
        plan_from_answer([GOOD_ANSWER])


def test_activity_fraction_mapping():
    # alpha = 2, x_min = 1: the 99th percentile is x = 10 and reads 1; the rest in proportion
    assert full_activity_level(2.0, 1.0) == pytest.approx(10.0)
    assert activity_fraction(1.0) == pytest.approx(0.10)  # x_min
    assert activity_fraction(math.sqrt(2)) == pytest.approx(0.1414, abs=1e-4)  # the median agent
    assert activity_fraction(math.sqrt(10)) == pytest.approx(0.3162, abs=1e-4)  # the 90th percentile
    assert activity_fraction(10.0) == 1.0 and activity_fraction(25.0) == 1.0
    assert activity_fraction(2.0, alpha=1.0, x_min=0.5) == pytest.approx(2.0 / 50.0)  # x_0.99 = 0.5 * 100
    assert activity_fraction(1.0, quantile=0.75) == pytest.approx(0.5) and activity_fraction(3.0, quantile=0.75) == 1.0  # x_0.75 = 2
    assert activity_fraction(math.inf) == 1.0
    assert activity_fraction(0.0) == 0.01 and activity_fraction(-3) == 0.01 and activity_fraction(math.nan) == 0.01
    with pytest.raises(ValueError):
        full_activity_level(2.0, 1.0, quantile=1.0)


def test_activity_fraction_keeps_the_long_tail():
    """Zhou §3.2.3: "a few users are highly active and most users are low active"."""
    from townsquare.activity import sample_activity

    shown = np.array([activity_fraction(x) for x in sample_activity(np.random.default_rng(7), 20_000, 2.0, 1.0)])
    assert np.mean(shown <= 0.2) == pytest.approx(0.75, abs=0.01)  # P(x <= 2) = 1 - 2**-2
    assert np.mean(shown == 1.0) == pytest.approx(0.01, abs=0.003)
    assert np.median(shown) == pytest.approx(0.1414, abs=0.005)
    assert shown.min() >= 0.1  # the old 1 - exp(-x) showed every agent at 0.63 or more


def test_fallback_plans_are_drawn_per_agent_from_activity_and_random_stream():
    full = fallback_plan(1.0, np.random.default_rng([1, 0]))
    assert full.browse.length == 4 * 60 and full.posts_per_week == 7  # 1 + round(3a) hours; round(7a) posts
    assert 15 <= full.like <= 45 and 5 <= full.forward <= 15 and 2 <= full.comment <= 8  # 30a, 10a, 5a times [0.5, 1.5]
    low = fallback_plan(activity_fraction(1.0), np.random.default_rng([1, 0]))  # a = 0.1
    assert (low.browse.length, low.posts_per_week) == (60, 1) and low.like <= 5
    assert plan_from_answer(low.to_answer()) == low
    # the same agent and seed: the same plan; eight agents: eight different plans and browse windows
    assert fallback_plan(1.0, np.random.default_rng([1, 0])) == full
    plans = [fallback_plan(0.5, np.random.default_rng([1, agent])) for agent in range(8)]
    assert len(set(plans)) == 8 and len({p.browse for p in plans}) >= 6
    for plan in plans:
        assert 6 * 60 <= plan.browse.start <= 22 * 60 and 1 <= plan.post_day <= 7 and plan.post.length == 120


@pytest.mark.parametrize("percent, posts, expected", [
    (30, 10, 3), (25, 10, 3), (35, 10, 4), (5, 9, 0), (5, 10, 1), (0, 10, 0), (100, 7, 7), (12.5, 8, 1), (50, 0, 0),
])
def test_quotas_from_probabilities(percent, posts, expected):
    assert quota(percent, posts) == expected


def test_session_quotas():
    session = PlanSession(browse=True, posts_due=0, like=30, forward=10, comment=5)
    assert [session.quota(k, 10) for k in ("like", "reblog", "comment")] == [3, 1, 1]
    assert [session.quota(k, 4) for k in ("like", "reblog", "comment")] == [1, 0, 0]


def at(hour, minute=0, day=1):
    return START.replace(hour=hour, minute=minute) + timedelta(days=day - 1)


def test_browse_window_membership():
    evening = Window(19 * 60, 21 * 60 + 30)
    hourly = {h: in_window(evening, at(h), 60) for h in (18, 19, 20, 21, 22)}
    assert hourly == {18: False, 19: True, 20: True, 21: True, 22: False}  # 21:00-22:00 overlaps 21:00-21:30
    assert not in_window(evening, at(21, 30), 30) and in_window(evening, at(21, 0), 30)
    night = Window(22 * 60, 60)  # past midnight
    assert [in_window(night, at(h), 60) for h in (21, 22, 23, 0, 1)] == [False, True, True, True, False]
    assert in_window(night, at(0, 30, day=2), 15)
    short = Window(19 * 60 + 15, 19 * 60 + 45)  # shorter than a round: still met once a day
    assert [in_window(short, at(h), 60) for h in (18, 19, 20)] == [False, True, False]
    assert in_window(Window(0, 1440), at(13), 60)


def plan_with(post_day=1, window=Window(18 * 60, 20 * 60), per_week=4):
    return Plan(Window(19 * 60, 20 * 60), 30, 10, 5, post_day, window, per_week)


def test_weekly_posts_spread_over_the_posting_window():
    clock = Clock(START, 60)  # round 0 = Monday 08:00; 18:00 is round 10
    due = {r: posts_in_round(plan_with(), clock, r) for r in range(0, 24 * 14)}
    assert {r: n for r, n in due.items() if n} == {10: 2, 11: 2, 178: 2, 179: 2}  # day 1 of weeks 1 and 2
    assert posts_in_round(plan_with(per_week=3), clock, 10) == 1 and posts_in_round(plan_with(per_week=3), clock, 11) == 2
    assert posts_in_round(plan_with(per_week=0), clock, 10) == 0
    # day 3 = Wednesday of the first simulated week: rounds 58, 59
    assert {r for r in range(200) if posts_in_round(plan_with(post_day=3), clock, r)} == {58, 59}
    # a window running past midnight belongs to the day it starts on
    late = {r: posts_in_round(plan_with(window=Window(23 * 60, 60), per_week=3), clock, r) for r in range(24 * 7)}
    assert {r: n for r, n in late.items() if n} == {15: 1, 16: 2}  # 23:00 and 00:00


def test_daily_posting_mode_spreads_over_seven_days():
    clock = Clock(START, 60)
    due = {r: posts_in_round(plan_with(per_week=7), clock, r, daily=True) for r in range(24 * 7)}
    assert sum(due.values()) == 7
    assert {r for r, n in due.items() if n} == {11 + 24 * d for d in range(7)}  # 19:00 each day
    assert sum(posts_in_round(plan_with(per_week=3), clock, r, daily=True) for r in range(24 * 7)) == 3


def test_clock_start_mid_week_counts_weeks_from_the_start_day():
    # Thursday 2024-01-04 10:00 is round 0: day 1 is that Thursday
    clock = Clock(datetime(2024, 1, 4, 10), 30)
    rounds = [r for r in range(48 * 8) if posts_in_round(plan_with(per_week=4), clock, r)]
    assert rounds == [16, 17, 18, 19, 16 + 48 * 7, 17 + 48 * 7, 18 + 48 * 7, 19 + 48 * 7]
    assert Clock.from_step(datetime(2024, 1, 4, 18), 16, 30) == clock


# --------------------------------------------------------------------------- the planner component


def planner_world(rules, activity=1.0, **config):
    world = World([HIKER], scripted(rules), activity=activity)
    (agent,) = world.agents
    ctx = BuildContext(services=None, seed=0, agent=agent)
    agent.components["planner"] = build_activity_plan(ActivityPlanConfig(**config), ctx)
    return world, agent, agent.components["planner"]


def test_planner_parses_the_model_plan_and_decides_activity():
    world, agent, planner = planner_world({PLAN: answer(posting_day=1)})
    active = {r: asyncio.run(planner.is_active(world.ctx(agent, r))) for r in range(24)}
    # 08:00 + r hours: posting 18:00-20:00 (rounds 10, 11), browsing 19:00-21:30 (rounds 11-13)
    assert [r for r, on in active.items() if on] == [10, 11, 12, 13]
    assert world.recorder.purposes() == ["plan"]  # made once
    assert planner.get_state()["source"] == "llm"
    request = world.recorder.requests[0]
    assert request.json_schema == action_answers(None)["plan"].schema and request.temperature == 1.0
    prompt = request.messages[-1].content
    assert "Your activity level is 0.10" in prompt and "I love hiking in the mountains." in prompt
    session = asyncio.run(planner.session(world.ctx(agent, 10)))
    assert session == PlanSession(browse=False, posts_due=2, like=30, forward=10, comment=5)


def test_planner_repairs_once_then_falls_back():
    world, agent, planner = planner_world({PLAN: answer(posting_day=9), "That was not valid": GOOD})
    asyncio.run(planner.is_active(world.ctx(agent, 0)))
    assert planner.get_state()["source"] == "llm_repaired" and planner.plan == plan_from_answer(GOOD_ANSWER)
    repair = world.recorder.requests[1]
    assert repair.purpose == "plan.repair" and "posting day: 9 is outside 1-7" in repair.messages[-1].content

    world, agent, planner = planner_world({PLAN: "no idea", "That was not valid": "still no idea"}, activity=math.inf)
    failures = []
    world.llm.on_parse_failure = lambda request, answer, kind: failures.append((request.purpose, answer))
    ctx = world.ctx(agent, 0)
    asyncio.run(planner.is_active(ctx))
    state = planner.get_state()
    assert state["source"] == "fallback" and planner.plan == fallback_plan(1.0, np.random.default_rng([7, 0]))  # the agent's stream
    assert world.recorder.purposes() == ["plan", "plan.repair"]
    assert failures == [("plan", "still no idea")]  # recorded in llm_calls as a parse_failure


def test_planner_state_round_trips():
    world, agent, planner = planner_world({PLAN: GOOD})
    assert planner.get_state()["plan"] is None
    asyncio.run(planner.is_active(world.ctx(agent, 0)))
    state = json.loads(json.dumps(planner.get_state()))
    _, _, other = planner_world({PLAN: "unused"})
    other.set_state(state)
    assert other.get_state() == planner.get_state() and other.plan == planner.plan


def test_registration():
    (spec,) = activity_plan.townsquare_register_planners()
    assert (spec.name, spec.priority, spec.needs_llm, spec.slot) == ("activity_plan", 100, True, "planner")


def test_stochastic_quota_keeps_the_expected_count():
    import numpy as np

    rng = np.random.default_rng(0)
    draws = [quota(10, 4, rng) for _ in range(20_000)]  # 10% of a 4-post feed: 0.4 actions expected
    assert set(draws) == {0, 1}
    assert sum(draws) / len(draws) == pytest.approx(0.4, abs=0.01)
    assert [quota(30, 10, rng) for _ in range(50)] == [3] * 50  # whole numbers are exact
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    assert [quota(35, 10, a) for _ in range(20)] == [quota(35, 10, b) for _ in range(20)]  # reproducible
