"""The oracle's rules for Park et al.'s generative agents (the town and its party), FOR TESTS ONLY.

Each rule reads the prompt it is given (a :class:`~.prompt_view.PromptView`) the way a careful
reader would and answers in the shape the request asks for; none reads the run. What they do:

* **News** (:func:`news_in`) is a statement in the prompt about something planned or announced:
  a sentence with a date or a clock time that says what is planned (a party "on February 14th,
  2023, from 5pm to 7pm"), or an announcement ("is running for local mayor", "is hosting ...").
  Routine (the seed's lifestyle and daily plan requirement), questions and curiosity are not
  news. A sentence someone said in the first person ("X said to Y: I am planning ...") is read
  as news about the speaker ("X is planning ...").
* **Importance**: an idle object 1, an object 2, a person seen 3, a conversation 4, a reflection
  5, a plan 6 (one more when it holds news); news that is an event with a date or time
  ``news_importance`` (a disposition, default 8), a planning note about one a point more (9).
* **Talking**: an agent starts a conversation when it has news the other person has not heard
  from it (its own status, what it remembers) or when it knows the person (named in its
  description or in a conversation it remembers); in a conversation it says its first news item
  the dialogue has not had, acknowledges the other's, then says goodbye (end). A relay (news
  about someone else; not its own plans nor its status line, :func:`own_news`) keeps the event's date, time and place in a share ``relay_fidelity`` of
  conversations (a disposition, default all) and is passed on bare in the rest.
* **Remembering a conversation**: what it was about (the news in it), a planning thought that
  copies the scheduled events it heard with their date, time and place (none when it heard
  none), a memo.
* **A new day's status**: the plan note lists the events the statements schedule for today
  (their date is today's); the status is yesterday's status plus that note.
* **Planning**: wake up, the daily plan requirement in order (each clause at its stated time, or
  after the previous one), the events that the prompt schedules for today at their time and
  place (then back to what came before, or home), dinner at the lifestyle's time, relaxing at
  home, bed at the lifestyle's time. The hourly schedule is the strokes at their times; a chunk
  is cut into quarter-hour actions that keep its words (and so its place). The rest of a day
  written again after a conversation is the schedule as it was, with the events the prompt
  schedules for today put in at their time, as a new day's plan puts them.
* **Where**: the known place whose name the activity states (the first one it names), else a
  place sharing a distinctive word with it, else home for home things (sleep, relax, dinner
  after work), else staying where the agent is; an area or object by the words of the activity,
  with a few everyday links (eat -> kitchen, sleep -> bed, write -> desk).
* **Reacting**: only to an emergency the observation states (fire, help...): the plan goes on.
* **Reflection**: three questions about the agent's plans, conversations and concerns; an
  insight for each statement that holds news, citing it.
* **Interviews** (§7.1): "do you know about X?" yes when a piece of news its description or
  the memories shown tell is X (most of X's words); "do you know <person>?" yes when its
  description or a memory shown says something of them other than where they were seen.
"""

from __future__ import annotations

import re
from typing import Any

from .generic import pick_label
from .prompt_view import PromptView

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|jun(?:e)?|jul(?:y)?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
DATE = re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s*(\d{{4}}))?", re.I)
CLOCK = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s*m\b\.?|\b(\d{1,2}):(\d{2})\b|\b(noon|midnight)\b", re.I)
#: a statement's time stamp, as the status prompts write it ("Monday February 13, 10:00 am: ")
STAMP = re.compile(rf"^\s*(?:\d+\.\s*)?[A-Z][a-z]+day\s+{_MONTH}\s+\d{{1,2}},\s*\d{{1,2}}:\d{{2}}\s*[ap]m:\s*", re.I)
SAID = re.compile(r"^(?P<speaker>[A-Z][\w'.-]*(?: [A-Z][\w'.-]*)*) said to (?P<listener>[^:]+): (?P<utterance>.*)$")
ANNOUNCE = re.compile(r"\b(?:planning|plans|is going|are going|will)\b.{0,40}\b(?:hav|host|throw|hold|run|organi[sz])\w*"
                      r"|\b(?:is|am|are) (?:hosting|throwing|holding|running for|organi[sz]ing)\b|\binvit\w+|\bparty\b", re.I)
NOT_NEWS = re.compile(r"\?|\b(?:curious|wonder\w*|every ?day|usually|always|likes to|loves to|thank you for telling)\b", re.I)
ACKNOWLEDGE = "That sounds good, thank you for telling me about"
ROUTINE_HEADINGS = ("Name:", "Innate traits:", "Background:", "Lifestyle:", "Daily plan requirement:")
EMERGENCY = re.compile(r"\b(?:fire|burning|smoke|flood\w*|emergency|injur\w+|help!|collaps\w+)\b", re.I)
STOP = frozenset("a an the and or of to in on at for with from by is are be his her their its my your this that "
                 "into up out go goes going do does work working spend spends day days some".split())
