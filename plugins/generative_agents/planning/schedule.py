"""Park et al.'s plans as data (§4.3): reading the model's JSON and repairing durations.

Not a plugin: ``day_plan`` builds on it. Three levels, each asked for as JSON of a schema
declared here, beside the prompts' names (:data:`TIMED_ITEM`, :func:`plan_schema`,
:data:`SCHEDULE_SCHEMA`, :func:`actions_schema`):

* the day in broad strokes: ``{"plan": [{"time": "7:00 am", "activity": "..."}, ...]}``
  (:func:`read_strokes`); a time may be missing or unreadable (the stroke is then untimed);
* an hourly schedule: ``{"schedule": [{"time": "8:00 am", "activity": "..."}, ...]}``
  (:func:`read_schedule`); each entry runs until the next one's time (the last one for an
  hour), and a span longer than an hour is cut into hour chunks;
* a chunk in actions of 5-15 minutes: ``{"actions": [{"action": "...", "minutes": 10}, ...]}``
  (:func:`read_actions`).

Times are read leniently (``8:00 am``, ``8am``, ``20:30``, ``noon``, ``a.m.``); an item without
what it needs is skipped. :func:`fit_durations` turns whatever durations the model wrote into a
valid decomposition of the chunk (each in [lo, hi], summing to the chunk's length) by a fixed
procedure documented there, so tests can compute its result by hand; the caller records a
``parse_failure`` whenever it had to change anything.

Times are minutes after midnight of the simulated day.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

MINUTES_PER_DAY = 24 * 60
#: the longest text kept for one item (a stroke, an hour, an action): prompts that show a plan stay bounded
TEXT_CHARS = 200

_CLOCK = r"(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s*m\b\.?|(\d{1,2}):(\d{2})(?!\s*[ap]\.?\s*m)|\b(noon|midnight)\b"
_TIME = re.compile(_CLOCK, re.I)


@dataclass
class Stroke:
    """One item of the day's broad plan; ``minute`` is its time when the model gave one."""

    text: str
    minute: int | None = None


@dataclass
class Step:
    """A 5-15 minute action."""

    start: int
    minutes: int
    text: str

    @property
    def end(self) -> int:
        return self.start + self.minutes


@dataclass
class Chunk:
    """A part of the hourly schedule, ``[start, end)``; ``steps`` once decomposed."""

    start: int
    end: int
    text: str
    steps: list[Step] | None = None

    @property
    def minutes(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Chunk":
        steps = data.get("steps")
        return cls(int(data["start"]), int(data["end"]), str(data["text"]),
                   None if steps is None else [Step(int(s["start"]), int(s["minutes"]), str(s["text"])) for s in steps])


@dataclass
class Fit:
    """Durations fitted to a chunk, and what had to change (empty: the model's were valid)."""

    minutes: list[int]
    texts: list[str]
    changes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- times


def clock_minutes(match: re.Match, offset: int = 0) -> int | None:
    """Minutes after midnight of a :data:`_CLOCK` match (groups from ``offset``); None if invalid."""
    g = match.groups()[offset:offset + 6]
    if g[5]:
        return 12 * 60 if g[5].lower() == "noon" else 0
    if g[2]:  # 12-hour clock
        hour, minute = int(g[0]), int(g[1] or 0)
        if not 1 <= hour <= 12 or minute > 59:
            return None
        return (hour % 12 + (12 if g[2].lower() == "p" else 0)) * 60 + minute
    hour, minute = int(g[3]), int(g[4])
    if hour == 24 and minute == 0:
        return MINUTES_PER_DAY
    return hour * 60 + minute if hour <= 23 and minute <= 59 else None


def clock_text(minute: int) -> str:
    """``7:05 am``, ``12:00 pm``, ``12:00 am`` (the format the prompts show)."""
    minute %= MINUTES_PER_DAY
    hour, rest = divmod(minute, 60)
    return f"{(hour % 12) or 12}:{rest:02d} {'am' if hour < 12 else 'pm'}"


def minutes_of(value: Any) -> int | None:
    """Minutes after midnight of a time the model wrote (``"7:00 am"``, ``"19:30"``, ``"noon"``),
    or None when none can be read."""
    match = _TIME.search(str(value or ""))
    return clock_minutes(match) if match else None


def _text(value: Any) -> str:
    return " ".join(str(value or "").replace("**", "").split()).strip(" .")[:TEXT_CHARS]


def _items(value: Any, key: str) -> list[Any]:
    items = value.get(key) if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ValueError(f'expected {{"{key}": [...]}}')
    return items


# --------------------------------------------------------------------------- reading JSON

#: a time as the prompts show it (:func:`clock_text`): ``7:00 am``, ``12:30 pm``
TIME_PATTERN = r"^(1[0-2]|[1-9]):[0-5][0-9] (am|pm)$"
#: an activity or action: words, starting with a letter, no clock times or JSON in it (a backend
#: that enforces patterns, llama.cpp's grammar, keeps a small model from writing "20: Friday: 8:30:40")
ACTIVITY_PATTERN = r"^[A-Za-z][A-Za-z0-9,.'&()-]* [A-Za-z0-9 ,.'&()-]{1,150}$"
ACTIVITY: dict[str, Any] = {"type": "string", "pattern": ACTIVITY_PATTERN}
#: one timed entry of a plan or a schedule
TIMED_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {"time": {"type": "string", "pattern": TIME_PATTERN, "description": "when it starts, e.g. 7:00 am"},
                   "activity": ACTIVITY},
    "required": ["time", "activity"],
}
#: the hourly schedule and a re-plan
SCHEDULE_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"schedule": {"type": "array", "items": TIMED_ITEM, "minItems": 1}},
    "required": ["schedule"],
}


