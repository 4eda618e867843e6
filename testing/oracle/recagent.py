"""The oracle's rules for RecAgent (Wang et al.): purposes ``recagent.*``, FOR TESTS ONLY.

Each rule reads the request as a careful reader would and nothing else. What it knows of an
agent is what the prompt says: the profile's interests ("You enjoy sci-fi movies"), the
memories listed in it, the page on the screen. It leans toward the opinions it finds there: a
score written as "8/10", "4 out of 5" or "rated it 4 out of 5" next to a ``<Title>`` is an
opinion of that title, on a 1-10 scale.

Whose opinion a score is, the prompt says too: the person a memory is about ("Bo posted to
friends: ...", "Bo watched <T> and rated it ...") or the speaker of a chat turn ("[Bo]: ...").
The rules keep the two apart: the agent passes on only the opinions its memories show as its own
(what it watched and rated, what it said before), never what it was told as if it were its take,
and it weighs what it was told by who said it: one opinion per person and title, however often
that person's message comes back to mind.

- ``recagent.sensory``: the observation in one line; importance by the prompt's own scale: an
  opinion or experience of a named item 8, a bare list of items 5, anything else 2.
- ``recagent.activity``: ``social`` when a memory holds the agent's own opinion of a title it has
  not yet passed on (no memory of its own post or chat naming it), else ``recommender``.
- ``recagent.social``: ``chat`` when the profile says the agent loves private chats, else
  ``broadcast``; ``recagent.partner``: the first friend its memories never name.
- ``recagent.broadcast`` / ``recagent.chat_turn``: the agent's own opinions, said once
  ("<Title>: 8/10"), only of titles it may mention; a chat ends after both have spoken.
- ``recagent.page``: watch a listed title heard of; else, in a share ``follow_page`` of pages
  (a disposition, default none), the page's first title; else one of the agent's interests,
  else the next page (or leave when the page says nothing to it twice).
- ``recagent.feeling`` / ``recagent.rating``: liked when the item's genres meet the
  interests; the rating leans toward the opinions of it in memory (their mean, one per person)
  by ``conformity_weight`` (a disposition, default 0.5: halfway).
- ``recagent.conformity``: the last score moved toward the mean of the opinions of the movie
  found in memory, one per person who voiced one, by ``conformity_weight`` (default halfway;
  none found: the last score; no last score: the opinions' mean, or 6 when the movie's genres
  meet the interests, else 4).
- ``recagent.insight`` / ``recagent.reflection``: what the memories keep naming, with the score
  the person gave it when the memories show one of their own; ``recagent.satisfaction``: the
  share of listed items that meet the interests; ``recagent.discrimination``: the candidate whose genres meet the history's most;
  ``recagent.judge``: the sequence whose genres meet the history's more, or indistinguishable.
"""

from __future__ import annotations

import re
from collections import Counter
from statistics import mean
from typing import Any

from .prompt_view import PromptView

TITLE = re.compile(r"<([^<>]{1,200})>")
#: a score: "8/10", "8 / 10", "4 out of 5", "4.5/5"
SCORE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:/|out of)\s*(10|5)\b")
LISTED = re.compile(r"^\s*(\d+)\.\s*<([^<>]+)>\s*\(([^)]*)\)")
EXPERIENCE = re.compile(r"\b(watch|watched|rated|rating|felt|feel|loved|liked|hated|enjoyed|posted|chatted|score|thinks|recommend)", re.I)
BARE_LIST = re.compile(r"\b(is recommended|looks at the next page|searched for|found)\b", re.I)
POSITIVE = ("loved", "liked", "enjoyed", "great", "good match", "gripping", "wonderful")
NEGATIVE = ("not my kind", "boring", "disliked", "hated", "dull")


def key(text: str) -> str:
    """A genre or interest as compared: lower case, no trailing "movies", no punctuation."""
    text = re.sub(r"\s+(movies?|films?|videos?)$", "", text.strip().lower())
    return re.sub(r"[^a-z]", "", text)


def interests(view: PromptView) -> set[str]:
    """The interests the profile names ("You enjoy X, Y." / "enjoys X, Y")."""
    found: set[str] = set()
    for match in re.finditer(r"\b(?:you enjoy|enjoys|I enjoy)\s+([^.;\n]+)", view.text, re.I):
        found |= {key(part) for part in match.group(1).split(",") if part.strip()}
    return found - {""}


