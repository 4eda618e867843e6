"""What a model typically answers to Park et al.'s generative agents: the estimate's priors
(``townsquare_register_answer_priors``; read by ``townsquare estimate`` only).

The day's plan decides how many actions there are (each is placed in the town: sector, arena,
object, its state) and where agents meet; decisions decide how many conversations, reactions
and reflections follow. Typical answers, our choices where the paper gives no number:

* ``plan.day``: the persona's day as its summary states it: waking at its lifestyle's time, the
  daily plan requirement's steps in order (each at the time it states, else an hour after the
  one before), dinner and bed at the lifestyle's times (7:00 am, 6:00 pm, 11:00 pm when it says
  none);
* ``plan.hourly``: the day's strokes at their times; ``plan.replan``: the schedule in the prompt
  from now on; ``plan.conversation``: the schedule in the prompt from now on, unchanged (most
  talk settles nothing); ``plan.actions``: the hour cut into quarter-hour actions (Park's
  decomposition into 5-15 minute actions);
* ``reflection.insights``: as many insights as asked, each resting on the first two statements
  shown;
* ``dialogue.initiate``: half the chances to talk are taken; a conversation ends after four
  utterances (the disposition scales it); ``react``: one observation in ten changes the plan;
* ``importance``: everyday memories score low (the paper's scale: brushing teeth 1, a break-up
  10): 2 and 3 for most, a few 5 and 8;
* place and object decisions need no prior: the stand-in picks the one the activity names;
* free text as long as its prompt asks: "one or two sentences" about 40 tokens (:data:`LENGTHS`).
"""

from __future__ import annotations

import re
from typing import Any

from townsquare.api import hookimpl
from townsquare.lib.answer_priors import AnswerPrior

from .planning.schedule import clock_text, minutes_of

_SENTENCE = {"lifestyle": re.compile(r"^Lifestyle:(.*)$", re.M), "requirement": re.compile(r"^Daily plan requirement:(.*)$", re.M)}
_AROUND = {"wake": re.compile(r"(?:awake|wake)s?(?: up)? around ([^,.;]+)"), "dinner": re.compile(r"dinner around ([^,.;]+)"),
           "bed": re.compile(r"bed around ([^,.;]+)")}
_PLAN_LINE = re.compile(r"plan for today in broad strokes: (.*)$", re.M)
_STROKE = re.compile(r"\d+\) ([^,]+?)(?: at (\d{1,2}:\d{2} [ap]m))?(?=, \d+\)|$)")
_SCHEDULE_LINE = re.compile(r"^(\d{1,2}:\d{2} [ap]m): (.+)$", re.M)
_NOW = re.compile(r"it is now (\d{1,2}:\d{2} [ap]m)")
_MINUTES = re.compile(r"\((\d+) minutes\)")
_HISTORY = re.compile(r"Here is the dialogue so far:\n(.*?)\n\n", re.S)
_COUNT = re.compile(r"What (\d+) high-level insights")
_STATEMENT = re.compile(r"^(\d+)\. ", re.M)
_QUESTION = re.compile(r'bear on the question "(.*?)"')
_DEFAULTS = {"wake": 7 * 60, "dinner": 18 * 60, "bed": 23 * 60}
#: tokens of the free-text answers whose prompts say how long to be (about 20 tokens a sentence)
LENGTHS = {"summary": 40, "summary.feelings": 40, "summary.plan_note": 50, "summary.status": 60, "conversation.": 40,
           "react.context": 40, "react.reaction": 20, "town.object_state": 10}
#: utterances before a typical conversation ends (our choice; the disposition scales it)
UTTERANCES = 4


def _time(prompt: str, key: str) -> int:
    lifestyle = _SENTENCE["lifestyle"].search(prompt)
    found = _AROUND[key].search(lifestyle.group(1)) if lifestyle else None
    minute = minutes_of(found.group(1).replace("pm", " pm").replace("am", " am")) if found else None
    if minute is not None and key != "wake" and minute < 12 * 60 and "pm" in found.group(1):
        minute += 12 * 60
    return _DEFAULTS[key] if minute is None else minute


def _activity(text: str) -> str:
    words = re.sub(r"[^A-Za-z0-9,.'&() -]", " ", text).split()
    return " ".join(words)[:150] or "go about the day"


def typical_day(prompt: str, disposition: float) -> dict[str, Any]:
    """The day in broad strokes from the persona's lifestyle and daily plan requirement."""
    wake, dinner, bed = (_time(prompt, key) for key in ("wake", "dinner", "bed"))
    strokes = [(wake, "wake up and get ready for the day")]
    requirement = _SENTENCE["requirement"].search(prompt)
    at = wake + 60
    for clause in re.split(r",? and |, |; ", requirement.group(1)) if requirement else ["go about the day's work"]:
        clause = clause.strip(" .")
        if not clause:
            continue
        stated = minutes_of(clause)
        at = stated if stated is not None and stated > strokes[-1][0] else max(at, strokes[-1][0] + 60)
        if at >= dinner:
            break
        strokes.append((at, _activity(re.sub(r"\b(?:at|from|until|starting)?\s*\d{1,2}(?::\d{2})?\s*[ap]m\b", "", clause))))
        at += 60
    strokes += [(dinner, "have dinner"), (max(dinner + 60, bed - 60), "relax at home"), (bed, "go to bed")]
    return {"plan": [{"time": clock_text(minute), "activity": text} for minute, text in strokes[:8]]}