#: everyday links between what an activity says and what an area or object is called
LINKS: tuple[tuple[str, str], ...] = (
    (r"\b(?:eat|eats|ate|dinner|lunch|breakfast|meal|cook\w*)\b", r"kitchen|dining|cooking|stove|table|refrigerator|seating"),
    (r"\b(?:sleep\w*|bed|nap)\b", r"bed(?:room)?\b"),
    (r"\b(?:shower|bath|wash\w*|toilet)\b", r"bath(?:room)?|shower|sink"),
    (r"\b(?:relax\w*|rest|tv|family|chat\w*|talk\w*)\b", r"common room|living room|main room|sofa|couch"),
    (r"\b(?:writ\w*|study\w*|read\w*|research\w*|work\w*|paper|thesis|comput\w*)\b", r"desk|library|table"),
    (r"\b(?:party|guests?|customers?|counter|cafe|serve|serving|open\w*)\b", r"counter|seating|cafe"),
    (r"\b(?:paint\w*|draw\w*|art)\b", r"easel|desk"),
    (r"\b(?:music|piano|compos\w*|guitar)\b", r"piano|desk"),
)


# --------------------------------------------------------------------------- reading helpers


def minutes_of(text: str) -> int | None:
    """Minutes after midnight of the first clock time in ``text`` (``5pm``, ``17:30``, ``noon``)."""
    match = CLOCK.search(text or "")
    return _clock(match) if match else None


def _clock(match: re.Match) -> int | None:
    hour, minute, half, hour24, minute24, word = match.groups()
    if word:
        return 720 if word.lower() == "noon" else 0
    if half:
        h, m = int(hour), int(minute or 0)
        if not 1 <= h <= 12 or m > 59:
            return None
        return (h % 12 + (12 if half.lower() == "p" else 0)) * 60 + m
    h, m = int(hour24), int(minute24)
    return h * 60 + m if h <= 23 and m <= 59 else None


def clock(minute: int) -> str:
    minute %= 24 * 60
    hour, rest = divmod(minute, 60)
    return f"{(hour % 12) or 12}:{rest:02d} {'am' if hour < 12 else 'pm'}"


def dates_in(text: str) -> list[tuple[int, int]]:
    """(month, day) of every date in ``text``."""
    found = []
    for match in DATE.finditer(text):
        month = next(i for i, name in enumerate(MONTHS, 1) if name.startswith(match.group(1).lower()[:3]))
        day = int(match.group(2))
        if 1 <= day <= 31:
            found.append((month, day))
    return found


def today_of(view: PromptView) -> tuple[int, int] | None:
    """The prompt's "Today is <date>" (or "It is now <date>"), as (month, day)."""
    match = re.search(r"(?:Today is|It is now|It is)\s+([^.\n]*\d)", view.text)
    found = dates_in(match.group(1)) if match else []
    return found[0] if found else None