def plan_schema(fewest: int, most: int) -> dict[str, Any]:
    """The day in broad strokes: between ``fewest`` and ``most`` timed entries."""
    return {"type": "object",
            "properties": {"plan": {"type": "array", "items": TIMED_ITEM, "minItems": fewest, "maxItems": most}},
            "required": ["plan"]}


def actions_schema(lo: int, hi: int) -> dict[str, Any]:
    """A chunk's actions, each of ``lo`` to ``hi`` minutes."""
    item = {"type": "object", "properties": {"action": ACTIVITY,
                                             "minutes": {"type": "integer", "minimum": lo, "maximum": hi}},
            "required": ["action", "minutes"]}
    return {"type": "object", "properties": {"actions": {"type": "array", "items": item, "minItems": 1}},
            "required": ["actions"]}


def read_strokes(value: Any) -> list[Stroke]:
    """The strokes of a ``{"plan": [...]}`` answer (entries without an activity skipped); raises
    ValueError when there is no list."""
    strokes = []
    for item in _items(value, "plan"):
        if isinstance(item, dict) and _text(item.get("activity")):
            strokes.append(Stroke(_text(item["activity"]), minutes_of(item.get("time"))))
        elif isinstance(item, str) and _text(item):
            match = _TIME.search(item)
            strokes.append(Stroke(_text(item), clock_minutes(match) if match else None))
    return strokes


def read_timed(value: Any, key: str = "schedule") -> dict[int, str]:
    """``start minute -> activity`` of a ``{"schedule": [...]}`` answer: entries without a
    readable time or an activity are skipped, a time repeated keeps the first entry."""
    timed: dict[int, str] = {}
    for item in _items(value, key):
        if not isinstance(item, dict):
            continue
        start, activity = minutes_of(item.get("time")), _text(item.get("activity"))
        if start is not None and start < MINUTES_PER_DAY and activity:
            timed.setdefault(start, activity)
    return timed


def read_schedule(value: Any, chunk_minutes: int = 60, min_minutes: int = 5) -> list[Chunk]:
    """The hourly schedule of a ``{"schedule": [...]}`` answer, sorted by time. Each entry runs
    until the next one (the last for ``chunk_minutes``); spans longer than ``chunk_minutes`` are
    cut into chunks of that length (the last one keeps the rest), spans shorter than
    ``min_minutes`` are dropped."""
    return chunks_from_times(read_timed(value), chunk_minutes, min_minutes)


def chunks_from_times(timed: dict[int, str], chunk_minutes: int, min_minutes: int, day_end: int | None = None) -> list[Chunk]:
    """Chunks from ``start minute -> activity``: each runs until the next start (the last for
    ``chunk_minutes``, or until ``day_end`` when given); long spans are cut into chunks of
    ``chunk_minutes`` (a rest shorter than ``min_minutes`` joins the chunk before it); spans
    shorter than ``min_minutes`` are dropped."""
    starts = sorted(timed)
    chunks: list[Chunk] = []
    for i, start in enumerate(starts):
        if i + 1 < len(starts):
            end = starts[i + 1]
        else:
            end = min(day_end if day_end is not None else start + chunk_minutes, MINUTES_PER_DAY)
        if end - start < min_minutes:
            continue
        cut = start
        while cut < end:
            piece_end = end if end - cut < chunk_minutes + min_minutes else cut + chunk_minutes
            chunks.append(Chunk(cut, piece_end, timed[start]))
            cut = piece_end
    return chunks


def read_actions(value: Any) -> list[tuple[str, int]]:
    """``(action, minutes)`` for every entry of an ``{"actions": [...]}`` answer with both."""
    found = []
    for item in _items(value, "actions"):
        if not isinstance(item, dict):
            continue
        action, minutes = _text(item.get("action")), item.get("minutes")
        if isinstance(minutes, str) and minutes.strip().isdigit():
            minutes = int(minutes)
        if action and isinstance(minutes, (int, float)) and not isinstance(minutes, bool):
            found.append((action, int(minutes)))
    return found


