"""A plan window of the whole day, ``00:00-24:00``: accepted, as long as a
day, open at every hour, and written back the same; ``HH:MM-HH:MM`` with equal ends stays empty."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from townsquare.plugins.social_agent.planning.plan_parsing import Clock, PlanFormatError, Window, in_window, parse_plan, posts_in_round

PLAN = """Browsing time period: {browse}
Probability of liking: 30%
Probability of forwarding: 10%
Probability of commenting: 5%
Posting time period: day 1-{post}
Frequency of posting: 24 times per week"""


def test_the_whole_day_is_a_window():
    plan = parse_plan(PLAN.format(browse="00:00-24:00", post="00:00-24:00"))
    assert plan.browse == plan.post == Window(0, 24 * 60) and plan.browse.length == 24 * 60
    assert plan.text() == PLAN.format(browse="00:00-24:00", post="00:00-24:00")
    monday = datetime(2024, 1, 1)
    assert all(in_window(plan.browse, monday + timedelta(hours=h), 60) for h in range(48))
    clock = Clock(monday, 60)
    assert sum(posts_in_round(plan, clock, r) for r in range(24)) == 24  # one a round on day 1
    assert sum(posts_in_round(plan, clock, r) for r in range(24, 24 * 7)) == 0


@pytest.mark.parametrize("window", ["12:00-12:00", "00:00-00:00"])
def test_equal_ends_are_still_empty(window):
    with pytest.raises(PlanFormatError, match="Browsing time period: the period is empty"):
        parse_plan(PLAN.format(browse=window, post="18:00-20:00"))
