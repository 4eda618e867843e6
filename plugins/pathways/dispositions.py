"""A model's dispositions at a study's decision points, each on the scale of the oracle setting it
mirrors (docs/oracle.md).

A decision point is a real prompt of the study's pathway, recorded from an oracle run
(``prompts/<study>.json``, made by ``python tools/pathway_prompts.py``), with what the recording
knew about it (``reference``: the event's details a relay could keep, the rater's own and
recalled scores, which page items meet the profile). The model under test answers the prompt as
an agent of the study would be asked it (same messages, labels or schema, token limit and
temperature); each answer is read on the disposition's scale:

- ``llm.news_importance`` (party, ``importance``): the rating 1-10 it gives a memory holding
  news of an event with a date or a time (the invitation); the mean rating with its 95 %
  Student-t interval.
- ``llm.relay_fidelity`` (party, ``dialogue.turn``): at a turn where the speaker holds someone
  else's news it has not yet told, an utterance that names the event (one of its words, e.g.
  "party") is a relay; it keeps the details when it says a day (the date, a weekday, or today,
  tonight, tomorrow), a clock time and the place (its first word, e.g. "Hobbs"). The share of
  relays that keep all three, with its Wilson interval; utterances that relay nothing are counted
  apart.
- ``llm.conformity_weight`` (conformity, ``recagent.conformity``): the new score s against the
  rater's last score o and the mean r of the opinions its memory shows (one per person, as the
  oracle reads them). The model is taken to hold o + w (r - o) plus normal noise (sd sigma) and
  to answer the whole score it rounds to (1 and 10 taking everything beyond): w and sigma by
  maximum likelihood of that interval-censored regression, w's 95 % interval where the profile
  likelihood ratio stays under chi-squared(1) = 3.84. Rounding is in the model because a least
  squares slope of s - o on r - o is biased by it (the oracle at w = 0.7 reads 0.775 [0.735,
  0.814] on the shipped prompts); for a rater without noise, the oracle, the interval is the
  set of w its answers allow. w = 0 keeps its own score, 1 takes the others' mean.
- ``llm.follow_page`` (cocoon, ``recagent.page``): on pages whose first item meets none of the
  profile's interests and another does (no title heard of is listed), a watch of the first item
  is from the page, a watch of an item that meets the interests from the interests; the share
  from the page among those two, with its Wilson interval (other choices counted apart).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from townsquare.api import AnswerFormat, LLMRequest, Message
from townsquare.lib.stats import Interval, mean_interval, share_interval

_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|jun(?:e)?|jul(?:y)?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
#: a day: a date (February 14th, 14 Feb, the 14th), a weekday, or a day named relative to today
DAY = re.compile(rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b"
                 r"|\bthe\s+\d{1,2}(?:st|nd|rd|th)\b|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(?:today|tonight|tomorrow)\b", re.I)
#: a clock time: 5pm, 5 p.m., 17:00, 5 o'clock, noon
CLOCK = re.compile(r"\b\d{1,2}(?::\d{2})?\s*[ap]\.?\s*m\b|\b\d{1,2}:\d{2}\b|\b\d{1,2}\s+o'?clock\b|\b(?:noon|midnight)\b", re.I)
STOP = frozenset("a an the and or of to in on at for with from by is are be his her their its day".split())


@dataclass(frozen=True)
class DecisionPoint:
    """One recorded prompt at a decision point of a study's pathway: the request as the study's
    agent sent it, and what the recording knew about it (``reference``)."""

    study: str
    disposition: str
    request: LLMRequest
    reference: dict[str, Any] = field(default_factory=dict)
    agent: str = ""
    round: int = 0

    @classmethod
    def from_json(cls, study: str, data: dict[str, Any]) -> "DecisionPoint":
        request = LLMRequest(messages=tuple(Message(m["role"], m["content"]) for m in data["messages"]),
                             labels=tuple(data["labels"]) if data.get("labels") else None, json_schema=data.get("json_schema"),
                             answer_prefixes=tuple(data["answer_prefixes"]) if data.get("answer_prefixes") else None,
                             max_tokens=int(data.get("max_tokens", 256)), temperature=float(data.get("temperature", 0.7)),
                             purpose=data["purpose"])
        return cls(study=study, disposition=data["disposition"], request=request, reference=dict(data.get("reference") or {}),
                   agent=str(data.get("agent", "")), round=int(data.get("round", 0)))

    def answer_format(self) -> AnswerFormat | None:
        """How the answer is held to its format, as the study asks it (None: free text)."""
        r = self.request
        if r.labels:
            return AnswerFormat(r.purpose, labels=r.labels)
        if r.json_schema is not None:
            return AnswerFormat(r.purpose, schema=r.json_schema)
        if r.answer_prefixes:
            return AnswerFormat(r.purpose, prefixes=r.answer_prefixes)
        return None


@dataclass
class Reading:
    """One answer read on a disposition's scale: ``value`` None when the answer says nothing on
    it (no relay, another item watched) or could not be read (``unreadable``)."""

    value: Any
    answer: str
    unreadable: bool = False


@dataclass
class Measured:
    """A disposition measured over a study's decision points."""

    name: str
    value: float
    interval: Interval
    prompts: int
    #: answers used / answers that said nothing on the scale / answers that could not be read
    used: int
    aside: int
    unreadable: int
    about: str
    scale: str

    def to_json(self) -> dict[str, Any]:
        def number(x: float) -> float | None:  # None: undefined, or not bounded by the answers (an infinite end)
            return None if not math.isfinite(x) else round(x, 6)

        return {"name": self.name, "value": number(self.value), "interval": [number(self.interval.low), number(self.interval.high)],
                "prompts": self.prompts, "used": self.used, "aside": self.aside, "unreadable": self.unreadable,
                "about": self.about, "scale": self.scale}