def genres_of(text: str) -> set[str]:
    return {key(g) for g in re.split(r"[/|,]", text) if g.strip()}


def section_lines(view: PromptView, heading: str) -> list[str]:
    """The ``- `` lines under ``heading`` (up to the next blank line)."""
    return [line[2:].strip() for line in view.section(heading).splitlines() if line.startswith("- ")]


def opinions(lines: list[str]) -> dict[str, list[float]]:
    """title (as first written) -> the scores given to it in ``lines``, on a 1-10 scale. A score
    belongs to the title written last before it ("<A>: 8/10. <B>: 6/10.")."""
    found: dict[str, list[float]] = {}
    names: dict[str, str] = {}
    for line in lines:
        marks = list(TITLE.finditer(line))
        for n, mark in enumerate(marks):
            segment = line[mark.end(): marks[n + 1].start() if n + 1 < len(marks) else len(line)]
            title = names.setdefault(norm(mark.group(1)), mark.group(1).strip())
            for value, scale in SCORE.findall(segment):
                score = float(value) * (10 / float(scale))
                if 1 <= score <= 10:
                    found.setdefault(title, []).append(score)
    return found


def norm(title: str) -> str:
    return re.sub(r"\s*\(\d{4}\)\s*$", "", title.strip().lower())


def name_of(view: PromptView) -> str:
    match = re.search(r"You are ([^.\n]+)\.", view.text)
    return match.group(1).strip() if match else ""


def memories(view: PromptView) -> list[str]:
    return section_lines(view, "Memories that matter here")


#: who a memory is about: the capitalised name it starts with ("Bo Lindqvist posted to friends: ...")
SUBJECT = re.compile(r"^((?:[A-Z][\w'.-]*)(?: [A-Z][\w'.-]*)*) (?=[a-z])")
#: a chat turn inside a memory: "[Bo Lindqvist]: ..."
TURN = re.compile(r"\[([^\[\]]{1,100})\]:")


def voiced(line: str) -> list[tuple[str, str]]:
    """(who, what they said) for each part of a memory line: each turn of a chat transcript is its
    speaker's; anything else belongs to the person the line starts with ("" when none)."""
    turns = list(TURN.finditer(line))
    if not turns:
        subject = SUBJECT.match(line)
        return [(subject.group(1) if subject else "", line)]
    return [(turn.group(1).strip(), line[turn.end(): turns[n + 1].start() if n + 1 < len(turns) else len(line)])
            for n, turn in enumerate(turns)]


def opinions_by_person(lines: list[str]) -> dict[str, dict[str, list[float]]]:
    """title -> person -> the scores that person gave it in ``lines`` (see :func:`opinions`)."""
    found: dict[str, dict[str, list[float]]] = {}
    names: dict[str, str] = {}
    for line in lines:
        for who, said in voiced(line):
            for title, scores in opinions([said]).items():
                title = names.setdefault(norm(title), title)
                found.setdefault(title, {}).setdefault(who, []).extend(scores)
    return found


def heard_opinions(lines: list[str]) -> dict[str, list[float]]:
    """title -> one score per person who gave it one (the mean of that person's scores)."""
    return {title: [mean(s) for s in by.values()] for title, by in opinions_by_person(lines).items()}


def own_opinions(view: PromptView, lines: list[str]) -> dict[str, list[float]]:
    """title -> the scores the agent itself gave it (its own watching, rating, posts and turns)."""
    me = name_of(view)
    return {title: by[me] for title, by in opinions_by_person(lines).items() if me and me in by}


def shared(view: PromptView, lines: list[str]) -> set[str]:
    """Titles the agent itself already passed on (its own post or chat names them)."""
    me = name_of(view)
    out: set[str] = set()
    for line in lines:
        if me and (line.startswith(f"{me} posted") or line.startswith(f"{me} chatted") or f"[{me}]:" in line):
            out |= {norm(t) for t in TITLE.findall(line)}
    return out


