"""The discrimination test (Wang et al., "Believability of the simulated user behaviors",
"Behaviors in the recommender system", fig. 2a).

For each of ``users`` sampled MovieLens users, the last ``a`` items they rated (by time) are the
ground truth T_u and the earlier ones build the agent's profile; the truth is mixed with ``b``
negatives (items the user never rated, drawn at random) into a list of a + b items, the agent
selects ``a`` of them (S_u), and

    p = sum_{u in U} |T_u ∩ S_u| / |T_u|

The table prints p / |U| (the mean per user, the scale of fig. 2a's axis) next to p. The paper
does not list its (a, b) grid in the text; the default :data:`GRID` is ours, ``--grid`` sets it.

Selectors computed the same way: ``random`` (a uniform choice of a), ``embedding`` (the
Embedding baseline: the a items whose text embedding is closest to the mean embedding of the
user's history; the paper's [26] learns PMF vectors, we use the run's embedder as
``embedding_baseline`` does) and ``llm`` (the agent: its history as a profile and the numbered
list in the prompt ``discrimination`` of ``prompts/studies.toml``; it picks one item at a time, a
times, each answer a label of the remaining list, so a malformed answer is repaired once and
then falls back to the first remaining item).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from townsquare.api import Item, UsageError, load_movielens_data

from ..prompts import fill, load_prompts

#: (a, b) pairs evaluated by default (our choice: 1 or 3 right answers among 5 or 10 items)
GRID: tuple[tuple[int, int], ...] = ((1, 5), (1, 10), (3, 5), (3, 10))
HISTORY_SHOWN = 20


@dataclass(frozen=True)
class Case:
    """One user's test: the profile history, the ground truth and the shuffled list."""

    user: str
    history: tuple[Item, ...]
    truth: frozenset[str]
    candidates: tuple[Item, ...]


def precision_p(truth: Mapping[str, set[str] | frozenset[str]], selected: Mapping[str, set[str]]) -> float:
    """p = sum_u |T_u ∩ S_u| / |T_u| (users with an empty truth are skipped)."""
    return sum(len(set(t) & set(selected.get(u, ()))) / len(t) for u, t in truth.items() if t)


def read_histories(folder: str | Path) -> tuple[dict[str, Item], dict[str, list[str]]]:
    """A MovieLens folder (any layout): items by id, and each user's rated item ids ordered by
    timestamp (then file order)."""
    data = load_movielens_data(folder)
    if not data.ratings:
        raise UsageError(f"{folder}: no ratings (the discrimination test needs MovieLens ratings)")
    return {item.id: item for item in data.items}, {u: [r.item for r in h] for u, h in data.histories().items()}


def make_cases(items: Mapping[str, Item], histories: Mapping[str, list[str]], a: int, b: int, users: int, rng: Any) -> list[Case]:
    """``users`` users (sampled among those with more than ``a`` items) and their lists."""
    eligible = sorted((u for u, h in histories.items() if len(h) > a and len(items) - len(set(h)) >= b), key=_user_key)
    if not eligible:
        raise UsageError(f"discrimination: no user has more than a = {a} rated items and {b} unrated ones")
    chosen = [eligible[int(i)] for i in sorted(rng.choice(len(eligible), size=min(users, len(eligible)), replace=False))]
    ids = sorted(items, key=_user_key)
    cases = []
    for user in chosen:
        history = histories[user]
        seen = set(history)
        unrated = [i for i in ids if i not in seen]
        negatives = [unrated[int(k)] for k in rng.choice(len(unrated), size=b, replace=False)]
        listed = [*history[-a:], *negatives]
        order = rng.permutation(len(listed))
        cases.append(Case(user, tuple(items[i] for i in history[:-a]), frozenset(history[-a:]),
                          tuple(items[listed[int(k)]] for k in order)))
    return cases


def _user_key(value: str) -> tuple[int, str]:
    return (int(value), value) if value.isdigit() else (1 << 62, value)


def select_random(case: Case, a: int, rng: Any) -> set[str]:
    return {case.candidates[int(k)].id for k in rng.choice(len(case.candidates), size=a, replace=False)}


async def select_embedding(case: Case, a: int, embedder: Any) -> set[str]:
    if not case.history:
        return {item.id for item in case.candidates[:a]}
    profile = (await embedder.embed([i.line() for i in case.history])).mean(axis=0)
    scores = (await embedder.embed([i.line() for i in case.candidates])) @ profile
    return {case.candidates[int(k)].id for k in np.argsort(-scores, kind="stable")[:a]}


async def select_llm(case: Case, a: int, llm: Any, prompt: str) -> set[str]:
    remaining = list(case.candidates)
    history = "\n".join(f"- {i.line()}" for i in case.history[-HISTORY_SHOWN:]) or "- (none)"
    picked: list[Item] = []
    for _ in range(a):
        listing = "\n".join(f"{n + 1}. {i.line()}" for n, i in enumerate(remaining))
        already = f"You have already chosen: {', '.join(i.title for i in picked)}.\n" if picked else ""
        labels = tuple(str(n + 1) for n in range(len(remaining)))
        answer = await llm.choose(fill(prompt, history=history, candidates=listing, picked=already), labels,
                                  purpose="recagent.discrimination", default="1")
        picked.append(remaining.pop(int(answer) - 1))
    return {i.id for i in picked}


async def evaluate(items: Mapping[str, Item], histories: Mapping[str, list[str]], *, users: int, grid: Sequence[tuple[int, int]],
                   seed: int, embedder: Any = None, llm: Any = None, prompts_file: str | None = None,
                   base_dir: str = ".") -> list[dict[str, Any]]:
    """One row per (a, b): p and p/|U| for each selector available."""
    prompt = load_prompts("studies", {"discrimination": frozenset({"history", "candidates", "picked"})}, prompts_file, base_dir)["discrimination"]
    rows = []
    for a, b in grid:
        rng = np.random.default_rng([seed, a, b])
        cases = make_cases(items, histories, a, b, users, rng)
        truth = {c.user: c.truth for c in cases}
        picks: dict[str, dict[str, set[str]]] = {"random": {c.user: select_random(c, a, rng) for c in cases}}
        if embedder is not None:
            picks["embedding"] = {c.user: await select_embedding(c, a, embedder) for c in cases}
        if llm is not None:
            picks["agent"] = {c.user: await select_llm(c, a, llm.for_agent(f"ml-{c.user}"), prompt) for c in cases}
        row: dict[str, Any] = {"a": a, "b": b, "users": len(cases)}
        for name, selected in picks.items():
            p = precision_p(truth, selected)
            row[name] = p
            row[f"{name}_mean"] = p / len(cases)
        rows.append(row)
    return rows