# --------------------------------------------------------------------------- reading answers


def read_importance(point: DecisionPoint, value: Any) -> Any:
    return int(value)


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2 and w not in STOP}


def keeps_details(utterance: str, place: str) -> dict[str, bool]:
    """Which of an event's details an utterance says: a day, a clock time, the place (its first word)."""
    first = (place.split() or [""])[0].lower()
    return {"day": bool(DAY.search(utterance)), "time": bool(CLOCK.search(utterance)),
            "place": bool(first) and re.search(rf"\b{re.escape(first)}\b", utterance.lower()) is not None}


def read_relay(point: DecisionPoint, value: Any) -> Any:
    utterance = str(value.get("utterance", "")) if isinstance(value, dict) else str(value or "")
    if not words(utterance) & words(point.reference.get("event", "")):
        return None  # it does not pass the news on
    return all(keeps_details(utterance, point.reference.get("place", "")).values())


def read_score(point: DecisionPoint, value: Any) -> Any:
    return int(value)


def read_watch(point: DecisionPoint, value: Any) -> Any:
    match = re.fullmatch(r"watch (\d+)", str(value).strip())
    if not match:
        return None
    n = int(match.group(1))
    if n == int(point.reference["top"]):
        return True
    return False if n in point.reference.get("interests", ()) else None


# --------------------------------------------------------------------------- summaries


def mean_of(points: Sequence[DecisionPoint], readings: Sequence[Reading]) -> Interval:
    return mean_interval([float(r.value) for r in readings if r.value is not None])


def share_of(points: Sequence[DecisionPoint], readings: Sequence[Reading]) -> Interval:
    found = [bool(r.value) for r in readings if r.value is not None]
    return share_interval(sum(found), len(found))


def normal_cdf(z: Any) -> Any:
    """Phi(z), elementwise (numpy has no erf): erfc by its Chebyshev fit (Numerical Recipes'
    erfcc, fractional error under 1.2e-7)."""
    import numpy as np

    x = -np.asarray(z, dtype=float) / math.sqrt(2)
    a = np.abs(x)
    t = 1 / (1 + 0.5 * a)
    poly = -a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(poly)
    return 0.5 * np.where(x >= 0, erfc, 2 - erfc)


#: a tie (a latent score exactly between two whole scores) may round either way
TIE = 1e-6


