"""Zhou et al.'s activity plan (§3.1.3, appendix table 11) as data: reading the model's answer,
the fallback plan, time windows and action quotas. Not a plugin; ``activity_plan`` builds on it.

The plan has the paper's six items, asked for as one JSON object (declared in
``prompts/actions.toml``, ``[answers.plan]``, so the LLM layer holds the model to it)::

    {"browsing_start": "19:00", "browsing_end": "21:30", "probability_of_liking": 30,
     "probability_of_forwarding": 10, "probability_of_commenting": 5, "posting_day": 3,
     "posting_start": "18:00", "posting_end": "20:00", "posts_per_week": 4}

which :meth:`Plan.text` writes in the paper's own lines ("Browsing time period: 19:00-21:30",
..., "Posting time period: day 3-18:00-20:00", "Frequency of posting: 4 times per week").
:func:`plan_from_answer` checks it (times ``HH:MM`` with ``24:00`` allowed as an end, a window
with start = end is empty and rejected while ``00:00-24:00`` is the whole day, percentages
0-100, ``day`` 1-7, a weekly frequency from 0 to a cap); a window whose end is before its start
runs past midnight (``22:00-01:00``).

Where the paper is silent, we choose:

* "day x" is the x-th day of the simulated week. Simulated weeks are counted from midnight of
  the day the clock starts (``clock.start``), so day 1 is the first simulated day; with the
  default start (Monday 2024-01-01) day x is also the ISO weekday. ``activity_plan`` can
  instead read the posting period as a daily one (``post_days = "daily"``).
* A round takes part in a window when the round's time span ``[now, now + minutes_per_round)``
  overlaps it, so a window shorter than a round is not missed.
* Probabilities become quotas per browse session (one active round's feed): ``x = p / 100 *
  posts browsed`` rounded stochastically with the agent's generator, ``floor(x)`` plus one with
  probability ``x - floor(x)``, so the expected number of actions is exactly ``x`` (see
  :func:`quota`). The paper says only that it converts the probabilities into numbers of
  actions (§3.1.3); the agent never exceeds them.
* The weekly posts are spread evenly over the rounds of the week's posting windows, in order:
  slot ``i`` of ``n`` gets ``floor((i + 1) f / n) - floor(i f / n)`` of the ``f`` posts.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

MINUTES_PER_DAY = 24 * 60


class PlanFormatError(ValueError):
    """A plan answer that does not fit the format; ``problems`` says what is wrong, per line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True)
class Window:
    """A daily time window in minutes after midnight: ``start`` in [0, 1440), ``end`` in
    (0, 1440]; ``end <= start`` means it runs past midnight."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start if self.end > self.start else self.end + MINUTES_PER_DAY - self.start

    def text(self) -> str:
        return f"{_clock(self.start)}-{_clock(self.end)}"


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


@dataclass(frozen=True)
class Plan:
    """A parsed plan. Probabilities are percentages (0-100)."""

    browse: Window
    like: float
    forward: float
    comment: float
    post_day: int
    post: Window
    posts_per_week: int

    def text(self) -> str:
        """The plan in the paper's format."""
        return "\n".join([
            f"Browsing time period: {self.browse.text()}",
            f"Probability of liking: {self.like:g}%",
            f"Probability of forwarding: {self.forward:g}%",
            f"Probability of commenting: {self.comment:g}%",
            f"Posting time period: day {self.post_day}-{self.post.text()}",
            f"Frequency of posting: {self.posts_per_week} times per week",
        ])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_answer(self) -> dict[str, Any]:
        """The plan as the model answers it (the inverse of :func:`plan_from_answer`)."""
        return {
            "browsing_start": _clock(self.browse.start), "browsing_end": _clock(self.browse.end),
            "probability_of_liking": self.like, "probability_of_forwarding": self.forward,
            "probability_of_commenting": self.comment, "posting_day": self.post_day,
            "posting_start": _clock(self.post.start), "posting_end": _clock(self.post.end),
            "posts_per_week": self.posts_per_week,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Plan":
        return cls(
            browse=Window(**data["browse"]), like=float(data["like"]), forward=float(data["forward"]),
            comment=float(data["comment"]), post_day=int(data["post_day"]), post=Window(**data["post"]),
            posts_per_week=int(data["posts_per_week"]),
        )


# --------------------------------------------------------------------------- reading the answer

_TIME = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*$")
#: the answer's keys, in the paper's order
PLAN_KEYS = ("browsing_start", "browsing_end", "probability_of_liking", "probability_of_forwarding",
             "probability_of_commenting", "posting_day", "posting_start", "posting_end", "posts_per_week")


def _minutes(text: Any, *, end: bool) -> int | None:
    match = _TIME.match(str(text))
    if match is None:
        return None
    h, m = int(match.group(1)), int(match.group(2))
    if end and h == 24 and m == 0:
        return MINUTES_PER_DAY
    if 0 <= h <= 23 and 0 <= m <= 59:
        return h * 60 + m
    return None


def _window(start_text: Any, end_text: Any, label: str, problems: list[str]) -> Window | None:
    start, end = _minutes(start_text, end=False), _minutes(end_text, end=True)
    if start is None or end is None:
        problems.append(f"{label}: {start_text}-{end_text} is not a valid time period (HH:MM-HH:MM)")
        return None
    if start == end:  # 00:00-24:00 is the whole day, not an empty period
        problems.append(f"{label}: the period {start_text}-{end_text} is empty")
        return None
    return Window(start, end)


def _number(value: Any, label: str, low: float, high: float, problems: list[str], whole: bool = False) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and value != int(value)):
        problems.append(f"{label}: {value!r} is not a {'whole ' if whole else ''}number")
        return None
    if not low <= value <= high:
        problems.append(f"{label}: {value:g} is outside {low:g}-{high:g}")
        return None
    return float(value)


