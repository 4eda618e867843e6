"""Traces drawn from known distributions, for the validation tests: users whose activity is
Pareto, whose events fall by an hour-of-day and a weekday profile, who rate by a categorical
distribution and choose items by a Zipf law, and cascades that grow as Galton-Watson trees."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from townsquare.lib.validation import Cascade, Trace

DAY = 86400.0
START = 883612800.0  # 1998-01-01 00:00 UTC, a Thursday
GENRES = ("Action", "Comedy", "Drama", "Horror", "Romance", "Sci-Fi", "War", "Western")
ITEMS = 300


@dataclass(frozen=True)
class Population:
    """The distributions a synthetic population draws from."""

    alpha: float = 1.2                      # Pareto shape of events per user
    x_min: float = 4.0
    hours: tuple[float, ...] = tuple(1.0 + 2.0 * np.exp(-((h - 20) % 24 - 0) ** 2 / 8) for h in range(24))
    weekdays: tuple[float, ...] = (1, 1, 1, 1, 1, 1, 1)
    sessions: float = 0.3                   # chance that an event starts a new session (else minutes after the last)
    ratings: tuple[float, ...] = (0.06, 0.11, 0.27, 0.34, 0.22)
    zipf: float = 1.0                       # item popularity ~ 1 / rank^zipf
    offspring: float = 0.8                  # mean children of a cascade node (Poisson)
    genres: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)


def item_genres() -> dict[str, tuple[str, ...]]:
    rng = np.random.default_rng(12345)  # the same catalogue for every trace
    return {str(i): tuple(sorted(set(rng.choice(GENRES, size=rng.integers(1, 4))))) for i in range(ITEMS)}


def draw(name: str, population: Population, users: int, seed: int, cascades: int = 0, days: float = 60.0) -> Trace:
    rng = np.random.default_rng(seed)
    hours = np.asarray(population.hours) / np.sum(population.hours)
    weekdays = np.asarray(population.weekdays, dtype=float) / np.sum(population.weekdays)
    popularity = 1.0 / np.arange(1, ITEMS + 1) ** population.zipf
    popularity /= popularity.sum()
    counts = np.minimum(400, (population.x_min * (1 - rng.random(users)) ** (-1 / population.alpha)).astype(int))
    total = int(counts.sum())
    new_session = rng.random(total) < population.sessions
    new_session[np.r_[0, np.cumsum(counts)[:-1]]] = True  # every user's first event starts a session
    day_weights = weekdays[(np.arange(int(days)) + 3) % 7]
    days_drawn = rng.choice(int(days), size=total, p=day_weights / day_weights.sum())
    starts = START + days_drawn * DAY + rng.choice(24, size=total, p=hours) * 3600 + rng.random(total) * 3600
    later = rng.exponential(300.0, size=total)
    times = np.empty(total)
    for n in range(total):
        times[n] = starts[n] if new_session[n] else times[n - 1] + later[n]
    owners = np.repeat(np.arange(users), counts)
    items = rng.choice(ITEMS, size=total, p=popularity)
    ratings = rng.choice(5, size=total, p=population.ratings) + 1
    events = [(f"{name}-u{u}", float(t), "rate", str(i), float(r)) for u, t, i, r in zip(owners, times, items, ratings)]
    trees = [_tree(rng, users, name, population.offspring, k) for k in range(cascades)]
    interactions = [(c.users[n], c.users[c.parent[n]]) for c in trees for n in range(1, c.size) if c.users[n] != c.users[c.parent[n]]]
    return Trace.from_events(name, events, rating_scale=(1.0, 5.0), genres=item_genres(), catalogue=tuple(str(i) for i in range(ITEMS)),
                             cascades=trees, interactions=interactions, span=2 * DAY, source="synthetic")


def _tree(rng: np.random.Generator, users: int, name: str, offspring: float, k: int) -> Cascade:
    start = START + rng.random() * 30 * DAY
    people, times, parent = [f"{name}-u{rng.integers(users)}"], [start], [-1]
    frontier = [0]
    while frontier and len(people) < 300:
        node = frontier.pop(0)
        for _ in range(rng.poisson(offspring)):
            people.append(f"{name}-u{rng.integers(users)}")
            times.append(times[node] + rng.exponential(1800.0))
            parent.append(node)
            frontier.append(len(people) - 1)
    return Cascade(id=f"{name}-c{k}", users=people, times=np.asarray(times), parent=np.asarray(parent))


def write_movielens(trace: Trace, folder) -> None:
    """``trace`` as a MovieLens folder in the "latest" CSV layout (movies.csv, ratings.csv)."""
    import csv
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "movies.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["movieId", "title", "genres"])
        for item in trace.catalogue:
            writer.writerow([item, f"Film {item} (1990)", "|".join(trace.genres.get(item, ()))])
    with open(folder / "ratings.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["userId", "movieId", "rating", "timestamp"])
        for user, item, rating, time in zip(trace.users.tolist(), trace.items.tolist(), trace.ratings.tolist(), trace.times.tolist()):
            writer.writerow([user.rsplit("-u", 1)[-1], item, rating, int(time)])


RECSYS_SCENARIO = """name = "rs"
seed = 1
rounds = {rounds}
[clock]
start = 1998-01-05T08:00:00
minutes_per_round = 300
[activity]
alpha = 2.0
x_min = 2.0
[platform]
name = "recsys"
catalogue = "movielens"
path = "{folder}"
page_size = 5
[recommender]
name = "item_popularity"
[llm]
name = "oracle"
[[populations]]
name = "users"
count = {count}
slots = {{ policy = "recagent_policy" }}
[populations.personas]
name = "movielens_history"
path = "{folder}"
"""


def recsys_study(root, rounds: int, count: int):
    """A MovieLens-shaped trace of 80 people drawn from :class:`Population` in ``root/trace``, and
    a RecAgent scenario on its movies and users (the oracle test model) in ``root/rs.toml``."""
    write_movielens(draw("real", Population(), users=80, seed=1), root / "trace")
    scenario = root / "rs.toml"
    scenario.write_text(RECSYS_SCENARIO.format(rounds=rounds, count=count, folder=root / "trace"))
    return scenario
