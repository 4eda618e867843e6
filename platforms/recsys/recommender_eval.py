"""Offline evaluation of the item recommenders, as a recommender-systems reader expects it. Not a
plugin (the ``recsys`` plugin registers the command ``townsquare eval recommenders``).

RecAgent's simulator is "agnostic to the recommendation algorithms" and lets researchers
"examine the effectiveness of different models" (Wang et al., "Recommendation Algorithm"). Here
every registered item recommender is trained on the same interactions and scored on held-out
ones:

- **splits**: ``leave-last-out`` (each user's last interaction by time is the test item),
  ``temporal`` (each user's latest ``test_fraction`` of its interactions, at least one, are
  its test items) or ``global-temporal`` (one time cut for everyone: the latest
  ``test_fraction`` of all interactions, for the users who have earlier ones; strict about
  time, but on ml-latest-small it leaves 23 of 671 users to test). Users with fewer than two
  interactions only train;
- **candidates**: every catalogue item the user did not interact with in training (as the
  platform offers them: ``exclude_seen``);
- **metrics**, over the users with test items, lists of length K: ``recall`` (Recall@K, the
  share of a user's test items in its list), ``ndcg`` (NDCG@K, binary gains, log2 discount),
  ``coverage`` (the share of the catalogue in at least one list), ``gini`` (Gini coefficient of
  how often each catalogue item is listed: 0 every item equally, 1 one item only) and
  ``popularity`` (average recommendation popularity, Abdollahpouri et al. 2019: the mean over
  users of the mean share of training users who interacted with each listed item).

Sources: a MovieLens folder (its ratings, every one an interaction), or a run directory: its
simulated watches (``simulated``, the split applied to them; training also sees the personas'
earlier ratings when the run logged them) and, when its personas hold MovieLens users' later
ratings (``future_items``), the **held-out real ratings** (``held_out``: trained on everything
the run's log holds, tested on those).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

import numpy as np

from townsquare.api import BuildContext, UsageError
from townsquare.lib.items import Item, ItemInteractions

SPLITS = ("leave-last-out", "temporal", "global-temporal")


@dataclass(frozen=True)
class Interaction:
    user: str
    item: str
    time: float
    rating: float | None = None


@dataclass
class Split:
    train: list[Interaction]
    test: dict[str, set[str]] = field(default_factory=dict)


def split(interactions: Sequence[Interaction], how: str = "leave-last-out", test_fraction: float = 0.2) -> Split:
    """``interactions`` into training and per-user test items (see the module docstring)."""
    if how not in SPLITS:
        raise UsageError(f"--split {how}: expected one of {', '.join(SPLITS)}")
    ordered = sorted(enumerate(interactions), key=lambda p: (p[1].time, p[0]))
    if how == "temporal":
        by_user: dict[str, list[int]] = defaultdict(list)
        for n, x in ordered:
            by_user[x.user].append(n)
        held = {n for ns in by_user.values() if len(ns) >= 2 for n in ns[len(ns) - max(1, int(round(len(ns) * test_fraction))):]}
        seen: dict[str, set[str]] = defaultdict(set)
        for n, x in ordered:
            if n not in held:
                seen[x.user].add(x.item)
        test: dict[str, set[str]] = defaultdict(set)
        for n in held:
            x = interactions[n]
            if x.item not in seen[x.user]:
                test[x.user].add(x.item)
        return Split([x for n, x in ordered if n not in held], dict(test))
    if how == "leave-last-out":
        last: dict[str, int] = {}
        count: Counter = Counter()
        for n, x in ordered:
            last[x.user] = n
            count[x.user] += 1
        held = {n for user, n in last.items() if count[user] >= 2}
        train = [x for n, x in ordered if n not in held]
        test: dict[str, set[str]] = defaultdict(set)
        for n in held:
            test[interactions[n].user].add(interactions[n].item)
        return Split(train, dict(test))
    cut = int(round(len(ordered) * (1 - test_fraction)))
    train = [x for _, x in ordered[:cut]]
    trained = {x.user for x in train}
    test = defaultdict(set)
    for _, x in ordered[cut:]:
        if x.user in trained:
            test[x.user].add(x.item)
    seen = defaultdict(set)
    for x in train:
        seen[x.user].add(x.item)
    return Split(train, {u: items - seen[u] for u, items in test.items() if items - seen[u]})


def log_of(train: Iterable[Interaction]) -> ItemInteractions:
    """The training interactions as the platform's log (each one a watch, with its rating)."""
    log = ItemInteractions()
    for x in train:
        log.record_watch(x.user, x.item, x.rating)
    return log


# ---------------------------------------------------------------------- the measures


def recall_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    return len(set(ranked[:k]) & relevant) / len(relevant) if relevant else 0.0


def ndcg_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, item in enumerate(ranked[:k]) if item in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal if ideal else 0.0