def to_share(view: PromptView) -> dict[str, float]:
    """The agent's own opinions (mean score per title) that it has not passed on yet."""
    lines = memories(view)
    done = shared(view, lines)
    return {t: mean(s) for t, s in own_opinions(view, lines).items() if norm(t) not in done}


def score_label(value: float) -> str:
    return str(int(min(10, max(1, round(value)))))


# ---------------------------------------------------------------------- memory


def sensory(view: PromptView) -> Any:
    text = view.text.split("just experienced:", 1)[-1].split("First, rewrite", 1)[0]
    observation = " ".join(text.split())
    if not observation:
        return None
    if TITLE.search(observation) and (EXPERIENCE.search(observation) or SCORE.search(observation)) and not BARE_LIST.search(observation):
        importance = 8
    elif TITLE.search(observation):
        importance = 5
    else:
        importance = 2
    return {"sentence": observation, "importance": importance}


def insight(view: PromptView) -> Any:
    """One insight, as the JSON list the request declares (``{"insights": [...]}``)."""
    return {"insights": [insight_sentence(view)]}


def insight_sentence(view: PromptView) -> str:
    lines = [line[2:].strip() for line in view.text.splitlines() if line.startswith("- ")]
    name = re.search(r"(?:memories of|recent memories of) ([^:\n]+):", view.text)
    who = name.group(1).strip() if name else "This person"
    held = {t: by[who] for t, by in opinions_by_person(lines).items() if who in by}
    if held:
        title, scores = max(held.items(), key=lambda kv: len(kv[1]))
        return f"{who} keeps thinking about <{title}> and rates it about {score_label(mean(scores))}/10."
    titles = Counter(norm(t) for line in lines for t in TITLE.findall(line))
    if titles:
        return f"{who} keeps coming back to <{titles.most_common(1)[0][0]}>."
    return f"{who} has no strong movie tastes yet."


# ---------------------------------------------------------------------- decisions


def activity(view: PromptView) -> Any:
    return "social" if to_share(view) else "recommender"


def social(view: PromptView) -> Any:
    return "chat" if re.search(r"love private chats", view.text, re.I) else "broadcast"


def partner(view: PromptView) -> Any:
    if not view.labels:
        return None
    text = " ".join(memories(view))
    return next((label for label in view.labels if label not in text), view.labels[0])


def broadcast(view: PromptView) -> Any:
    allowed = {norm(t) for t in TITLE.findall(view.section("Write one message") or view.last)}
    held = {t: s for t, s in to_share(view).items() if not allowed or norm(t) in allowed}
    if not held:
        return ""
    return " ".join(f"My take on <{t}>: {score_label(s)}/10." for t, s in held.items())


def chat_turn(view: PromptView) -> Any:
    transcript = view.section("The chat so far")
    spoken = [line for line in transcript.splitlines() if line.startswith("[")]
    known = view.text.split("You may only mention movies you watched or heard of:", 1)[-1].split("\n", 1)[0]
    allowed = {norm(t) for t in TITLE.findall(known)}
    held = {t: s for t, s in own_opinions(view, memories(view)).items() if norm(t) in allowed}
    said = " ".join(f"I would give <{t}> {score_label(mean(s))}/10." for t, s in held.items() if norm(t) not in {norm(x) for x in TITLE.findall(transcript)})
    line = said or "I have nothing to add about movies."
    return line + (" [END]" if len(spoken) >= 1 or not said else "")


def page(view: PromptView) -> Any:
    matches = [LISTED.match(line) for line in view.text.splitlines()]
    listed = [(int(m.group(1)), norm(m.group(2)), genres_of(m.group(3))) for m in matches if m]
    if not listed or not view.labels:
        return None
    heard = {norm(t) for t in TITLE.findall(view.section("Movies you have heard about but not watched"))}
    for n, title, _ in listed:
        if title in heard:
            return f"watch {n}"
    if view.draw("follow_page") < view.dispositions.follow_page:
        return f"watch {listed[0][0]}"
    likes = interests(view)
    for n, _, genres in listed:
        if genres & likes:
            return f"watch {n}"
    if heard and "search" in view.labels:
        return "search"
    return "next page" if "next page" in view.labels else "leave" if "leave" in view.labels else view.labels[0]


