"""Items and item recommenders: what the recommender-system platform and its recommenders share.

RecAgent's sandbox (Wang et al., "Simulator") serves an item catalogue through a recommender;
the platform ``recsys`` keeps the catalogue and the interaction log, and asks the run's
recommender for a ranking. Any recommender that implements :class:`ItemRecommender` works
(random and popularity are built in; matrix factorisation retrained each round fits the same
protocol: it reads :class:`ItemInteractions` and may retrain when ``version`` changes).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class Item:
    """One catalogue item. ``genres`` are the item's categories; ``prior_count`` is how often it
    was rated in the source data (a popularity prior; 0 when unknown)."""

    id: str
    title: str
    genres: tuple[str, ...] = ()
    description: str = ""
    prior_count: int = 0

    def line(self) -> str:
        """The item as an agent reads it in a list."""
        genres = "/".join(self.genres) or "no genre"
        text = f"<{self.title}> ({genres})"
        return f"{text}: {self.description}" if self.description else text


@dataclass
class ItemInteractions:
    """What the platform has seen so far, for recommenders to learn from. ``version`` grows with
    every recorded event, so a trained model knows when it is stale."""

    watched: dict[str, list[str]] = field(default_factory=dict)  # user -> item ids, in order
    ratings: dict[str, dict[str, float]] = field(default_factory=dict)  # user -> item -> rating 1-10
    shown: dict[str, Counter] = field(default_factory=dict)  # user -> item -> times shown
    watch_counts: Counter = field(default_factory=Counter)  # item -> watches by everyone
    version: int = 0

    def record_watch(self, user: str, item_id: str, rating: float | None) -> None:
        self.watched.setdefault(user, []).append(item_id)
        self.watch_counts[item_id] += 1
        if rating is not None:
            self.ratings.setdefault(user, {})[item_id] = float(rating)
        self.version += 1

    def record_shown(self, user: str, item_ids: Sequence[str]) -> None:
        self.shown.setdefault(user, Counter()).update(item_ids)
        self.version += 1

    def get_state(self) -> dict[str, Any]:
        return {"watched": {u: list(v) for u, v in self.watched.items()},
                "ratings": {u: dict(v) for u, v in self.ratings.items()},
                "shown": {u: dict(v) for u, v in self.shown.items()}, "version": self.version}

    def set_state(self, state: dict[str, Any]) -> None:
        self.watched = {u: list(v) for u, v in state.get("watched", {}).items()}
        self.ratings = {u: {i: float(r) for i, r in v.items()} for u, v in state.get("ratings", {}).items()}
        self.shown = {u: Counter(v) for u, v in state.get("shown", {}).items()}
        self.watch_counts = Counter(i for items in self.watched.values() for i in items)
        self.version = int(state.get("version", 0))


@runtime_checkable
class ItemRecommender(Protocol):
    """Ranks ``candidates`` (the catalogue less what ``viewer`` watched) for ``viewer``; returns
    at most ``limit`` of them, best first. ``rng`` is the viewer's generator."""

    def rank_items(self, viewer: str, candidates: Sequence[Item], limit: int, rng: Any,
                   interactions: ItemInteractions) -> list[Item]: ...

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...
