"""What ``townsquare validate`` compares: a trace of what people (or agents) did, and what a
validation dimension measures on it.

A dimension plugin (``townsquare_register_validation_dimensions``) sees every run and the real
trace in one shape, :class:`Trace`, and returns a :class:`Measurement`; the command does the
rest (the distance between real and simulated, its interval over replicates, the trace's own
split-half floor, the ratio of variances across users, the plots)::

    from townsquare.api import ValidationDimensionSpec, hookimpl
    from townsquare.lib.validation import Measurement

    class ActiveHours:
        unit, distance, label = "user", "ks", "median distinct hours a user is active in"

        def applies(self, trace):
            return None if trace.absolute_times else "the trace has no clock times"

        def measure(self, trace, reference):
            hours = [len(set(h.astype(int))) for h in trace.per_user(trace.hours()).values()]
            return Measurement(value=float(np.median(hours)), sample=np.asarray(hours, float),
                               per_user=np.asarray(hours, float))

    @hookimpl
    def townsquare_register_validation_dimensions():
        return [ValidationDimensionSpec("active_hours", lambda config, ctx: ActiveHours())]

A dimension's ``distance`` is how the command compares: ``ks`` (two-sample Kolmogorov-Smirnov
statistic of ``sample``), ``js`` (Jensen-Shannon divergence, base 2, of ``histogram``),
``relative_error`` (of ``value``) or ``nrmse`` (root-mean-square error of ``curve`` over
``grid``, divided by the range of the real curve). ``unit`` is what the floor splits: the
trace's ``user``\\ s or its ``cascade``\\ s.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Iterable, Protocol

import numpy as np

#: the kinds of event a trace holds, in one vocabulary: ``rate`` (an item consumed and rated: a
#: MovieLens rating, a RecAgent watch), ``post``, ``comment``, ``repost``, ``like``
EVENT_KINDS = ("rate", "post", "comment", "repost", "like")


@dataclass
class Cascade:
    """One cascade: a root post and what spread from it, as a tree. Node 0 is the root;
    ``parent[i]`` is node i's parent (-1 for the root); ``times`` are Unix seconds (or, in a
    trace without clock times, seconds after the root)."""

    id: str
    users: list[str]
    times: np.ndarray
    parent: np.ndarray

    @property
    def size(self) -> int:
        return len(self.users)

    def depths(self) -> np.ndarray:
        """Each node's distance from the root."""
        depth = np.zeros(self.size, dtype=np.int64)
        for node in _parents_first(self.parent):
            if self.parent[node] >= 0:
                depth[node] = depth[self.parent[node]] + 1
        return depth


def _parents_first(parent: np.ndarray) -> list[int]:
    children: dict[int, list[int]] = {}
    for node, up in enumerate(parent):
        children.setdefault(int(up), []).append(node)
    order, stack = [], list(children.get(-1, []))
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(children.get(node, []))
    return order