def search_query(view: PromptView) -> Any:
    heard = TITLE.findall(view.text.split("Movies you have heard about:", 1)[-1])
    if heard:
        return heard[0]
    likes = sorted(interests(view))
    return likes[0] if likes else None


def item_genres(view: PromptView) -> set[str]:
    """The genres of the item the question is about ("What it is: <T> (A/B)" or "<T> (A/B)")."""
    for marker in ("What it is:", "about the movie"):
        if marker in view.text:
            match = re.search(r"<[^<>]+>\s*\(([^)]*)\)", view.text.split(marker, 1)[1])
            return genres_of(match.group(1).split(":")[0]) if match else set()
    return set()


def watched_title(view: PromptView) -> str | None:
    match = re.search(r"You have just watched <([^<>]+)>", view.text)
    return match.group(1) if match else None


def feeling(view: PromptView) -> Any:
    name = watched_title(view) or "it"
    if item_genres(view) & interests(view):
        return f"I loved <{name}>: a good match for my taste."
    return f"<{name}> was not my kind of movie."


def rating(view: PromptView) -> Any:
    text = view.text.split("and felt:", 1)[-1].split("\n", 1)[0].lower()
    base = 8.0 if any(w in text for w in POSITIVE) else 3.0 if any(w in text for w in NEGATIVE) else 6.0
    title = watched_title(view)
    heard = [x for t, v in heard_opinions(memories(view)).items() if title and norm(t) == norm(title) for x in v]
    return score_label(view.dispositions.moved(base, mean(heard)) if heard else base)


def conformity(view: PromptView) -> Any:
    title = re.search(r"about the movie <([^<>]+)>", view.text)
    if title is None:
        return None
    held = [x for t, v in heard_opinions(section_lines(view, "What you remember about it")).items() if norm(t) == norm(title.group(1)) for x in v]
    last = re.search(r"last time:\s*(\d+)/10", view.text)
    previous = float(last.group(1)) if last else None
    if held:
        target = mean(held)
        return score_label(target if previous is None else view.dispositions.moved(previous, target))
    if previous is not None:
        return score_label(previous)
    return "6" if item_genres(view) & interests(view) else "4"


def satisfaction(view: PromptView) -> Any:
    listed = [genres_of(m.group(1)) for m in re.finditer(r"^- <[^<>]+>\s*\(([^)]*)\)", view.text, re.M)]
    if not listed:
        return None
    share = sum(1 for g in listed if g & interests(view)) / len(listed)
    return score_label(3 + 7 * share)


def history_genres(text: str) -> Counter:
    return Counter(g for m in re.finditer(r"<[^<>]+>\s*\(([^)]*)\)", text) for g in genres_of(m.group(1)))


def discrimination(view: PromptView) -> Any:
    head, _, listing = view.text.partition("A recommender system shows you these movies:")
    liked = history_genres(head)
    best, score = None, -1.0
    for line in listing.splitlines():
        m = LISTED.match(line)
        value = sum(liked[g] for g in genres_of(m.group(3))) if m else -1.0
        if m and value > score:
            best, score = m.group(1), value
    return best


def judge(view: PromptView) -> Any:
    head, _, rest = view.text.partition("Sequence A:")
    a, _, b = rest.partition("Sequence B:")
    liked = history_genres(head)

    def fit(text: str) -> float:
        genres = history_genres(text)
        total = sum(genres.values())
        return sum(liked[g] * n for g, n in genres.items()) / total if total else 0.0

    fa, fb = fit(a), fit(b.split("Which", 1)[0])
    if abs(fa - fb) < 1e-9:
        return "indistinguishable"
    return "A" if fa > fb else "B"


RULES = {
    "recagent.sensory": sensory,
    "recagent.insight": insight,
    "recagent.reflection": insight,
    "recagent.activity": activity,
    "recagent.social": social,
    "recagent.partner": partner,
    "recagent.broadcast": broadcast,
    "recagent.chat_turn": chat_turn,
    "recagent.page": page,
    "recagent.pick": page,
    "recagent.search_query": search_query,
    "recagent.feeling": feeling,
    "recagent.rating": rating,
    "recagent.conformity": conformity,
    "recagent.satisfaction": satisfaction,
    "recagent.discrimination": discrimination,
    "recagent.judge": judge,
}
