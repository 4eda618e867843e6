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
``embedding_baseline`` does), ``llm`` (the bare model: the history and the numbered list in the
prompt ``discrimination`` of ``prompts/studies.toml``) and ``agent`` (the RecAgent agent itself,
built by the scenario's components: a ``movielens_history``-style profile of the history, the
history written into its memory tiers before it chooses, and its policy's four-part prompt
``pick`` with the list as the page on its screen). Both LLM selectors pick one item at a time,
a times, each answer a label of the remaining list (a malformed answer is repaired once, then
the first remaining item).

The generation test (fig. 2b): for each sampled user the last ``n`` items are the reference
behaviours (RB); the agent and the Embedding baseline each generate ``n`` behaviours, one a
step, from the same page of ``page_size`` items the user never rated (drawn at random: the
paper does not say which recommender served its pages); then a judge (an LLM in the
annotators' place: the prompt ``judge``) sees the user's earlier movies and two sequences,
the simulator's and RB in random order, and answers which is more like the real person's, or
"indistinguishable". A simulator *wins* when the judge picks its sequence, *loses* when it
picks RB. The paper's annotators were three people; here one model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from townsquare.api import UsageError
from townsquare.lib.items import Item
from townsquare.lib.movielens import load_movielens_data

from ..prompts import fill, load_prompts

#: (a, b) pairs evaluated by default (our choice: 1 or 3 right answers among 5 or 10 items)
GRID: tuple[tuple[int, int], ...] = ((1, 5), (1, 10), (3, 5), (3, 10))
HISTORY_SHOWN = 20
#: earlier ratings an agent of the tests keeps in its persona (the candidates exclude them all anyway)
CASE_HISTORY = 150


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


def read_ratings(folder: str | Path) -> dict[str, dict[str, float]]:
    """Each user's ratings (item id -> rating on the dataset's scale)."""
    out: dict[str, dict[str, float]] = {}
    for r in load_movielens_data(folder).ratings:
        out.setdefault(r.user, {})[r.item] = r.rating
    return out


def case_persona(user: str, history: Sequence[Item], ratings: Mapping[str, float]) -> dict[str, Any]:
    """The persona (as a JSON Lines row) of the agent profiled by ``history``."""
    from ..recagent_profiles import RecAgentProfilesConfig, history_profile, profile_persona

    # the latest 150 ratings: a persona file's rows stay within the scenario's max_persona_chars
    fields = history_profile(user, [(item, ratings.get(item.id), n) for n, item in enumerate(history)], [],
                             RecAgentProfilesConfig(history_limit=CASE_HISTORY))
    return profile_persona(fields).to_dict()


async def select_agent(case: Case, a: int, policy: Any, ctx: Any) -> set[str]:
    remaining = list(case.candidates)
    picked: list[Item] = []
    for _ in range(a):
        item = await policy.pick(ctx, remaining, picked)
        remaining.remove(item)
        picked.append(item)
    return {i.id for i in picked}


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
                   seed: int, embedder: Any = None, llm: Any = None, agents: Any = None, prompts_file: str | None = None,
                   base_dir: str = ".") -> list[dict[str, Any]]:
    """One row per (a, b): p and p/|U| for each selector available. ``agents(cases)`` builds a
    RecAgent agent per case: {user: (its policy, its step context)}."""
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
            picks["llm"] = {c.user: await select_llm(c, a, llm.for_agent(f"ml-{c.user}"), prompt) for c in cases}
        if agents is not None:
            built = await agents(cases)
            picks["agent"] = {c.user: await select_agent(c, a, *built[c.user]) for c in cases}
        row: dict[str, Any] = {"a": a, "b": b, "users": len(cases)}
        for name, selected in picks.items():
            p = precision_p(truth, selected)
            row[name] = p
            row[f"{name}_mean"] = p / len(cases)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------- generation (fig. 2b)

VERDICTS = ("A", "B", "indistinguishable")


@dataclass(frozen=True)
class GenerationCase:
    user: str
    history: tuple[Item, ...]
    reference: tuple[Item, ...]
    pages: tuple[tuple[Item, ...], ...]