def window(sentence: str) -> tuple[int, int] | None:
    """An event's start and end minutes: ``from 5pm to 7pm``, ``5-7 pm``, ``at 5pm`` (an hour)."""
    times = [m for m in CLOCK.finditer(sentence)]
    pair = re.search(r"\b(\d{1,2})\s*(?:-|–|to)\s*(\d{1,2})\s*([ap])\.?\s*m\b", sentence, re.I)
    if pair:
        half = pair.group(3).lower()
        start = _clock(re.match(CLOCK, f"{pair.group(1)}{half}m"))
        end = _clock(re.match(CLOCK, f"{pair.group(2)}{half}m"))
        if start is not None and end is not None and end > start:
            return start, end
    if not times:
        return None
    start = _clock(times[0])
    if start is None:
        return None
    if len(times) > 1 and re.search(r"\b(?:to|until|till|and)\b|-|–", sentence[times[0].end():times[1].start()]):
        end = _clock(times[1])
        if end is not None and end > start:
            return start, end
    return start, min(start + 60, 24 * 60 - 1)


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences (a date's "14th, 2023," or a time's "a.m." do not cut)."""
    parts = re.split(r"(?<=[.!])\s+(?=[A-Z])", " ".join(text.split()))
    return [p.strip() for p in parts if p.strip()]


def unstamp(line: str) -> str:
    """A statement without its number and time stamp."""
    line = STAMP.sub("", line)
    return re.sub(r"^\s*\d+\.\s*", "", line).strip()


def third_person(speaker: str, utterance: str) -> str:
    """What ``speaker`` said, told about them: ``I am planning`` -> ``Isabella Rodriguez is planning``."""
    text = re.sub(r"^(?:have you heard\?|did you hear\?|hi|hello|hey)[,!.]?\s*", "", utterance.strip(), flags=re.I)
    text = re.sub(r"\bI am\b|\bI'm\b", f"{speaker} is", text)
    text = re.sub(r"\bI will\b|\bI'll\b", f"{speaker} will", text)
    text = re.sub(r"\bI\b", speaker, text)
    text = re.sub(r"\bmy\b", f"{speaker}'s", text)
    return re.sub(r"\bMy\b", f"{speaker}'s", text)


#: what the oracle's own notes put around a piece of news (stripped, so news never nests)
WRAPPERS = (r"^For [^:]+'s planning:\s*", r"^Today .{1,60}? should remember:\s*", r"^.{1,60}? knows that\s+",
            r"^.{1,60}? talked with [^:]+:\s*", r"^a conversation about:?\s*", r"^(?:learned|remembers) that\s+",
            r"^.{1,60}? (?:learned|remembers) that\s+", r"^Have you heard\?\s*")


def strip_wrappers(line: str) -> str:
    changed = True
    while changed:
        changed = False
        for wrapper in WRAPPERS:
            stripped = re.sub(wrapper, "", line)
            if stripped != line:
                line, changed = stripped.strip(), True
    return line


def is_news(sentence: str) -> bool:
    if NOT_NEWS.search(sentence):
        return False
    dated = bool(DATE.search(sentence) or CLOCK.search(sentence))
    return bool(ANNOUNCE.search(sentence)) or (dated and bool(re.search(r"\b(?:party|event|meeting|show|"
                                                                           r"exhibition|election|concert)\b", sentence, re.I)))


def news_in(text: str) -> list[str]:
    """The news sentences of ``text`` (see the module docstring), in order, without repeats.
    Lines under the seed's routine headings are not read."""
    found: list[str] = []
    for raw in text.splitlines():
        line = unstamp(raw.strip())
        if not line or line.startswith(ROUTINE_HEADINGS):
            continue
        line = re.sub(r"^(?:Status|Observation|Summary of relevant context from [^:]+):\s*", "", line)
        for sentence in sentences(strip_wrappers(line)):
            sentence = strip_wrappers(sentence.rstrip())
            said = SAID.match(sentence)
            if said:
                sentence = strip_wrappers(third_person(said.group("speaker"), said.group("utterance")))
            if is_news(sentence) and not any(_same(sentence, seen) for seen in found):
                found.append(sentence)
    return found


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2 and w not in STOP}


def _same(a: str, b: str) -> bool:
    """Two news sentences tell the same thing when most of the shorter one's words are in the other."""
    wa, wb = _words(a), _words(b)
    small = min(len(wa), len(wb)) or 1
    return len(wa & wb) / small >= 0.6


def name_before(view: PromptView, pattern: str) -> str:
    """Group 1 of the first match of ``pattern`` in the prompt (``^`` and ``$`` match at lines)."""
    match = re.search(pattern, view.text, re.M)
    return match.group(1).strip() if match else ""


def line_after(view: PromptView, heading: str) -> str:
    """The rest of the line that starts with ``heading:`` (one line, unlike ``section``)."""
    return name_before(view, rf"^{re.escape(heading)}:[ \t]*(.*)$")


def event_clause(sentence: str, me: str) -> tuple[str, bool]:
    """(what happens, whether ``me`` runs it): ``Isabella Rodriguez is planning a Valentine's Day
    party at ...`` -> (``a Valentine's Day party at ...``, True for Isabella)."""
    match = re.match(r"^(?P<who>[A-Z][\w'.-]*(?: [A-Z][\w'.-]*)*) (?:is|are|will be) (?:planning (?:on |to )?)?"
                     r"(?:having|hosting|throwing|holding|organi[sz]ing|have|host|throw|hold|organi[sz]e)?\s*(?P<what>.*)$", sentence)
    if not match:
        return sentence.rstrip("."), False
    return match.group("what").rstrip("."), match.group("who") == me


# --------------------------------------------------------------------------- importance


def importance(view: PromptView) -> str:
    match = re.search(r"Memory \((\w+)\): (.*)", view.text, re.S)
    kind, memory = (match.group(1), match.group(2).split("\n\n")[0]) if match else ("observation", view.last)
    if "is idle" in memory:
        return "1"
    event = any(DATE.search(s) or CLOCK.search(s) for s in news_in(memory))
    news = view.dispositions.news_importance
    if memory.startswith("For ") and "'s planning:" in memory:
        return str(min(10, news + 1)) if event else "6"
    if event:
        return str(news)
    score = {"plan": 6, "reflection": 5, "chat": 4}.get(kind)
    if score is None:
        score = 3 if re.match(r"^[A-Z][\w'.-]+(?: [A-Z][\w'.-]+)+ is at ", memory) else 2
    return str(score + (1 if news_in(memory) else 0))


