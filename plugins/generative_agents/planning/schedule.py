"""Park et al.'s plans as data (§4.3): reading the model's lists and repairing durations.

Not a plugin: ``day_plan`` builds on it. Three levels, each a list the model writes:

* the day in broad strokes: a numbered list, inline as the paper's prompt invites
  (``1) wake up and have breakfast at 7:00 am, 2) ...``) or one item a line
  (:func:`parse_strokes`); an item may carry a time (``8:00 am``, ``8am``, ``20:30``, ``noon``);
* an hourly schedule: one line per chunk that starts with its time, ``8:00 am: work on the
  paper`` (:func:`parse_chunks`); the text runs until the next line's time (the last line for
  one hour), and a span longer than an hour is cut into hour chunks;
* a chunk in actions of 5-15 minutes: one line per action with its duration, ``- answer
  e-mail (10 minutes)`` or ``10 min: answer e-mail`` (:func:`parse_actions`).

The parsers are lenient about form (bullets, numbers, markdown, ``a.m.``) and strict about
content: a line without what it needs is skipped. :func:`fit_durations` turns whatever
durations the model wrote into a valid decomposition of the chunk (each in [lo, hi], summing to
the chunk's length) by a fixed procedure documented there, so tests can compute its result by
hand; the caller records a ``parse_failure`` whenever it had to change anything.

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

_MARK = r"(?:\d{1,2}[.)]|[-*\u2022])"
_INLINE_ITEM = re.compile(r"(?:(?<=^)|(?<=[\s,;:]))(\d{1,2})\)\s+")
_LEADING_MARK = re.compile(rf"^\s*{_MARK}\s+")
_CLOCK = r"(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s*m\b\.?|(\d{1,2}):(\d{2})(?!\s*[ap]\.?\s*m)|\b(noon|midnight)\b"
_TIME = re.compile(_CLOCK, re.I)
_LEADING_TIME = re.compile(rf"^\[?\(?\s*(?:at\s+)?(?:{_CLOCK})\s*(?:(?:-|\u2013|\u2014|to)\s*(?:{_CLOCK}))?\s*[\])]?\s*[:\-\u2013\u2014,]*\s*", re.I)
_DURATION = re.compile(r"\(?\s*(?:duration(?: in minutes)?\s*:\s*(\d{1,3})(?:\s*min\w*)?|(\d{1,3})\s*(?:minutes?|mins?\.?|m)\b)\s*\)?", re.I)
_TIME_PHRASE = re.compile(rf"\s*(?:\b(?:at|around|from|by|until)\s+)?(?:{_CLOCK})", re.I)


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


def _clean(line: str) -> str:
    return line.replace("**", "").replace("__", "").strip()


def _split_inline(line: str) -> list[str]:
    """``a: 1) x, 2) y`` -> ``a:``, ``1) x,``, ``2) y``: only markers counting up from 1 split
    (a ``7)`` inside an item's text does not)."""
    cuts, expected = [], 1
    for match in _INLINE_ITEM.finditer(line):
        if int(match.group(1)) == expected:
            cuts.append(match.start())
            expected += 1
    if len(cuts) < 2:
        return [line]
    bounds = cuts + [len(line)]
    return [line[:cuts[0]]] + [line[a:b] for a, b in zip(bounds, bounds[1:])]


def _items(text: str) -> list[str]:
    """List items: one per marked line, or the inline ``1) ... 2) ...`` form split up; an
    answer with no marks at all counts each non-empty line as an item."""
    lines = [_clean(piece) for line in text.replace("\r", "").split("\n") for piece in _split_inline(line)]
    marked = [line for line in lines if _LEADING_MARK.match(line)]
    chosen = marked if marked else [line for line in lines if line]
    items = [_LEADING_MARK.sub("", line).strip().rstrip(",;").strip() for line in chosen]
    return [item for item in items if item]


# --------------------------------------------------------------------------- parsing


def parse_strokes(text: str) -> list[Stroke]:
    """The broad strokes in ``text`` (a time in an item is read, the item's text is kept whole)."""
    strokes = []
    for item in _items(text):
        match = _TIME.search(item)
        strokes.append(Stroke(item.rstrip(".")[:TEXT_CHARS], clock_minutes(match) if match else None))
    return strokes


def parse_chunks(text: str, chunk_minutes: int = 60, min_minutes: int = 5) -> list[Chunk]:
    """The hourly schedule in ``text``: lines that start with a time, sorted by time. Each runs
    until the next one (the last for ``chunk_minutes``); spans longer than ``chunk_minutes`` are
    cut into chunks of that length (the last one keeps the rest), spans shorter than
    ``min_minutes`` are dropped, and a time repeated keeps the first line."""
    timed: dict[int, str] = {}
    for line in (_LEADING_MARK.sub("", _clean(raw)) for raw in text.replace("\r", "").split("\n")):
        match = _LEADING_TIME.match(line)
        if match is None:
            continue
        start = clock_minutes(match)
        activity = line[match.end():].strip().rstrip(".")[:TEXT_CHARS]
        if start is None or start >= MINUTES_PER_DAY or not activity:
            continue
        timed.setdefault(start, activity)
    return _cut(timed, chunk_minutes, min_minutes)


def _cut(timed: dict[int, str], chunk_minutes: int, min_minutes: int, day_end: int | None = None) -> list[Chunk]:
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


def parse_actions(text: str) -> list[tuple[str, int]]:
    """``(action, minutes)`` for every list item that states a duration, in order."""
    found = []
    for item in _items(text):
        match = _DURATION.search(item)
        if match is None:
            continue
        action = (item[:match.start()] + " " + item[match.end():]).strip(" :-\u2013\u2014,;.()")
        action = re.sub(r"\s+", " ", action)
        if action:
            action = action[:TEXT_CHARS]
            found.append((action, int(match.group(1) or match.group(2))))
    return found


def chunks_text(chunks: list[Chunk]) -> str:
    """The hourly schedule as the prompts show it, one ``7:00 am: ...`` line per chunk."""
    return "\n".join(f"{clock_text(c.start)}: {c.text}" for c in chunks)


def strokes_text(strokes: list[Stroke]) -> str:
    """The strokes as the paper writes a plan: ``1) ..., 2) ...``."""
    return ", ".join(f"{i}) {s.text}" for i, s in enumerate(strokes, 1))


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
    return _cut(timed, chunk_minutes, 5, day_end)


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