def gini(counts: Sequence[float]) -> float:
    """Gini coefficient of ``counts`` (one per catalogue item, zeros included)."""
    x = np.sort(np.asarray(counts, dtype=float))
    n, total = len(x), x.sum()
    if n == 0 or total == 0:
        return 0.0
    return float(np.sum((2 * np.arange(1, n + 1) - n - 1) * x) / (n * total))


def measure(lists: dict[str, list[str]], test: dict[str, set[str]], catalogue_ids: Sequence[str], popularity: dict[str, float],
            k: int) -> dict[str, float]:
    users = [u for u in test if u in lists]
    exposure = Counter(i for u in users for i in lists[u][:k])
    arp = [np.mean([popularity.get(i, 0.0) for i in lists[u][:k]]) for u in users if lists[u][:k]]
    return {
        "users": float(len(users)),
        "recall": float(np.mean([recall_at(lists[u], test[u], k) for u in users])) if users else 0.0,
        "ndcg": float(np.mean([ndcg_at(lists[u], test[u], k) for u in users])) if users else 0.0,
        "coverage": len(exposure) / len(catalogue_ids) if catalogue_ids else 0.0,
        "gini": gini([exposure.get(i, 0) for i in catalogue_ids]),
        "popularity": float(np.mean(arp)) if arp else 0.0,
    }


# ---------------------------------------------------------------------- running the recommenders


class _Stage:
    """What a recommender may read of the platform while it is evaluated: the catalogue and no
    agents (``item_embedding`` falls back to the items a user watched)."""

    def __init__(self, items: Sequence[Item]):
        self.catalogue = type("Catalogue", (), {"items": list(items)})()
        self.members: dict[str, Any] = {}


def build_recommender(spec: Any, config: Any, items: Sequence[Item], embedder: Any, seed: int) -> Any:
    from townsquare.api import Services

    services = Services(platform=_Stage(items), embedder=embedder)  # type: ignore[arg-type]
    return spec.factory(config, BuildContext(services=services, seed=seed))


async def rank_all(recommender: Any, items: Sequence[Item], log: ItemInteractions, users: Iterable[str], k: int,
                   seed: int) -> dict[str, list[str]]:
    """Each user's top ``k`` over the catalogue less what it interacted with in training."""
    observer = getattr(recommender, "on_round_start", None)
    if callable(observer):
        result = observer(0, None)
        if asyncio.iscoroutine(result):
            await result
    out = {}
    for n, user in enumerate(sorted(users)):
        seen = set(log.watched.get(user, ()))
        candidates = [item for item in items if item.id not in seen]
        rng = np.random.default_rng([seed, 61, n])
        out[user] = [item.id for item in recommender.rank_items(user, candidates, k, rng, log)]
    return out


async def evaluate(specs: dict[str, tuple[Any, Any]], items: Sequence[Item], data: Split, *, k: int, seed: int,
                   embedder: Any, extra_train: Sequence[Interaction] = ()) -> dict[str, dict[str, float]]:
    """One row of measures per recommender (``specs``: name -> (spec, config))."""
    items = [replace(item, prior_count=0) for item in items]  # no popularity prior from outside the training data
    train = [*extra_train, *data.train]
    log = log_of(train)
    users_in_train = {x.user for x in train}
    popularity = Counter(item for _, item in {(x.user, x.item) for x in train})
    shares = {i: n / max(1, len(users_in_train)) for i, n in popularity.items()}
    ids = [item.id for item in items]
    rows = {}
    for name, (spec, config) in specs.items():
        recommender = build_recommender(spec, config, items, embedder, seed)
        lists = await rank_all(recommender, items, log, data.test, k, seed)
        rows[name] = measure(lists, data.test, ids, shares, k)
    return rows


def item_recommenders(plugins: Any, wanted: Sequence[str] = ()) -> dict[str, tuple[Any, Any]]:
    """The registered recommenders that rank items (name -> (spec, default config))."""
    registry = plugins.registry
    names = list(wanted) or registry.names("recommender")
    out = {}
    for name in names:
        spec = registry.get("recommender", name, "--recommender")
        config = spec.config_model() if spec.config_model is not None else None
        probe = build_recommender(spec, config, [Item("x", "x")], None, 0)
        if hasattr(probe, "rank_items"):
            out[name] = (spec, config)
        elif wanted:
            raise UsageError(f"--recommender {name}: not an item recommender")
    if not out:
        raise UsageError("no item recommender is registered (item_random, item_popularity, item_mf, item_embedding)")
    return out


def format_table(sections: dict[str, dict[str, dict[str, float]]], k: int) -> str:
    lines = []
    for title, rows in sections.items():
        lines.append(f"{title}")
        lines.append(f"  {'recommender':<16} {'users':>6} {f'Recall@{k}':>10} {f'NDCG@{k}':>9} {'coverage':>9} {'Gini':>6} {'popularity':>10}")
        for name, r in rows.items():
            lines.append(f"  {name:<16} {int(r['users']):>6} {r['recall']:>10.4f} {r['ndcg']:>9.4f} {r['coverage']:>9.4f} "
                         f"{r['gini']:>6.3f} {r['popularity']:>10.4f}")
    return "\n".join(lines)