# --------------------------------------------------------------------------- summaries and the day's status


def numbered(view: PromptView) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^\s*\d+\.\s+(.*)$", view.text, re.M)]


def aspect(view: PromptView) -> str:
    statements = [unstamp(s) for s in numbered(view)]
    return statements[0] if statements else "Nothing is known."


def plan_note(view: PromptView) -> str:
    today = today_of(view)
    name = name_before(view, r"is there anything (.+?) should remember")
    events = [s for s in news_in("\n".join(numbered(view))) if today and today in dates_in(s)]
    if not events:
        return "Nothing in particular."
    return f"Today {name} should remember: " + " ".join(e if e.endswith(".") else e + "." for e in events)


def feelings(view: PromptView) -> str:
    return "I feel my days have been going steadily."


def status(view: PromptView) -> str:
    yesterday = view.section(re.search(r"^(.*'s status yesterday)", view.text, re.M).group(1)) \
        if re.search(r"^(.*'s status yesterday)", view.text, re.M) else ""
    kept = re.sub(r"\s*Today .{1,60}? should remember:.*$", "", " ".join(yesterday.split()))
    note = re.search(r"should remember while planning today: (.*)", view.text)
    note_text = note.group(1).strip() if note else ""
    if not note_text or note_text.startswith("Nothing"):
        return kept or "Going about the day."
    return f"{kept} {note_text}".strip()


# --------------------------------------------------------------------------- the day plan


def _lifestyle_time(text: str, pattern: str) -> int | None:
    match = re.search(pattern + r"\s+(?:around|at|by)?\s*(\d{1,2}(?::\d{2})?\s*(?:[ap]\.?m\.?)?|noon|midnight)", text, re.I)
    return minutes_of(match.group(1) if "m" in match.group(1).lower() or ":" in match.group(1) else match.group(1) + "am") \
        if match else None


def _clauses(requirement: str, name: str, wake: int) -> list[tuple[int | None, str]]:
    """The daily plan requirement as (start minute or None, what) clauses, in order."""
    out: list[tuple[int | None, str]] = []
    until: int | None = None
    first = name.split()[0] if name else ""
    for sentence in sentences(requirement):
        carried = ""  # "In the afternoon, he ..." : a time phrase alone belongs to the clause after it
        for clause in re.split(r",\s*(?:and\s+)?(?:then\s+)?|;\s*|\s+and then\s+", sentence.rstrip(".")):
            clause = f"{carried} {clause}".strip() if carried else clause.strip()
            carried = ""
            if not clause:
                continue
            if re.fullmatch(r"(?:early |late )?(?:in|on|during|at) (?:the )?(?:morning|afternoon|evening|night|weekends?)", clause, re.I):
                carried = clause
                continue
            for who in (name, first):
                if who and clause.startswith(who + " "):
                    clause = clause[len(who) + 1:]
            clause = re.sub(r"^(?:and|then)\s+", "", clause)
            if re.match(r"^at which point\b", clause, re.I):
                out.append((until, re.sub(r"^at which point,?\s*(?:she|he|they)?\s*", "", clause, flags=re.I)))
                continue
            start: int | None = None
            timed = re.search(r"\b(?:at|from|starting(?: at)?|around|by)\s+(\d{1,2}(?::\d{2})?\s*[ap]\.?m\.?|noon)", clause, re.I)
            if timed:
                start = minutes_of(timed.group(1))
            elif re.search(r"\bearly in the morning\b|\bin the morning\b", clause, re.I):
                start = wake + 60
            elif re.search(r"\bin the afternoon\b", clause, re.I):
                start = 13 * 60
            elif re.search(r"\bin the evening\b|\bat night\b", clause, re.I):
                start = 19 * 60
            ends = re.search(r"\b(?:until|till)\s+(\d{1,2}(?::\d{2})?\s*[ap]\.?m\.?)", clause, re.I)
            if ends:
                until = minutes_of(ends.group(1))
                if start is None and out:  # "stands at the counter until 8pm" goes on from the clause before
                    continue
            out.append((start, clause))
    return out


def _events_today(view: PromptView, me: str) -> list[tuple[int, int, str]]:
    today = today_of(view)
    found = []
    for sentence in news_in(view.text):
        if not today or today not in dates_in(sentence):
            continue
        span = window(sentence)
        if span is None:
            continue
        what, mine = event_clause(sentence, me)
        found.append((span[0], span[1], f"{'host' if mine else 'attend'} {what}"))
    return found