@dataclass
class Trace:
    """What a population did, event by event (the columns are parallel arrays), with what the
    trace knows besides: items' genres, the follow graph, who answered whom, cascades."""

    name: str
    users: np.ndarray
    times: np.ndarray
    kinds: np.ndarray
    items: np.ndarray
    ratings: np.ndarray
    #: the lowest and highest rating (None: no ratings)
    rating_scale: tuple[float, float] | None = None
    #: item id -> its genres
    genres: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: every item the population could choose from (empty: the items of the events)
    catalogue: tuple[str, ...] = ()
    #: (follower, followee) at the end of the trace
    follows: list[tuple[str, str]] = field(default_factory=list)
    #: (actor, the user answered or reshared) of each comment and repost
    interactions: list[tuple[str, str]] = field(default_factory=list)
    cascades: list[Cascade] = field(default_factory=list)
    #: False: times are relative (seconds after each cascade's root), not a clock
    absolute_times: bool = True
    #: seconds: an event stamped ``t`` happened somewhere in ``[t, t + resolution)`` (a
    #: simulation's round); 0 for exact times
    resolution: float = 0.0
    #: the comparison's time grain and span in seconds, the same on the trace and the runs
    #: (``validate`` sets them: the runs' round length and how long they ran); dimensions of
    #: time differences and growth measure on that grid
    grain: float = 0.0
    span: float = 0.0
    #: everyone who could have acted (a run's agents); empty: the users with events
    population: tuple[str, ...] = ()
    #: how the trace was made (a run's folder, a dataset's name), for reports
    source: str = ""

    def __len__(self) -> int:
        return len(self.users)

    @classmethod
    def from_events(cls, name: str, events: Iterable[tuple[str, float, str, str, float]], **extra: Any) -> "Trace":
        """A trace from ``(user, time, kind, item, rating)`` rows (item ``""`` and rating nan
        where an event has none)."""
        rows = list(events)
        columns = list(zip(*rows)) if rows else [(), (), (), (), ()]
        return cls(name=name, users=np.asarray(columns[0], dtype=str), times=np.asarray(columns[1], dtype=np.float64),
                   kinds=np.asarray(columns[2], dtype=str), items=np.asarray(columns[3], dtype=str),
                   ratings=np.asarray(columns[4], dtype=np.float64), **extra)

    @cached_property
    def user_index(self) -> tuple[np.ndarray, np.ndarray]:
        """The users with events (sorted) and, per event, its user's position among them."""
        names, codes = np.unique(self.users, return_inverse=True)
        return names, codes.reshape(-1)

    def user_ids(self) -> list[str]:
        """Every user the trace knows: its population, else those with events, sorted."""
        return sorted(set(self.population) or set(self.user_index[0].tolist()))

    def events_per_user(self) -> np.ndarray:
        """How many events each user with events has (in the order of ``user_index``)."""
        return np.bincount(self.user_index[1], minlength=len(self.user_index[0]))

    def per_user(self, values: np.ndarray) -> dict[str, np.ndarray]:
        """``values`` (one per event) grouped by user, each group in time order."""
        if not len(self.users):
            return {}
        names, codes = self.user_index
        order = np.lexsort((self.times, codes))
        ordered, grouped = np.asarray(values)[order], codes[order]
        starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
        return {str(names[grouped[s]]): ordered[s:e] for s, e in zip(starts, np.r_[starts[1:], len(grouped)])}

    def hours(self) -> np.ndarray:
        """Each event's hour of the day (0-23, float: the trace's clock is what it says)."""
        return (self.times % 86400) / 3600

    def of_kinds(self, kinds: Iterable[str]) -> "Trace":
        """The events of these kinds only (everything else kept)."""
        return self._events(np.isin(self.kinds, list(kinds)))

    def of_users(self, users: Iterable[str]) -> "Trace":
        """These users' events, the follows that touch them, the comments and reposts they
        received, and the cascades they started; ``population`` becomes ``users``."""
        chosen = {str(u) for u in users}
        names, codes = self.user_index
        keep = np.fromiter((name in chosen for name in names.tolist()), dtype=bool, count=len(names))
        return replace(self._events(keep[codes] if len(codes) else np.zeros(0, dtype=bool)), population=tuple(sorted(chosen)),
                       follows=[e for e in self.follows if e[0] in chosen or e[1] in chosen],
                       interactions=[e for e in self.interactions if e[1] in chosen],
                       cascades=[c for c in self.cascades if c.users and c.users[0] in chosen])

    def of_cascades(self, indices: Iterable[int]) -> "Trace":
        """Only these cascades (the events stay: a cascade dimension reads the cascades)."""
        return replace(self, cascades=[self.cascades[i] for i in indices])

    def _events(self, keep: np.ndarray) -> "Trace":
        return replace(self, users=self.users[keep], times=self.times[keep], kinds=self.kinds[keep], items=self.items[keep],
                       ratings=self.ratings[keep])


@dataclass
class Measurement:
    """What a dimension measured on one trace. ``value`` is the number the table shows (the
    real value, or one replicate's); the other fields are what its ``distance`` compares."""

    value: float
    #: values whose distribution is compared (``ks``)
    sample: np.ndarray | None = None
    #: weights over ``bins`` (``js``)
    histogram: np.ndarray | None = None
    bins: tuple[str, ...] = ()
    #: a series over ``grid`` (``nrmse``)
    curve: np.ndarray | None = None
    grid: np.ndarray | None = None
    #: one value per user, whose variance the simulated/real ratio compares (None: not per user)
    per_user: np.ndarray | None = None
    #: further numbers for ``--json`` (a fit's own goodness, a share of users left out...)
    details: dict[str, float] = field(default_factory=dict)


class Dimension(Protocol):
    """A dimension of behaviour, measured alike on a run and on a real trace."""

    #: ``user`` or ``cascade``: what the split-half floor divides
    unit: str
    #: ``ks``, ``js``, ``relative_error`` or ``nrmse`` (module docstring)
    distance: str
    #: what ``Measurement.value`` is, for the table (an optional ``axis`` says what the plotted
    #: sample or histogram is)
    label: str

    def applies(self, trace: Trace) -> str | None:
        """None when the trace has what the dimension needs, else why not (one line)."""

    def measure(self, trace: Trace, reference: Trace) -> Measurement:
        """Measure ``trace``; ``reference`` is the real trace (itself when measuring it), for
        what a run is measured against (its rating scale, its most popular items)."""


__all__ = ["EVENT_KINDS", "Cascade", "Dimension", "Measurement", "Trace"]