def rounded_slope(own: Sequence[float], recalled: Sequence[float], scores: Sequence[int], *, lowest: int = 1, highest: int = 10,
                  grid: Any = None) -> Interval:
    """w of "the model holds own + w (recalled - own) + N(0, sigma^2) and answers the whole score
    it rounds to" (see the module docstring), with its 95 % profile-likelihood interval, over
    ``grid`` (default -2 to 3 in steps of 0.005; sigma from 1e-8 to 10 in steps of 10^0.2). On a
    plateau of the likelihood (a rater without noise) the value is the plateau's middle; where the
    likelihood is highest, or still within the interval, at an end of the grid, the answers do not
    bound w on that side: the value or the interval's end is -inf or inf. ``sd`` is sigma."""
    import numpy as np

    n = len(scores)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, 0)
    o, d, s = (np.asarray(v, dtype=float) for v in (own, np.subtract(recalled, own), scores))
    low = np.where(s <= lowest, -np.inf, s - 0.5 - TIE)
    high = np.where(s >= highest, np.inf, s + 0.5 + TIE)
    ws = np.linspace(-2, 3, 1001) if grid is None else np.asarray(grid, dtype=float)
    sigmas = np.logspace(-8, 1, 46)

    def loglik(w: Any) -> Any:
        """Log-likelihood at each of the w values ``w`` (rows) and each sigma (columns)."""
        mu = o[None, :] + np.asarray(w)[:, None] * d[None, :]
        z_high = (high[None, None, :] - mu[:, None, :]) / sigmas[None, :, None]
        z_low = (low[None, None, :] - mu[:, None, :]) / sigmas[None, :, None]
        return np.log(np.clip(normal_cdf(z_high) - normal_cdf(z_low), 1e-300, 1.0)).sum(axis=2)

    profile = np.concatenate([loglik(ws[i:i + 50]).max(axis=1) for i in range(0, len(ws), 50)])  # best sigma at each w
    best = profile.max()
    top = ws[profile >= best - 1e-9]
    inside = ws[2 * (best - profile) <= 3.841459]
    middle = round(float((top.min() + top.max()) / 2), 9)
    sigma = float(sigmas[int(np.argmax(loglik([middle])[0]))])
    # where the likelihood still rises at the end of the grid, the answers do not bound w there
    value = -math.inf if top.min() <= ws[0] else math.inf if top.max() >= ws[-1] else middle
    low = -math.inf if inside.min() <= ws[0] else float(inside.min())
    high = math.inf if inside.max() >= ws[-1] else float(inside.max())
    return Interval(value, low, high, sigma, n)


def conformity_of(points: Sequence[DecisionPoint], readings: Sequence[Reading]) -> Interval:
    used = [(p.reference["own"], p.reference["recalled"], r.value) for p, r in zip(points, readings) if r.value is not None]
    return rounded_slope([u[0] for u in used], [u[1] for u in used], [u[2] for u in used])


@dataclass(frozen=True)
class Disposition:
    name: str
    study: str
    about: str
    scale: str
    read: Callable[[DecisionPoint, Any], Any]
    summarise: Callable[[Sequence[DecisionPoint], Sequence[Reading]], Interval]


DISPOSITIONS: dict[str, Disposition] = {d.name: d for d in (
    Disposition("llm.news_importance", "party", "the importance it gives a memory holding news of a dated event", "1-10",
                read_importance, mean_of),
    Disposition("llm.relay_fidelity", "party", "the share of its relays of someone else's news that keep day, time and place",
                "0-1", read_relay, share_of),
    Disposition("llm.conformity_weight", "conformity", "how far its new score moves from its own toward the opinions it recalls",
                "0 keeps its own, 1 takes theirs", read_score, conformity_of),
    Disposition("llm.follow_page", "cocoon", "the share of its watches taken from the top of the page rather than from its interests",
                "0-1", read_watch, share_of),
)}


def measure(name: str, points: Sequence[DecisionPoint], answers: Sequence[Any]) -> Measured:
    """Read each answer (its parsed value; ``None`` where it fell back unparsed) on the
    disposition's scale and summarise them."""
    disposition = DISPOSITIONS[name]
    readings = []
    for point, value in zip(points, answers):
        if value is None:
            readings.append(Reading(None, "", unreadable=True))
            continue
        try:
            readings.append(Reading(disposition.read(point, value), str(value)))
        except (ValueError, TypeError, KeyError):
            readings.append(Reading(None, str(value), unreadable=True))
    interval = disposition.summarise(points, readings)
    unreadable = sum(r.unreadable for r in readings)
    used = sum(r.value is not None for r in readings)
    return Measured(name, interval.mean, interval, len(points), used, len(readings) - used - unreadable, unreadable,
                    disposition.about, disposition.scale)