def day_plan(view: PromptView) -> dict[str, Any]:
    me = name_before(view, r"Write (.+?)'s plan for today")
    lifestyle = line_after(view, "Lifestyle")
    wake = _lifestyle_time(lifestyle, r"(?:awakes?|wakes?) up") or 7 * 60
    bed = _lifestyle_time(lifestyle, r"go(?:es)? to bed")
    bed = bed if bed is not None and bed > wake + 60 else 23 * 60
    dinner = _lifestyle_time(lifestyle, r"(?:eats?|has|have) dinner")
    counts = [int(n) for n in re.findall(r"between (\d+) and (\d+) items", view.text)[0]] if \
        re.search(r"between (\d+) and (\d+) items", view.text) else [5, 8]
    fewest, most = counts
    strokes: list[tuple[int, str, int]] = [(wake, "wake up and complete the morning routine", 0)]  # (minute, what, rank)
    requirement = line_after(view, "Daily plan requirement")
    at = wake + 60
    if requirement:
        for start, what in _clauses(requirement, me, wake):
            at = start if start is not None else at
            strokes.append((at, what, 2))
            at += 60
    else:
        doing = sentences(line_after(view, "Status"))
        main = doing[0] if doing else "go about the day"
        what, _ = event_clause(main, me)
        strokes.append((wake + 60, what if not news_in(main) else "go about the day", 2))
    events = _events_today(view, me)
    for start, end, what in events:
        # after the event: back to the day's work when it goes on later, else home
        before = [s for s in strokes if s[0] <= start and s[2] == 2]
        later = [s for s in strokes if s[0] >= end and s[2] == 2]
        resume = before[-1][1] if before and later else "go back home and relax"
        strokes.append((start, what, 0))
        if end < bed:
            strokes.append((end, resume, 1))
    busy = [(s, e) for s, e, _ in events]
    if dinner is not None and not any(s <= dinner < e for s, e in busy):
        strokes.append((dinner, "have dinner", 3))
        if dinner + 60 < bed and not any(s <= dinner + 60 < e for s, e in busy):
            strokes.append((dinner + 60, "relax at home", 3))
    strokes.append((bed, "go to bed", 0))
    by_time: dict[int, tuple[str, int]] = {}
    for minute, what, rank in sorted(strokes, key=lambda s: (s[0], s[2])):
        if wake <= minute <= bed and (minute not in by_time or rank < by_time[minute][1]):
            by_time[minute] = (what, rank)
    chosen = sorted(by_time.items())
    while len(chosen) > most:  # drop the least needed (highest rank), latest first
        worst = max(range(len(chosen)), key=lambda i: (chosen[i][1][1], i))
        chosen.pop(worst)
    while len(chosen) < fewest:
        last = chosen[-2][0] if len(chosen) > 1 else wake
        chosen.insert(len(chosen) - 1, (last + 30, ("take a short break", 3)))
    return {"plan": [{"time": clock(m), "activity": what} for m, (what, _) in chosen]}


def schedule(view: PromptView) -> dict[str, Any]:
    """The hourly schedule: the strokes the prompt lists, each at its time."""
    listed = re.search(r"in broad strokes: (.*)", view.text)
    entries = []
    for item in re.split(r",\s*(?=\d+\)\s)", listed.group(1) if listed else ""):
        item = re.sub(r"^\d+\)\s*", "", item).strip()
        minute = minutes_of(item)
        item = re.sub(r"\s+at \d{1,2}:\d{2} [ap]m$", "", item)  # the time the list adds to an untimed stroke
        if minute is not None and item:
            entries.append({"time": clock(minute), "activity": item})
    return {"schedule": entries or [{"time": "8:00 am", "activity": "go about the day"}]}


def replan(view: PromptView) -> dict[str, Any]:
    now = minutes_of(name_before(view, r"it is now ([^.]*)")) or 0
    reaction = name_before(view, r"has just decided to react to something: (.*)")
    entries = [{"time": clock(now), "activity": reaction or "respond to what happened"}]
    for line in re.findall(r"^(\d{1,2}:\d{2} [ap]m): (.*)$", view.text, re.M):
        minute = minutes_of(line[0])
        if minute is not None and minute >= now + 60:
            entries.append({"time": line[0], "activity": line[1]})
    return {"schedule": entries}


