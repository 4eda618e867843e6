"""Ground truth from a townsquare run, written in SoMe's label formats.

SoMe builds UBP, UCS and MCR from crawled interactions and has annotators (helped by an LLM)
write RED, SES, UEA and SMQ (Xue et al., appendix "Dataset Annotation"). A run's event log
is the crawl. The run is cut at round ``split``: the tools see only what happened before it
(:func:`~.corpus.corpus_from_run` with ``until_round``) and the user-centred labels come from
what the agents did from ``split`` on:

* UBP (``like`` / ``comment`` / ``repost``): a positive is an agent's like, comment or
  reblog of a post from ``split`` on; its negative a post the same agent never gave that
  interaction (nor wrote), with a different text (the paper's construction), drawn at random
  from the posts the agent was SHOWN from ``split`` on (its browse actions): a post it never
  saw tells nothing of what it declines. A positive whose agent was shown no such post has no
  negative and is left out.
* MCR: positives are posts an agent interacted with in any way from ``split`` on; negatives
  posts it was shown from ``split`` on and never interacted with.
* UCS: a positive is an agent's comment from ``split`` on; its hard negative another agent's
  comment under the same post (any other agent's comment when the post has none), text differing.
* UEA: an agent's comments from ``split`` on, labelled later by the judge LLM's majority over
  ``votes`` readings (the paper: three GPT-4o votes per comment; ties go to the first vote).

Post-centred tasks read the whole run (their answers must be in the data the tools search):

* RED: the run in windows of ``window_rounds`` rounds; a window's events are its trending
  terms (hashtags or words used in at least ``min_posts`` posts by at least two authors, and
  in no more than half of the run's posts, so template words do not count), each with the
  window's most engaged post that uses it as the summary. Windows without one are dropped, as
  the paper drops queries without events. A run has no places: the location is ``anywhere``.
* SES: the run's most used terms as topics; the reference is their timeline (the most engaged
  posts on the topic, in time order).
* SMQ: per user, what they post about most; per topic, who posted most on it and what the
  first post said.

Misinformation detection needs fact-checked claims, which a run does not have; it runs on
SoMe's own files (``--some-data``) only.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from townsquare.api import LLMClient
from townsquare.lib.prompt_files import fill_prompt

from .corpus import Post, corpus_from_run, run_time, shift, words
from .tasks import EMOTIONS, TO_SOME, TaskType

#: words that never make a topic
STOPWORDS = frozenset(
    "the and for are but not you all any can had her was one our out day get has him his how man new now old see two way who "
    "boy did its let put say she too use that with have this will your from they know want been good much some time very when "
    "come here just like long make many more only over such take than them well were what about after again also back could "
    "every first into last most other people really should still their there these thing think those through today where "
    "which while would being because before going great right things never always little yours".split())

#: a run's posts have no place; its RED queries ask about events anywhere
ANYWHERE = "anywhere"


async def label_emotions(truth: dict[str, list[dict[str, str]]], judge: LLMClient, prompts: dict[str, str], votes: int = 3,
                         by_id: dict[str, Post] | None = None) -> dict[str, list[dict[str, str]]]:
    """UEA's labels: the majority of ``votes`` readings of each comment by the judge (ties: the first vote)."""
    labelled: dict[str, list[dict[str, str]]] = {}
    for uid, entries in truth.items():
        for i, entry in enumerate(entries):
            post = by_id[entry["weibo_id"]].text if by_id and entry["weibo_id"] in by_id else ""
            prompt = fill_prompt(prompts["label_emotion"], post=post, comment=entry["comment"])
            reader = judge.for_agent(f"some-label/UEA/{uid}:{i}")
            readings = [await reader.choose(prompt, EMOTIONS, purpose="some.label.emotion", default="emotionless", temperature=0.7)
                        for _ in range(votes)]
            counts = Counter(readings)
            top = max(counts.values())
            emotion = next(r for r in readings if counts[r] == top)
            labelled.setdefault(uid, []).append({"weibo_id": entry["weibo_id"], "emotion": TO_SOME[emotion]})
    return labelled