def plan_from_answer(value: Any, max_posts_per_week: int = 70) -> Plan:
    """The plan in the model's JSON answer; raises :class:`PlanFormatError` (a ``ValueError``,
    so the LLM layer repairs once) listing every problem."""
    if not isinstance(value, dict):
        raise PlanFormatError(["the plan is not a JSON object"])
    missing = [key for key in PLAN_KEYS if key not in value]
    if missing:
        raise PlanFormatError([f"missing key {key!r}" for key in missing])
    problems: list[str] = []
    browse = _window(value["browsing_start"], value["browsing_end"], "browsing time period", problems)
    like, forward, comment = (_number(value[f"probability_of_{kind}"], f"probability of {kind}", 0, 100, problems)
                              for kind in ("liking", "forwarding", "commenting"))
    day = _number(value["posting_day"], "posting day", 1, 7, problems, whole=True)
    post = _window(value["posting_start"], value["posting_end"], "posting time period", problems)
    frequency = _number(value["posts_per_week"], "posts per week", 0, max_posts_per_week, problems, whole=True)
    if problems or None in (browse, like, forward, comment, day, post, frequency):
        raise PlanFormatError(problems)
    return Plan(browse, like, forward, comment, int(day), post, int(frequency))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- activity and fallback


#: The Pareto quantile read as "full activity level" (1) in the plan prompt; our choice.
FULL_ACTIVITY_QUANTILE = 0.99


def full_activity_level(alpha: float, x_min: float, quantile: float = FULL_ACTIVITY_QUANTILE) -> float:
    """The Pareto level at ``quantile``: ``x_q = x_min * (1 - q) ** (-1 / alpha)`` (10 for
    alpha = 2, x_min = 1, q = 0.99)."""
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    return x_min * (1.0 - quantile) ** (-1.0 / alpha)


def activity_fraction(level: float, alpha: float = 2.0, x_min: float = 1.0,
                      quantile: float = FULL_ACTIVITY_QUANTILE) -> float:
    """The activity level shown to the plan prompt, in (0, 1] ("full activity level is 1";
    Zhou et al. §3.2.3 and appendix C, table 11).

    The paper draws a Pareto level (eq. 2, alpha = 2 in §4.1) so that "a few users are highly
    active and most users are low active" (§3.2.3), and feeds it to the plan prompt without
    saying how it maps the draw into (0, 1]. We keep it proportional: ``a = min(1, x / x_q)``
    with ``x_q`` the level at the ``quantile`` (default 0.99) of the same Pareto distribution
    (:func:`full_activity_level`). A linear map of a Pareto variable is Pareto, so the long tail
    survives: with alpha = 2, x_min = 1 an agent at x_min reads 0.10, the median agent
    (x = sqrt 2) 0.14, the 90th percentile (x = sqrt 10) 0.32, and only the top 1% read 1;
    three agents in four read at most 0.20, and an agent twice as active reads twice as high.
    (The earlier ``1 - exp(-x)`` showed every agent at least 0.63 active: the tail was gone.)
    ``x = inf`` (``activity.model = "always"``) reads 1; values are clipped to [0.01, 1] so
    the prompt never reads 0.
    """
    if math.isnan(level):
        return 0.01
    if math.isinf(level):
        return 1.0 if level > 0 else 0.01
    share = max(level, 0.0) / full_activity_level(alpha, x_min, quantile)
    return min(1.0, max(0.01, share))


def _half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


def fallback_plan(activity: float, rng: Any) -> Plan:
    """The plan used when the model's answer cannot be read even after one repair request:
    drawn for the agent from its activity fraction ``a`` and its own random stream ``rng``
    (so no two agents share it by construction, and a seed gives the same one).

    Browse for ``1 + round(3a)`` hours from a half hour drawn between 06:00 and 22:00; like,
    forward, comment with ``round(30a u)``, ``round(10a u)``, ``round(5a u)`` percent for one
    draw ``u`` uniform in [0.5, 1.5]; post ``max(1, round(7a))`` times a week on a day drawn
    from 1-7, in a two-hour window from a half hour drawn between 07:00 and 21:00. (Our numbers:
    the paper has no fallback.)
    """
    a = min(1.0, max(0.0, activity))
    hours = 1 + _half_up(3 * a)
    start = 6 * 60 + 30 * int(rng.integers(0, 33))
    browse = Window(start, (start + hours * 60 - 1) % MINUTES_PER_DAY + 1)
    u = float(rng.uniform(0.5, 1.5))
    day = int(rng.integers(1, 8))
    post_start = 7 * 60 + 30 * int(rng.integers(0, 29))
    return Plan(browse, float(_half_up(30 * a * u)), float(_half_up(10 * a * u)), float(_half_up(5 * a * u)), day,
                Window(post_start, post_start + 120), max(1, _half_up(7 * a)))