def replan_after_conversation(view: PromptView) -> dict[str, Any]:
    """The rest of the day after a conversation: the schedule as it was from now on, with the
    events the prompt schedules for today (what the conversation settled, the status) at their
    time and place, then back to what was planned for that hour."""
    me = name_before(view, r"Write (.+?)'s schedule for the rest of today")
    now = minutes_of(name_before(view, r"it is now ([^.]*)")) or 0
    listed = sorted((m, what) for t, what in re.findall(r"^(\d{1,2}:\d{2} [ap]m): (.*)$", view.text, re.M)
                    if (m := minutes_of(t)) is not None)

    def planned_at(minute: int) -> str | None:
        before = [what for m, what in listed if m <= minute]
        return before[-1] if before and any(m >= minute for m, _ in listed) else None

    timed = {m: what for m, what in listed if m > now}
    if planned_at(now):
        timed[now] = planned_at(now)
    for start, end, what in _events_today(view, me):
        if end <= now:
            continue
        start = max(start, now)
        after = planned_at(end)
        timed = {m: w for m, w in timed.items() if not start <= m < end}
        timed[start] = what
        if after and end < 24 * 60:
            timed.setdefault(end, after)
    return {"schedule": [{"time": clock(m), "activity": what} for m, what in sorted(timed.items())]}


def actions(view: PromptView) -> dict[str, Any]:
    match = re.search(r"\((\d+) minutes\), .+? plans to: (.*)", view.text)
    minutes, what = (int(match.group(1)), match.group(2).strip()) if match else (60, "go about the day")
    lo_hi = re.search(r"each lasting (\d+) to (\d+) minutes", view.text)
    hi = int(lo_hi.group(2)) if lo_hi else 15
    steps, left = [], minutes
    while left > 0:
        steps.append({"action": what, "minutes": min(hi, left)})
        left -= hi
    return {"actions": steps}


# --------------------------------------------------------------------------- reacting


def react(view: PromptView) -> str:
    observation = view.section("Observation")
    return "yes" if EMERGENCY.search(observation) else "no"


def reaction(view: PromptView) -> str:
    return f"deal with what happened: {view.section('Observation')[:120]}"


# --------------------------------------------------------------------------- talking


def _other(view: PromptView, pattern: str) -> str:
    return name_before(view, pattern)


def _knows(view: PromptView, me: str, other: str) -> bool:
    """``other`` is named in the agent's description, or in a conversation it remembers."""
    description = view.text.split("\nIt is ")[0]
    if other and other in description:
        return True
    context = view.section(f"Summary of relevant context from {me}'s memory")
    return any(other in line and (" said to " in line or " talked with " in line) for line in context.splitlines())


def _unshared(view: PromptView, me: str, other: str, history: str) -> list[str]:
    """My news the dialogue has not had and that I do not remember telling ``other``."""
    context = view.section(f"Summary of relevant context from {me}'s memory")
    told = [line for line in context.splitlines() if other in line and (" said to " in line or " talked with " in line)]
    mine = news_in(view.text.split("\nThe conversation is about:")[0].split("\nHere is the dialogue so far:")[0])
    return [n for n in mine if not any(_same(n, t) for t in told) and not any(_same(n, h) for h in history.splitlines())]


def initiate(view: PromptView) -> str:
    me = name_before(view, r"Would (.+?) start a conversation with")
    other = _other(view, r"start a conversation with (.+?) now\?")
    return "yes" if _unshared(view, me, other, "") or _knows(view, me, other) else "no"


#: an event's when and where, in the order a relay that keeps only the gist drops them
DETAILS = (
    re.compile(rf",?\s*\b(?:on\s+)?(?:[A-Z][a-z]+day,?\s+)?{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s*\d{{4}})?", re.I),
    re.compile(r",?\s*\b(?:from|between|at|by|around|starting at)?\s*\d{1,2}\s*(?:-|–|to)\s*\d{1,2}\s*[ap]\.?\s*m\b\.?", re.I),
    re.compile(rf",?\s*\b(?:from|between|at|by|around|starting at)?\s*(?:{CLOCK.pattern})"
               rf"(?:\s*(?:-|–|to|until|till|and)\s*(?:{CLOCK.pattern}))?", re.I),
    re.compile(r",?\s+(?:at|in)\s+(?:the\s+)?[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*"),
)


def without_details(sentence: str) -> str:
    """The news without its date, time and place: ``... a party at Hobbs Cafe on February 14th,
    2023, from 5pm to 7pm.`` -> ``... a party.``"""
    end = sentence.rstrip()[-1:] if sentence.rstrip()[-1:] in (".", "!") else ""
    for pattern in DETAILS:
        sentence = pattern.sub("", sentence)
    sentence = re.sub(r"\s+([,.!])", r"\1", " ".join(sentence.split()))
    sentence = re.sub(r",+(?=[.!]|$)", "", sentence).strip(" ,")
    return sentence if sentence.endswith((".", "!")) else sentence + end


def own_news(news: str, me: str) -> bool:
    """Whether ``news`` is about ``me``: it starts with their name (``Tom Moreno is ...``) or
    says whose it is (``Tom Moreno's status: ...``, the turn prompt's line about the speaker).
    Any other news a speaker holds is someone else's, and passing it on is a relay."""
    return bool(me) and re.match(rf"{re.escape(me)}(?: |'s\b)", news) is not None