def make_generation_cases(items: Mapping[str, Item], histories: Mapping[str, list[str]], n: int, users: int, page_size: int,
                          rng: Any) -> list[GenerationCase]:
    """``users`` users with more than ``n`` rated items: their last ``n`` are the reference; one
    page per step of items they never rated."""
    eligible = sorted((u for u, h in histories.items() if len(h) > n), key=_user_key)
    if not eligible:
        raise UsageError(f"generation: no user has more than n = {n} rated items")
    chosen = [eligible[int(i)] for i in sorted(rng.choice(len(eligible), size=min(users, len(eligible)), replace=False))]
    ids = sorted(items, key=_user_key)
    cases = []
    for user in chosen:
        seen = set(histories[user])
        unrated = [i for i in ids if i not in seen]
        pages = tuple(tuple(items[unrated[int(k)]] for k in rng.choice(len(unrated), size=min(page_size, len(unrated)), replace=False))
                      for _ in range(n))
        history = histories[user]
        cases.append(GenerationCase(user, tuple(items[i] for i in history[:-n]), tuple(items[i] for i in history[-n:]), pages))
    return cases


async def generate_embedding(case: GenerationCase, embedder: Any) -> list[Item]:
    profile = (await embedder.embed([i.line() for i in case.history])).mean(axis=0) if case.history else None
    chosen: list[Item] = []
    for page in case.pages:
        page = [i for i in page if i not in chosen] or list(page)
        scores = (await embedder.embed([i.line() for i in page])) @ profile if profile is not None else np.zeros(len(page))
        chosen.append(page[int(np.argmax(scores))])
    return chosen


async def generate_agent(case: GenerationCase, policy: Any, ctx: Any) -> list[Item]:
    chosen: list[Item] = []
    for page in case.pages:
        page = [i for i in page if i not in chosen] or list(page)
        chosen.append(await policy.pick(ctx, page, chosen))
    return chosen


def sequence(items: Sequence[Item]) -> str:
    return "\n".join(f"- {i.line()}" for i in items)


async def judge(case: GenerationCase, simulated: Sequence[Item], llm: Any, prompt: str, rng: Any) -> str:
    """"win", "lose" or "indistinguishable" for the simulator's sequence against RB."""
    simulator_first = bool(rng.random() < 0.5)
    first, second = (simulated, case.reference) if simulator_first else (case.reference, simulated)
    history = sequence(case.history[-HISTORY_SHOWN:]) or "- (none)"
    answer = await llm.choose(fill(prompt, history=history, first=sequence(first), second=sequence(second)), VERDICTS,
                              purpose="recagent.judge", default="indistinguishable")
    if answer == "indistinguishable":
        return answer
    return "win" if (answer == "A") == simulator_first else "lose"


async def generation(items: Mapping[str, Item], histories: Mapping[str, list[str]], *, users: int, lengths: Sequence[int],
                     page_size: int, seed: int, judge_llm: Any, embedder: Any = None, agents: Any = None,
                     prompts_file: str | None = None, base_dir: str = ".") -> list[dict[str, Any]]:
    """One row per N: the win / lose / indistinguishable shares of each simulator against RB."""
    prompt = load_prompts("studies", {"judge": frozenset({"history", "first", "second"})}, prompts_file, base_dir)["judge"]
    rows = []
    for n in lengths:
        rng = np.random.default_rng([seed, 73, n])
        cases = make_generation_cases(items, histories, n, users, page_size, rng)
        simulated: dict[str, dict[str, list[Item]]] = {}
        if embedder is not None:
            simulated["embedding"] = {c.user: await generate_embedding(c, embedder) for c in cases}
        if agents is not None:
            built = await agents([Case(c.user, c.history, frozenset(), ()) for c in cases])
            simulated["agent"] = {c.user: await generate_agent(c, *built[c.user]) for c in cases}
        row: dict[str, Any] = {"n": n, "users": len(cases)}
        for name, sequences in simulated.items():
            verdicts = [await judge(c, sequences[c.user], judge_llm.for_agent(f"judge-{c.user}"), prompt, rng) for c in cases]
            for verdict in ("win", "lose", "indistinguishable"):
                row[f"{name}_{verdict}"] = verdicts.count(verdict) / len(verdicts)
        rows.append(row)
    return rows