def quota(percent: float, posts: int, rng: Any = None) -> int:
    """How many of ``posts`` browsed posts may get an action done with ``percent`` probability
    (Zhou §3.1.3: "we convert the action probability into the number of actions").

    The paper does not say how a fractional number of actions rounds. With ``rng`` (the agent's
    generator) it rounds stochastically: ``floor(x)`` plus one with probability ``x - floor(x)``,
    so the expected number is exactly ``percent / 100 * posts``. A fixed rounding would make
    every probability under ``1 / (2 * posts)`` impossible (10% of a 4-post feed: never).
    Without ``rng``: half up, ``floor(x + 0.5)`` (30% of 10 -> 3, 35% of 10 -> 4).
    """
    exact = percent * posts / 100  # integer arithmetic first, so 35% of 10 is exactly 3.5
    if rng is None:
        return max(0, _half_up(exact))
    whole = math.floor(exact)
    return max(0, whole + int(rng.random() < exact - whole))


# --------------------------------------------------------------------------- windows in simulated time


def _occurrences(window: Window, first_day: int, last_day: int, day0: datetime):
    """(day index, start, end) of the window on days ``first_day..last_day``."""
    for day in range(first_day, last_day + 1):
        start = day0 + timedelta(days=day, minutes=window.start)
        yield day, start, start + timedelta(minutes=window.length)


def _day_index(moment: datetime, day0: datetime) -> int:
    return (moment - day0) // timedelta(days=1)


def in_window(window: Window, now: datetime, minutes_per_round: int) -> bool:
    """True when the round ``[now, now + minutes_per_round)`` overlaps the window on some day."""
    end = now + timedelta(minutes=minutes_per_round)
    day0 = now.replace(hour=0, minute=0, second=0, microsecond=0)
    last = _day_index(end, day0)
    return any(start < end and now < stop for _, start, stop in _occurrences(window, -1, last, day0))


@dataclass(frozen=True)
class Clock:
    """The simulated clock as a component sees it: ``start`` is round 0's time."""

    start: datetime
    minutes_per_round: int

    @classmethod
    def from_step(cls, now: datetime, round: int, minutes_per_round: int) -> "Clock":
        return cls(now - timedelta(minutes=round * minutes_per_round), minutes_per_round)

    @property
    def day0(self) -> datetime:
        return self.start.replace(hour=0, minute=0, second=0, microsecond=0)

    def round_at(self, moment: datetime) -> float:
        return (moment - self.start) / timedelta(minutes=self.minutes_per_round)

    def rounds_overlapping(self, start: datetime, end: datetime) -> range:
        """Rounds whose span overlaps ``[start, end)`` (round numbers may be negative)."""
        first = math.floor(self.round_at(start))
        last = math.ceil(self.round_at(end)) - 1
        return range(first, last + 1)


def posts_in_round(plan: Plan, clock: Clock, round: int, daily: bool = False) -> int:
    """Posts due in ``round``: the week's ``plan.posts_per_week`` spread over the rounds of that
    week's posting windows (one window on day ``plan.post_day`` of each simulated week, or one
    every day when ``daily``)."""
    if plan.posts_per_week <= 0:
        return 0
    m = clock.minutes_per_round
    begin = clock.start + timedelta(minutes=round * m)
    day0 = clock.day0
    first, last = _day_index(begin, day0) - 1, _day_index(begin + timedelta(minutes=m), day0)
    due = 0
    weeks_done = set()
    for day, start, stop in _occurrences(plan.post, first, last, day0):
        if not (daily or day % 7 == plan.post_day - 1) or not (start < begin + timedelta(minutes=m) and begin < stop):
            continue
        week = day // 7
        if week in weeks_done:
            continue
        weeks_done.add(week)
        days = range(7 * week, 7 * week + 7) if daily else [7 * week + plan.post_day - 1]
        slots = sorted({r for d in days for _, s, e in _occurrences(plan.post, d, d, day0) for r in clock.rounds_overlapping(s, e)})
        i, n, f = slots.index(round), len(slots), plan.posts_per_week
        due += (i + 1) * f // n - i * f // n
    return due


@dataclass(frozen=True)
class PlanSession:
    """What the plan says about one round, as a policy reads it."""

    browse: bool
    posts_due: int
    like: float = 100.0
    forward: float = 100.0
    comment: float = 100.0

    def quota(self, kind: str, posts: int, rng: Any = None) -> int:
        """The most ``kind`` actions (like, reblog, comment) on ``posts`` browsed posts."""
        percent = {"like": self.like, "reblog": self.forward, "comment": self.comment}[kind]
        return quota(percent, posts, rng)