def relayed(view: PromptView, news: str, me: str) -> str:
    """``news`` as ``me`` passes it on: its own news whole; someone else's whole in a share
    ``relay_fidelity`` of conversations, else without date, time and place."""
    if own_news(news, me) or view.draw("relay_fidelity") < view.dispositions.relay_fidelity:
        return news
    return without_details(news)


def _first_person(sentence: str, me: str) -> str:
    if sentence.startswith(me + " is "):
        return "I am " + sentence[len(me) + 4:]
    if sentence.startswith(me + " "):
        return "I " + sentence[len(me) + 1:]
    return f"Have you heard? {sentence}"


def _turn_parts(view: PromptView) -> tuple[str, str, str, list[str], list[str]]:
    """A turn prompt's speaker, listener, dialogue so far, and the speaker's and listener's lines in it."""
    me = name_before(view, r"What would (.+?) say next to")
    other = _other(view, r"say next to (.+?)\?")
    history = view.section("Here is the dialogue so far")
    history = "" if history.startswith("(nothing") else history
    lines = [line for line in history.splitlines() if ": " in line]
    return me, other, history, [line for line in lines if line.startswith(me + ":")], \
        [line for line in lines if line.startswith(other + ":")]


def news_to_tell(view: PromptView) -> tuple[str, str | None]:
    """(the speaker of a turn prompt, the news its turn passes on): its first news item that the
    dialogue has not had and that it does not remember telling the listener, None when it has
    none or has told news in this dialogue already (it says one piece of news a conversation)."""
    me, other, history, mine, _ = _turn_parts(view)
    fresh = _unshared(view, me, other, history)
    told = any(news_in(f"{me} said to {other}: {line.split(': ', 1)[1]}") for line in mine)
    return me, (fresh[0] if fresh and not told else None)


def turn(view: PromptView) -> dict[str, Any]:
    me, other, _, mine, theirs = _turn_parts(view)
    _, news = news_to_tell(view)
    if news is not None:
        return {"utterance": _first_person(relayed(view, news, me), me), "end": False}
    heard = [n for line in theirs[-1:] for n in news_in(f"{other} said to {me}: {line.split(': ', 1)[1]}")]
    if heard and not any(ACKNOWLEDGE in line for line in mine):
        what, _ = event_clause(heard[0], other)
        return {"utterance": f"{ACKNOWLEDGE} {what}.", "end": False}
    if not mine:
        return {"utterance": f"Hi {other.split()[0] if other else 'there'}, how are you?", "end": False}
    return {"utterance": f"It was good to talk with you, {other.split()[0] if other else 'friend'}. See you soon.",
            "end": True}


# --------------------------------------------------------------------------- remembering a conversation


def _transcript_news(view: PromptView) -> list[str]:
    said = []
    for line in view.section("Here is a conversation between").splitlines():
        speaker, sep, words = line.partition(": ")
        if sep:
            said.append(f"{speaker} said to someone: {words}")
    return news_in("\n".join(said))


def conversation_about(view: PromptView) -> str:
    found = _transcript_news(view)
    return f"a conversation about: {found[0]}" if found else "a conversation catching up"


def conversation_planning(view: PromptView) -> dict[str, Any]:
    events = [n for n in _transcript_news(view) if DATE.search(n) or CLOCK.search(n)]
    return {"notes": [e if e.endswith(".") else e + "." for e in events]}


def conversation_memo(view: PromptView) -> str:
    found = _transcript_news(view)
    other = name_before(view, r"conversation between .+? and (.+?):")
    return f"learned that {found[0]}" if found else f"enjoyed talking with {other}"


# --------------------------------------------------------------------------- where to go


def _options(view: PromptView) -> list[str]:
    return list(view.labels or ())


def _named(activity: str, options: list[str], owner: str = "") -> str | None:
    """The option whose whole name the activity states first, else the one sharing most words
    with it (the agent's own, on a tie)."""
    low = activity.lower()
    hits = [(low.find(o.lower()), -len(o), o) for o in options if o.lower() in low]
    if hits:
        return min(hits)[2]
    words = _words(activity)
    first = owner.split()[0] if owner else "\0"
    scored = [(len(_words(o) & words), first in o, -len(o), o) for o in options]
    best = max(scored, default=(0, False, 0, None))
    return best[3] if best[0] > 0 else None


def _linked(activity: str, options: list[str], owner: str) -> str | None:
    for what, where in LINKS:
        if re.search(what, activity, re.I):
            fits = [o for o in options if re.search(where, o, re.I)]
            if fits:
                own = [o for o in fits if owner and owner.split()[0] in o]
                return (own or fits)[0]
    return None