def typical_schedule(prompt: str, disposition: float) -> dict[str, Any]:
    """The hourly schedule: the strokes the prompt lists, at their times."""
    line = _PLAN_LINE.search(prompt)
    entries = []
    for text, time in _STROKE.findall(line.group(1) if line else ""):
        if time:
            entries.append({"time": time, "activity": _activity(text)})
    return {"schedule": entries or [{"time": "8:00 am", "activity": "go about the day"}]}


def typical_replan(prompt: str, disposition: float, first: str | None = "react to what happened") -> dict[str, Any]:
    """The rest of the day: the schedule the prompt shows, from now on, starting with ``first``
    (None: the activity under way now)."""
    now = _NOW.search(prompt)
    start = (minutes_of(now.group(1)) if now else 0) or 0
    entries, under_way = [], "go about the day"
    for time, text in _SCHEDULE_LINE.findall(prompt):
        minute = minutes_of(time)
        if minute is not None and minute > start:
            entries.append({"time": time, "activity": _activity(text)})
        elif minute is not None:
            under_way = _activity(text)
    return {"schedule": [{"time": clock_text(start), "activity": first or under_way}, *entries]}


def typical_rest_of_day(prompt: str, disposition: float) -> dict[str, Any]:
    """After a conversation: the schedule the prompt shows, from now on, as it was."""
    return typical_replan(prompt, disposition, None)


def typical_insights(prompt: str, disposition: float) -> dict[str, Any]:
    """As many insights as the prompt asks for, each its own sentence on the question asked (a
    memory rates each text once) and citing the first two statements shown."""
    count, question = _COUNT.search(prompt), _QUESTION.search(prompt)
    shown = [int(n) for n in _STATEMENT.findall(prompt)]
    because = [n for n in (1, 2) if n in shown] or [1]
    about = _activity(question.group(1)) if question else "their days"
    return {"insights": [{"insight": f"Insight {i} on {about}: they care about the people and the work in it.", "because": because}
                         for i in range(1, (int(count.group(1)) if count else 1) + 1)]}


def typical_actions(prompt: str, disposition: float) -> dict[str, Any]:
    """The chunk in quarter-hour actions (the last shorter)."""
    found = _MINUTES.search(prompt)
    minutes = int(found.group(1)) if found else 60
    actions, left = [], minutes
    while left > 0:
        step = min(15, left)
        actions.append({"action": "carry on with what was planned", "minutes": max(5, step)})
        left -= step
    return {"actions": actions}


def typical_turn(prompt: str, disposition: float) -> dict[str, Any]:
    """One utterance; the conversation ends after :data:`UTTERANCES` of them (times the disposition)."""
    history = _HISTORY.search(prompt)
    said = len([line for line in (history.group(1) if history else "").splitlines() if ":" in line])
    return {"utterance": "I wanted to ask you how your day is going and tell you what I have been up to.",
            "end": said + 1 >= max(1, round(UTTERANCES * disposition))}


@hookimpl
def townsquare_register_answer_priors():
    choice = "our choice"
    return [
        AnswerPrior("plan.day", answer=typical_day, note="the persona's day from its summary"),
        AnswerPrior("plan.hourly", answer=typical_schedule, note="the strokes at their times"),
        AnswerPrior("plan.replan", answer=typical_replan, note="the schedule from now on"),
        AnswerPrior("plan.conversation", answer=typical_rest_of_day, note="the schedule from now on, as it was"),
        AnswerPrior("reflection.insights", answer=typical_insights, note="insights citing the statements shown"),
        AnswerPrior("plan.actions", answer=typical_actions, note="quarter-hour actions"),
        AnswerPrior("dialogue.turn", answer=typical_turn, note=f"a conversation of {UTTERANCES} utterances"),
        AnswerPrior("dialogue.initiate", shares={"yes": 0.5}, note=choice),
        AnswerPrior("react", shares={"yes": 0.1}, note=choice),
        AnswerPrior("importance", shares={"2": 0.4, "3": 0.3, "5": 0.2, "8": 0.1}, note=choice),
        # the lengths the prompts ask for, about 20 tokens a sentence
        *(AnswerPrior(purpose, completion_tokens=tokens, note=f"{tokens} tokens, as the prompt asks")
          for purpose, tokens in LENGTHS.items()),
    ]