def chunks_text(chunks: list[Chunk]) -> str:
    """The hourly schedule as the prompts show it, one ``7:00 am: ...`` line per chunk."""
    return "\n".join(f"{clock_text(c.start)}: {c.text}" for c in chunks)


def strokes_text(strokes: list[Stroke]) -> str:
    """The strokes as the paper writes a plan: ``1) wake up at 7:00 am, 2) ...`` (a stroke's time
    is added when its text does not say one)."""
    return ", ".join(f"{i}) {s.text}" + (f" at {clock_text(s.minute)}" if s.minute is not None and not _TIME.search(s.text) else "")
                     for i, s in enumerate(strokes, 1))


def chunks_from_strokes(strokes: list[Stroke], chunk_minutes: int, day_start: int, day_end: int) -> list[Chunk]:
    """The hourly schedule made from the strokes alone (when the model's cannot be read).

    Strokes whose times rise within ``[day_start, day_end)`` keep them; a run of other strokes
    shares the gap between its neighbours evenly (the first run starts at ``day_start``).
    Each stroke then runs until the next one, the last until ``day_end``."""
    n = len(strokes)
    times: list[int | None] = [None] * n
    last = -1
    for i, stroke in enumerate(strokes):
        if stroke.minute is not None and stroke.minute > last and day_start <= stroke.minute < day_end:
            times[i] = last = stroke.minute
    i = 0
    while i < n:
        if times[i] is not None:
            i += 1
            continue
        j = i
        while j < n and times[j] is None:
            j += 1
        after = times[j] if j < n else day_end
        before = times[i - 1] if i > 0 else None
        if before is None:
            step = max(1, (after - day_start) // (j - i))
            for k in range(i, j):
                times[k] = day_start + (k - i) * step
        else:
            step = max(1, (after - before) // (j - i + 1))
            for k in range(i, j):
                times[k] = before + (k - i + 1) * step
        i = j
    timed: dict[int, str] = {}
    for minute, stroke in zip(times, strokes):
        timed.setdefault(int(minute), stroke.text)
    return chunks_from_times(timed, chunk_minutes, 5, day_end)


# --------------------------------------------------------------------------- durations


def fit_durations(actions: list[tuple[str, int]], length: int, lo: int, hi: int, filler: str) -> Fit:
    """Actions whose minutes are each in ``[lo, hi]`` and sum to ``length`` (a chunk).

    The procedure, in order (each change is listed in ``Fit.changes``):

    1. clamp each duration to ``[lo, hi]``;
    2. the number of actions must lie in ``[ceil(length / hi), floor(length / lo)]``: extra
       actions are dropped from the end; missing ones are appended as ``filler`` with ``lo``
       minutes;
    3. the total is brought to ``length`` from the last action backwards: a total too large
       shortens each action towards ``lo``, one too small lengthens each towards ``hi``.

    Step 2 makes step 3 always succeed. Example (length 60, 5-15): durations 20, 3, 30 clamp
    to 15, 5, 15 (sum 35); three actions are allowed (4..12 needed: one ``filler`` of 5 is
    appended, sum 40); the missing 20 lengthen the last actions: 5 -> 15, then 15 stays,
    5 -> 15: result 15, 15, 15, 15.
    """
    if length < lo:
        raise ValueError(f"a chunk of {length} minutes is shorter than the shortest action ({lo} minutes)")
    texts = [text for text, _ in actions]
    minutes, changes = [], []
    for text, value in actions:
        clamped = min(hi, max(lo, value))
        if clamped != value:
            changes.append(f"{text!r}: {value} minutes is outside {lo}-{hi}")
        minutes.append(clamped)
    fewest, most = math.ceil(length / hi), length // lo
    if len(minutes) > most:
        changes.append(f"{len(minutes)} actions do not fit {length} minutes (at most {most})")
        texts, minutes = texts[:most], minutes[:most]
    if len(minutes) < fewest:
        changes.append(f"{len(minutes)} actions cannot fill {length} minutes (at least {fewest})")
        while len(minutes) < fewest:
            texts.append(filler)
            minutes.append(lo)
    total = sum(minutes)
    if total != length:
        changes.append(f"durations sum to {total} minutes, not {length}")
        for i in range(len(minutes) - 1, -1, -1):
            gap = length - sum(minutes)
            if gap == 0:
                break
            minutes[i] = min(hi, minutes[i] + gap) if gap > 0 else max(lo, minutes[i] + gap)
    return Fit(minutes, texts, changes)


def steps_for(chunk: Chunk, fit: Fit) -> list[Step]:
    steps, at = [], chunk.start
    for text, minutes in zip(fit.texts, fit.minutes):
        steps.append(Step(at, minutes, text))
        at += minutes
    return steps
