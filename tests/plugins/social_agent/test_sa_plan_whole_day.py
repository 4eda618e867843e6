"""A plan window of the whole day, ``00:00-24:00``: accepted, as long as a
day, open at every hour, and written back the same; ``HH:MM-HH:MM`` with equal ends stays empty."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from townsquare.plugins.social_agent.planning.plan_parsing import Clock, PlanFormatError, Window, in_window, plan_from_answer, posts_in_round


def answer(browse: str, post: str) -> dict:
    (b0, b1), (p0, p1) = browse.split("-"), post.split("-")
    return {"browsing_start": b0, "browsing_end": b1, "probability_of_liking": 30, "probability_of_forwarding": 10,
            "probability_of_commenting": 5, "posting_day": 1, "posting_start": p0, "posting_end": p1, "posts_per_week": 24}


def test_the_whole_day_is_a_window():
    plan = plan_from_answer(answer("00:00-24:00", "00:00-24:00"))
    assert plan.browse == plan.post == Window(0, 24 * 60) and plan.browse.length == 24 * 60
    assert plan.text().splitlines()[0] == "Browsing time period: 00:00-24:00"
    assert plan.to_answer() == answer("00:00-24:00", "00:00-24:00")
    monday = datetime(2024, 1, 1)
    assert all(in_window(plan.browse, monday + timedelta(hours=h), 60) for h in range(48))
    clock = Clock(monday, 60)
    assert sum(posts_in_round(plan, clock, r) for r in range(24)) == 24  # one a round on day 1
    assert sum(posts_in_round(plan, clock, r) for r in range(24, 24 * 7)) == 0


@pytest.mark.parametrize("window", ["12:00-12:00", "00:00-00:00"])
def test_equal_ends_are_still_empty(window):
    with pytest.raises(PlanFormatError, match=f"browsing time period: the period {window} is empty"):
        plan_from_answer(answer(window, "18:00-20:00"))