@dataclass
class RunLog:
    """What the ground truth is made of."""

    posts: list[Post]  # the whole run
    actions: list[tuple[int, str, str, str, str]]  # round, agent, kind, target post, text
    names: dict[str, str]
    rounds: int
    minutes_per_round: int
    start: str  # the time of round 0 (TIME_FORMAT)
    #: (round, agent, post ids) of every browse action: what each agent was shown
    shown: list[tuple[int, str, list[str]]] = field(default_factory=list)

    def time_of(self, round: int) -> str:
        return shift(self.start, round * self.minutes_per_round)

    def shown_since(self, agent: str, split: int) -> list[str]:
        """The posts ``agent`` was shown from round ``split`` on, each once, in the order first shown."""
        return list(dict.fromkeys(p for r, a, ids in self.shown if a == agent and r >= split for p in ids))


def read_run(events_path: str | Path) -> RunLog:
    corpus = corpus_from_run(events_path)
    db = sqlite3.connect(f"file:{Path(events_path)}?mode=ro", uri=True)
    try:
        actions = [(r, a, k, t, x or "") for r, a, k, t, x in db.execute(
            "SELECT round, agent_id, kind, target_post, text FROM actions WHERE ok = 1 AND target_post IS NOT NULL ORDER BY seq")]
        shown = []
        for r, a, ids in db.execute("SELECT round, agent_id, post_ids FROM actions WHERE ok = 1 AND kind = 'browse' ORDER BY seq"):
            try:
                listed = json.loads(ids or "[]")
            except json.JSONDecodeError:
                continue
            shown.append((int(r), a, [str(p) for p in listed] if isinstance(listed, list) else []))
        last = db.execute("SELECT MAX(round) FROM rounds").fetchone()[0]
        times = [t for (t,) in db.execute("SELECT sim_time FROM rounds ORDER BY round LIMIT 2")]
    finally:
        db.close()
    minutes = 60
    if len(times) == 2:
        minutes = int((datetime.fromisoformat(times[1]) - datetime.fromisoformat(times[0])).total_seconds() // 60) or 60
    start = run_time(times[0]) if times else (corpus.posts[0].created if corpus.posts else "2024-01-01 00:00:00")
    names = {uid: u.name for uid, u in corpus.users.items()}
    return RunLog(corpus.posts, actions, names, (last or 0) + 1, minutes, start, shown)


def ground_truth(task: TaskType, log: RunLog, split: int, per_task: int, rng: np.random.Generator, prompts: dict[str, str], *,
                 window_rounds: int = 2, min_posts: int = 2) -> Any:
    """The task's ground truth in SoMe's format, at most ``per_task`` queries (the yes/no tasks
    come in pairs, one positive and its negative: an odd ``per_task`` is rounded up)."""
    builder = {"UBP": _behavior, "MCR": _interest, "UCS": _comments, "UEA": _emotions}.get(task.short)
    if builder is not None:
        return builder(log, split, per_task, rng)
    if task.short == "RED":
        return _events(log, per_task, rng, window_rounds, min_posts)
    if task.short == "SES":
        return _summaries(log, per_task, min_posts)
    if task.short == "SMQ":
        return _questions(log, per_task, rng, min_posts, prompts)
    return {}


# --------------------------------------------------------------------------- user-centred tasks

KINDS = {"like": "like", "comment": "comment", "repost": "reblog"}


def _behavior(log: RunLog, split: int, per_task: int, rng: np.random.Generator) -> dict[str, Any]:
    by_id = {p.id: p for p in log.posts}
    pairs = []
    for behavior, kind in KINDS.items():
        done = _done(log, {kind})
        for agent, post, text in _later(log, split, {kind}):
            negative = _negative(log, agent, by_id[post], done.get(agent, set()), split, rng)
            if negative is not None:
                pairs.append((behavior, agent, post, text, negative))
    truth: dict[str, dict[str, list[dict[str, str]]]] = {b: {} for b in KINDS}
    for behavior, agent, post, text, negative in _sample(pairs, (per_task + 1) // 2, rng):
        said = {"comment": "comment", "repost": "repost"}.get(behavior)  # SoMe keeps the user's text with these
        truth[behavior].setdefault(agent, []).extend([
            {"weibo_id": post, **({said: text} if said else {}), "label": TO_SOME["yes"]},
            {"weibo_id": negative, **({said: ""} if said else {}), "label": TO_SOME["no"]}])
    return truth


def _interest(log: RunLog, split: int, per_task: int, rng: np.random.Generator) -> dict[str, Any]:
    by_id = {p.id: p for p in log.posts}
    kinds = set(KINDS.values())
    done = _done(log, kinds)
    seen, pairs = set(), []
    for agent, post, _ in _later(log, split, kinds):
        if (agent, post) in seen:
            continue
        seen.add((agent, post))
        negative = _negative(log, agent, by_id[post], done.get(agent, set()), split, rng)
        if negative is not None:
            pairs.append((agent, post, negative))
    truth: dict[str, list[dict[str, str]]] = {}
    for agent, post, negative in _sample(pairs, (per_task + 1) // 2, rng):
        truth.setdefault(agent, []).extend([{"weibo_id": post, "label": TO_SOME["yes"]}, {"weibo_id": negative, "label": TO_SOME["no"]}])
    return truth


def _comments(log: RunLog, split: int, per_task: int, rng: np.random.Generator) -> dict[str, Any]:
    comments = [(a, p, t) for a, p, t in _later(log, split, {"comment"}) if t.strip()]
    every = [(a, p, t) for _, a, k, p, t in log.actions if k == "comment" and t.strip()]
    pairs = []
    for agent, post, text in comments:
        others = [t for a, p, t in every if p == post and a != agent and t != text] \
            or [t for a, _, t in every if a != agent and t != text]
        if others:
            pairs.append((agent, post, text, others[int(rng.integers(len(others)))]))
    truth: dict[str, list[dict[str, str]]] = {}
    for agent, post, text, other in _sample(pairs, (per_task + 1) // 2, rng):
        truth.setdefault(agent, []).extend([{"weibo_id": post, "comment": text, "label": TO_SOME["yes"]},
                                            {"weibo_id": post, "comment": other, "label": TO_SOME["no"]}])
    return truth


def _emotions(log: RunLog, split: int, per_task: int, rng: np.random.Generator) -> dict[str, Any]:
    """UEA's queries with the comment each label is read from (``emotion`` is filled by :func:`label_emotions`)."""
    comments = [(a, p, t) for a, p, t in _later(log, split, {"comment"}) if t.strip()]
    truth: dict[str, list[dict[str, str]]] = {}
    for agent, post, text in _sample(comments, per_task, rng):
        truth.setdefault(agent, []).append({"weibo_id": post, "comment": text, "emotion": ""})
    return truth


def _later(log: RunLog, split: int, kinds: set[str]) -> list[tuple[str, str, str]]:
    """(agent, post, text) of the interactions of these kinds from round ``split`` on, on others' posts."""
    authors = {p.id: p.author for p in log.posts}
    return [(a, p, t) for r, a, k, p, t in log.actions if r >= split and k in kinds and p in authors and authors[p] != a]


def _done(log: RunLog, kinds: set[str]) -> dict[str, set[str]]:
    done: dict[str, set[str]] = {}
    for _, agent, kind, post, _ in log.actions:
        if kind in kinds:
            done.setdefault(agent, set()).add(post)
    return done


def _negative(log: RunLog, agent: str, positive: Post, done: set[str], split: int, rng: np.random.Generator) -> str | None:
    """A post the agent was shown from ``split`` on and never gave this interaction, not its
    own, its text differing from the positive's; None when there is none."""
    by_id = {p.id: p for p in log.posts}
    pool = [pid for pid in log.shown_since(agent, split) if pid in by_id and pid not in done and by_id[pid].author != agent
            and by_id[pid].text.strip() != positive.text.strip()]
    return pool[int(rng.integers(len(pool)))] if pool else None


def _sample(items: list[Any], k: int, rng: np.random.Generator) -> list[Any]:
    if len(items) <= k:
        return items
    return [items[i] for i in sorted(rng.choice(len(items), size=k, replace=False))]


# --------------------------------------------------------------------------- post-centred tasks


def trending(posts: list[Post], background: Counter[str], total: int, min_posts: int, top: int) -> list[str]:
    """Terms used in at least ``min_posts`` of ``posts`` by two or more authors, not in more than
    half of the run's ``total`` posts (``background``: posts per term), most used first."""
    uses: dict[str, set[str]] = {}
    authors: dict[str, set[str]] = {}
    for post in posts:
        for term in set(topic_terms(post.text)):
            uses.setdefault(term, set()).add(post.id)
            authors.setdefault(term, set()).add(post.author)
    ranked = [t for t in uses if len(uses[t]) >= min_posts and len(authors[t]) >= 2 and background[t] * 2 <= total]
    return sorted(ranked, key=lambda t: (-len(uses[t]), -len(authors[t]), t))[:top]


def topic_terms(text: str) -> list[str]:
    return [w for w in words(text) if len(w) >= 4 and w not in STOPWORDS]


def _background(posts: list[Post]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for post in posts:
        counts.update(set(topic_terms(post.text)))
    return counts


def _engaged(posts: list[Post]) -> Post:
    return max(posts, key=lambda p: (p.likes + p.reposts + p.comments, -p.round))


def _events(log: RunLog, per_task: int, rng: np.random.Generator, window_rounds: int, min_posts: int) -> dict[str, Any]:
    background, total = _background(log.posts), len(log.posts)
    truth = {}
    for start in range(0, log.rounds, window_rounds):
        inside = [p for p in log.posts if start <= p.round < start + window_rounds and p.created]
        terms = trending(inside, background, total, min_posts, top=3)
        if not terms:
            continue
        begin, end = log.time_of(start), log.time_of(start + window_rounds)
        truth[f"{begin}_{end}_{ANYWHERE}"] = [
            {"标题": term, "摘要": _engaged([p for p in inside if term in topic_terms(p.text)]).text[:300],
             "时间": begin[:10], "地点": ""} for term in terms]
    keys = _sample(list(truth), per_task, rng)
    return {k: truth[k] for k in keys}


def _summaries(log: RunLog, per_task: int, min_posts: int) -> dict[str, str]:
    background, total = _background(log.posts), len(log.posts)
    truth = {}
    for term in trending(log.posts, background, total, max(min_posts, 3), top=per_task):
        on_topic = [p for p in log.posts if term in topic_terms(p.text)]
        shown = sorted(sorted(on_topic, key=lambda p: -(p.likes + p.reposts + p.comments))[:8], key=lambda p: (p.round, p.created))
        lines = [f"- {p.created} {p.author_name or p.author}: {p.text[:200]}" for p in shown]
        truth[term] = (f"### {term}\n{len(on_topic)} posts by {len({p.author for p in on_topic})} users, "
                       f"from {on_topic[0].created} to {on_topic[-1].created}.\n" + "\n".join(lines))
    return truth


def _questions(log: RunLog, per_task: int, rng: np.random.Generator, min_posts: int, prompts: dict[str, str]) -> dict[str, str]:
    """Question-answer pairs from the ``query_smq_user`` and ``query_smq_topic`` templates."""
    background, total = _background(log.posts), len(log.posts)
    pairs = []
    by_author: dict[str, list[Post]] = {}
    for post in log.posts:
        by_author.setdefault(post.author, []).append(post)
    for uid, posts in sorted(by_author.items()):
        counts: Counter[str] = Counter()
        for post in posts:
            counts.update(t for t in dict.fromkeys(topic_terms(post.text)) if background[t] * 2 <= total)  # text order: ties break the same every time
        if len(posts) >= 2 and counts:
            top = [t for t, _ in counts.most_common(3)]
            pairs.append((fill_prompt(prompts["query_smq_user"], uid=uid), f"Mostly about {', '.join(top)}; for example: \"{_engaged(posts).text[:150]}\""))
    for term in trending(log.posts, background, total, max(min_posts, 3), top=per_task):
        on_topic = [p for p in log.posts if term in topic_terms(p.text)]
        top_author, n = Counter(p.author for p in on_topic).most_common(1)[0]
        first = on_topic[0]
        pairs.append((fill_prompt(prompts["query_smq_topic"], topic=term), f"{log.names.get(top_author, top_author)} (ID {top_author}), with {n} posts; the first post, "
                                       f"by {first.author_name} at {first.created}, said: \"{first.text[:150]}\""))
    return dict(_sample(pairs, per_task, rng))