def sector(view: PromptView) -> str | None:
    options = _options(view)
    activity = name_before(view, r"is planning to: (.*)$")
    home = name_before(view, r"lives in ([^.\n]*?)\. ")
    here = name_before(view, r"is now in ([^.\n]*?)\.\n")
    named = _named(activity, options)
    if named:
        return named
    home_sector = next((o for o in options if home.startswith(o)), None)
    if home_sector and re.search(r"\b(?:home|sleep\w*|bed|relax\w*|morning routine|dinner)\b", activity, re.I):
        return home_sector
    here_sector = next((o for o in options if here.startswith(o)), None)
    return here_sector or home_sector or pick_label(view)


def arena(view: PromptView) -> str | None:
    options = _options(view)
    activity = name_before(view, r" is going to .+? to: (.*)$")
    me = name_before(view, r"^(.+?) is going to ")
    return _named(activity, options, me) or _linked(activity, options, me) or \
        next((o for o in options if me and me.split()[0] in o), None) or options[0]


def thing(view: PromptView) -> str | None:
    options = _options(view)
    activity = name_before(view, r"^.+? is in .+? of .+? to: (.*)$")
    me = name_before(view, r"^(.+?) is in .+? of .+? to: ")
    return _named(activity, options, me) or _linked(activity, options, me) or options[0]


def object_state(view: PromptView) -> str:
    activity = name_before(view, r"^.+? is using the .+? to: (.*)$")
    return f"being used to {activity[:100]}" if activity else "being used"


# --------------------------------------------------------------------------- reflection


def questions(view: PromptView) -> dict[str, Any]:
    name = name_before(view, r"statements from (.+?)'s memory")
    count = int(name_before(view, r"exactly (\d+) questions") or 3)
    asked = [f"What is {name} planning?", f"Whom has {name} talked with recently?", f"What matters most to {name} now?"]
    return {"questions": asked[:count]}


def insights(view: PromptView) -> dict[str, Any]:
    name = name_before(view, r"Statements from (.+?)'s memory")
    count = int(name_before(view, r"at most (\d+) insights") or 5)
    found = []
    for i, statement in enumerate(numbered(view), 1):
        for item in news_in(statement):
            if not any(_same(item, f["insight"]) for f in found):
                found.append({"insight": f"{name} knows that {item}", "because": [i]})
    if not found and numbered(view):
        found.append({"insight": f"{name} remembers that {unstamp(numbered(view)[0])}", "because": [1]})
    return {"insights": found[:count]}


# --------------------------------------------------------------------------- interviews (§7.1)


def _interview_text(view: PromptView, heading: str) -> str:
    """What the agent has to go on in an interview: its description and the memories shown."""
    memories = re.sub(r"^- ", "", view.section(heading), flags=re.M)
    return name_before(view, r"^You are [^.]+\. About you: (.*)$") + "\n" + memories


def knows_topic(view: PromptView) -> str:
    """Yes when a piece of news the agent's description or memories tell is the topic asked of."""
    topic = name_before(view, r'Do you know about (.+?)\?"')
    told = news_in(_interview_text(view, "What you remember that bears on the question"))
    return "yes" if topic and any(_same(topic, n) for n in told) else "no"


def knows_person(view: PromptView) -> str:
    """Yes when the agent's description names the person, or a memory shown says something of
    them other than where they were seen ("<person> is at <place>": seeing someone is not knowing
    them)."""
    other = name_before(view, r'Do you know (.+?)\?"')
    memories = _interview_text(view, f"What you remember about {other}").splitlines()
    seen = re.compile(rf"^{re.escape(other)} is at ")
    return "yes" if other and any(other in line and not seen.match(line) for line in memories) else "no"


RULES = {
    "importance": importance,
    "summary": aspect,
    "summary.plan_note": plan_note,
    "summary.feelings": feelings,
    "summary.status": status,
    "plan.day": day_plan,
    "plan.hourly": schedule,
    "plan.replan": replan,
    "plan.conversation": replan_after_conversation,
    "plan.actions": actions,
    "react": react,
    "react.context": lambda view: aspect(view),
    "react.reaction": reaction,
    "dialogue.initiate": initiate,
    "dialogue.turn": turn,
    "conversation.about": conversation_about,
    "conversation.planning": conversation_planning,
    "conversation.memo": conversation_memo,
    "town.sector": sector,
    "town.arena": arena,
    "town.object": thing,
    "town.object_state": object_state,
    "reflection.questions": questions,
    "reflection.insights": insights,
    "eval.knows_topic": knows_topic,
    "eval.knows_person": knows_person,
}

__all__ = ["RULES", "dates_in", "news_in", "news_to_tell", "own_news", "window"]
