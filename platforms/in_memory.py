"""The in-memory platform: the reference implementation of :class:`townsquare.platform.Platform`.

Accounts, posts, comments (posts with ``reply_to``), likes, reblogs, follows and read marks
live in plain Python containers. Post ids are assigned at apply time, in apply order: ``p1``,
``p2``, ... so a seed fixes every id.

Home timeline (Zhou et al. §3.1.2 "browse"; §3.2.2 ranks the unread posts at every browse):
the candidates are posts the viewer did not write and has not read, newest first, at most
``candidate_window`` of them; the configured recommender ranks them. ``home_source = "all"``
takes every account's posts (a simulation starts with an empty follow graph, so a follow-only
feed would be empty); ``"following"`` takes posts by followed accounts and posts they
reblogged, ordered by when they were posted or reblogged. A reblog is a relation, not a post
row: it counts on the original and surfaces the original in the rebloggers' followers' feeds.

Candidates reach the recommender as a lazy, newest-first sequence: it scans posts only as far
as the recommender looks and builds a :class:`PostView` only for posts it touches, so a
chronological feed of 10 costs about 10 views however large the window is.
"""

from __future__ import annotations

import heapq
import re
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, Literal

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import AccountView, Action, ActionResult, PlatformSpec, PostView, hookimpl

log = structlog.get_logger("townsquare.platforms.in_memory")

_TOKEN = re.compile(r"\w+")
_EMPTY: frozenset = frozenset()


class InMemoryConfig(BaseModel):
    """``[platform]`` settings of the in-memory platform."""

    model_config = ConfigDict(extra="forbid")

    home_source: Literal["all", "following"] = "all"
    candidate_window: int = Field(500, gt=0)


def _tokens(text: str) -> set[str]:
    return set(_TOKEN.findall(text.lower()))


def _pid(index: int) -> str:
    return f"p{index + 1}"


class _Candidates(Sequence):
    """Newest-first candidate posts, scanned and turned into views only when looked at.
    ``views`` (post index -> view) may be shared by the feeds of one round: the platform does
    not change while a round's turns are taken, so one view per post serves every viewer."""

    __slots__ = ("_platform", "_source", "_window", "_indices", "_views", "_done")

    def __init__(self, platform: "InMemoryPlatform", source: Iterator[list[int]], window: int,
                 views: dict[int, PostView] | None = None):
        self._platform = platform
        self._source = source
        self._window = window
        self._indices: list[int] = []
        self._views: dict[int, PostView] = {} if views is None else views
        self._done = False

    def _fill(self, n: int) -> None:
        n = min(n, self._window)
        indices = self._indices
        while not self._done and len(indices) < n:
            batch = next(self._source, None)
            if batch is None:
                self._done = True
            else:
                indices.extend(batch)
        if len(indices) >= self._window:
            del indices[self._window:]
            self._done = True

    def _view(self, position: int) -> PostView:
        index = self._indices[position]
        view = self._views.get(index)
        if view is None:
            view = self._views[index] = self._platform._view(index)
        return view

    def __len__(self) -> int:
        self._fill(self._window)
        return len(self._indices)

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.start or 0, key.stop, key.step or 1
            if stop is None or stop < 0 or start < 0 or step < 0:
                self._fill(self._window)
            else:
                self._fill(stop)
            return [self._view(p) for p in range(len(self._indices))[key]]
        self._fill(self._window if key < 0 else key + 1)
        if key < 0:
            key += len(self._indices)
        if not 0 <= key < len(self._indices):
            raise IndexError("candidate index out of range")
        return self._view(key)


def _append(lists: dict[str, array], key: str, value: int) -> None:
    found = lists.get(key)
    if found is None:
        found = lists[key] = array("I")
    found.append(value)


def _merge_desc(lists: Iterable[list[int]]) -> Iterator[int]:
    """Merge ascending lists into one descending stream."""
    return heapq.merge(*(reversed(lst) for lst in lists), reverse=True)


class InMemoryPlatform:
    """The reference platform. ``recommender`` ranks home timelines (chronological if None)."""

    def __init__(self, config: InMemoryConfig | None = None, recommender: Any = None):
        self.config = config or InMemoryConfig()
        self.recommender = recommender
        self._handlers = {
            "post": self._post, "comment": self._post, "like": self._like, "reblog": self._reblog,
            "follow": self._follow, "unfollow": self._unfollow, "browse": self._browse,
        }
        self._reset()

    def _reset(self) -> None:
        # Used when a caller passes no rng: keeps random recommenders reproducible.
        self._rng = np.random.default_rng(0)
        # (display name, bio); bios are interned: a large population shares a few persona texts
        self._accounts: dict[str, tuple[str, str]] = {}
        self._number: dict[str, int] = {}  # account -> its number, in registration order
        # Posts are columnar; post ``p{i+1}`` lives at index i. Per-account lists of post
        # indices are ``array("I")`` (4 bytes an entry, no int object): a million accounts.
        self._author: list[str] = []
        self._author_number = array("I")  # the authors' account numbers (the checkpoint's column)
        self._text: list[str] = []
        self._round = array("i")
        self._created: list[str] = []
        self._reply_to: list[int | None] = []
        self._by_author: dict[str, array] = {}
        self._likes: dict[int, set[str]] = {}
        # every like as (post index, account number), in order: the checkpoint's columns as
        # they are, so a checkpoint copies two arrays instead of sorting ten million likes
        self._like_posts, self._like_accounts = array("I"), array("I")
        self._reblogs: dict[int, dict[str, None]] = {}  # ordered set: who reblogged, in order
        self._replies: dict[int, list[int]] = {}
        self._following: dict[str, set[str]] = {}
        self._followers: dict[str, set[str]] = {}
        # Read marks: an array of post indices per account, in reading order (a membership test
        # scans it in C; a feed looks at a few dozen posts): 4 bytes a mark.
        self._reads: dict[str, array] = {}
        # Timeline events (a post or a reblog) in order; "following" feeds merge them per account.
        self._event_post = array("I")
        # each reblog's event position and reblogger's account number
        self._reblog_positions, self._reblog_accounts = array("Q"), array("I")
        self._stream: dict[str, array] = {}
        # Built on the first search, then kept up to date: runs that never search never pay.
        self._search_index: dict[str, list[int]] = {}
        self._indexed = 0
        # The views feeds showed since the last write: while a round's turns read, nothing
        # changes, so one view per post serves every viewer (any write clears them).
        self._shown: dict[int, PostView] = {}

    # ------------------------------------------------------------------ accounts

    async def register_account(self, agent_id: str, display_name: str, bio: str) -> AccountView:
        """Create an account, or update the name and bio of an existing one."""
        self._set_account(agent_id, display_name, bio)
        return self._profile(agent_id)

    def _set_account(self, agent_id: str, display_name: str, bio: str) -> None:
        self._number.setdefault(agent_id, len(self._number))
        self._accounts[agent_id] = (display_name, sys.intern(bio))

    def _profile(self, agent_id: str) -> AccountView:
        display_name, bio = self._accounts[agent_id]
        return AccountView(
            id=agent_id, handle=agent_id, display_name=display_name, bio=bio,
            followers=len(self._followers.get(agent_id, _EMPTY)),
            following=len(self._following.get(agent_id, _EMPTY)),
            posts=len(self._by_author.get(agent_id, ())),
        )

    async def profile(self, agent_id: str) -> AccountView | None:
        return self._profile(agent_id) if agent_id in self._accounts else None

    async def follower_counts(self, agent_ids: Sequence[str]) -> list[int | None]:
        """Each account's follower count (None: no such account), for metrics over a whole
        population (a profile each would build a million views a round)."""
        accounts, followers = self._accounts, self._followers
        return [len(followers.get(a, _EMPTY)) if a in accounts else None for a in agent_ids]

    async def followers(self, agent_id: str) -> list[str]:
        return sorted(self._followers.get(agent_id, _EMPTY))

    async def following(self, agent_id: str) -> list[str]:
        return sorted(self._following.get(agent_id, _EMPTY))

    # ------------------------------------------------------------------ writes

    async def apply(self, action: Action, round: int, now: str) -> ActionResult:
        """Carry out one action; a refusal is ``ActionResult(ok=False, error=...)``."""
        self._shown.clear()
        handler = self._handlers.get(action.kind)
        if handler is None:
            return ActionResult(ok=False, error=f"unknown action kind {action.kind!r}")
        if action.agent_id not in self._accounts:
            return ActionResult(ok=False, error=f"no account {action.agent_id!r}")
        return handler(action, round, now)

    def _lookup(self, post_id: str | None) -> int | None:
        if not post_id or post_id[0] != "p" or not post_id[1:].isdigit():
            return None
        index = int(post_id[1:]) - 1
        return index if 0 <= index < len(self._author) and _pid(index) == post_id else None

    def _add_post(self, author: str, text: str, round: int, now: str, reply_to: int | None) -> int:
        index = len(self._author)
        self._author.append(author)
        self._author_number.append(self._number[author])
        self._text.append(text)
        self._round.append(round)
        self._created.append(now)
        self._reply_to.append(reply_to)
        _append(self._by_author, author, index)
        if reply_to is not None:
            self._replies.setdefault(reply_to, []).append(index)
        _append(self._stream, author, len(self._event_post))
        self._event_post.append(index)
        return index

    def _post(self, action: Action, round: int, now: str) -> ActionResult:
        reply_to = None
        if action.kind == "comment":
            reply_to = self._lookup(action.target_post)
            if reply_to is None:
                return ActionResult(ok=False, error=f"no post {action.target_post!r}")
        # Kept as given, so the platform and the run's trace hold the same text.
        if not action.text or not action.text.strip():
            return ActionResult(ok=False, error=f"a {action.kind} needs text")
        return ActionResult(created_id=_pid(self._add_post(action.agent_id, action.text, round, now, reply_to)))

    def _like(self, action: Action, round: int, now: str) -> ActionResult:
        target = self._lookup(action.target_post)
        if target is None:
            return ActionResult(ok=False, error=f"no post {action.target_post!r}")
        likes = self._likes.setdefault(target, set())
        if action.agent_id in likes:
            return ActionResult(ok=False, error=f"already liked {action.target_post}")
        self._add_like(action.agent_id, target)
        return ActionResult()

    def _add_like(self, agent: str, target: int) -> None:
        self._likes.setdefault(target, set()).add(agent)
        self._like_posts.append(target)
        self._like_accounts.append(self._number[agent])

    def _reblog(self, action: Action, round: int, now: str) -> ActionResult:
        target = self._lookup(action.target_post)
        if target is None:
            return ActionResult(ok=False, error=f"no post {action.target_post!r}")
        if action.agent_id in self._reblogs.get(target, _EMPTY):
            return ActionResult(ok=False, error=f"already reblogged {action.target_post}")
        self._add_reblog(action.agent_id, target)
        return ActionResult()

    def _add_reblog(self, agent: str, target: int) -> None:
        self._reblogs.setdefault(target, {})[agent] = None
        self._reblog_positions.append(len(self._event_post))
        self._reblog_accounts.append(self._number[agent])
        _append(self._stream, agent, len(self._event_post))
        self._event_post.append(target)

    def _follow(self, action: Action, round: int, now: str) -> ActionResult:
        who, target = action.agent_id, action.target_agent
        if target not in self._accounts:
            return ActionResult(ok=False, error=f"no account {target!r}")
        if target == who:
            return ActionResult(ok=False, error="an account cannot follow itself")
        following = self._following.setdefault(who, set())
        if target in following:
            return ActionResult(ok=False, error=f"already following {target}")
        following.add(target)
        self._followers.setdefault(target, set()).add(who)
        return ActionResult()

    def _unfollow(self, action: Action, round: int, now: str) -> ActionResult:
        who, target = action.agent_id, action.target_agent
        following = self._following.get(who, _EMPTY)
        if target not in following:
            return ActionResult(ok=False, error=f"not following {target!r}")
        following.discard(target)
        self._followers[target].discard(who)
        return ActionResult()

    def _browse(self, action: Action, round: int, now: str) -> ActionResult:
        reads = self._reads.get(action.agent_id)
        if reads is None:
            reads = self._reads[action.agent_id] = array("I")
        for post_id in action.post_ids:
            index = self._lookup(post_id)
            if index is not None and index not in reads:
                reads.append(index)
        return ActionResult()

    # ------------------------------------------------------------------ reads

    def _view(self, index: int) -> PostView:
        author = self._author[index]
        reply_to = self._reply_to[index]
        return PostView(
            _pid(index), author, self._text[index], self._round[index], self._created[index],
            None if reply_to is None else _pid(reply_to), None,
            len(self._likes.get(index, _EMPTY)), len(self._reblogs.get(index, _EMPTY)),
            len(self._replies.get(index, ())), len(self._followers.get(author, _EMPTY)),
        )

    def _candidate_batches(self, viewer: str, author_filter: set[str] | None, window: int) -> Iterator[list[int]]:
        """Unread posts by others, newest first, in batches of growing size: a short feed
        scans a few posts, a long one pays for list comprehensions, not generator steps."""
        read = self._reads.get(viewer, _EMPTY)
        authors = self._author
        if self.config.home_source == "all" and author_filter is None:
            high, size, found = len(authors), 16, 0
            while high > 0:
                # Grow the batch, but never scan far past the window.
                low = max(high - min(size, max(window - found, 16)), 0)
                batch = [i for i in range(high - 1, low - 1, -1) if i not in read and authors[i] != viewer]
                if batch:
                    found += len(batch)
                    yield batch
                high, size = low, size * 2
            return
        if self.config.home_source == "following":
            events = self._event_post
            streams = [self._stream.get(a, []) for a in sorted(self._following.get(viewer, _EMPTY))]
            source: Iterator[int] = (events[e] for e in _merge_desc(streams))
        else:
            # Walk only the chosen authors' posts rather than scanning everyone's.
            source = _merge_desc(self._by_author.get(a, []) for a in sorted(author_filter or ()))
        seen: set[int] = set()  # a post can arrive as a post and again as reblogs
        size = 16
        while True:
            batch, taken = [], 0
            for index in islice(source, size):
                taken += 1
                if index in read or index in seen or authors[index] == viewer:
                    continue
                if author_filter is not None and authors[index] not in author_filter:
                    continue
                seen.add(index)
                batch.append(index)
            if batch:
                yield batch
            if taken < size:
                return
            size = min(size * 2, max(window, 16))

    async def home_timeline(
        self, viewer: str, limit: int, *, rng: Any = None, author_filter: set[str] | None = None
    ) -> list[PostView]:
        """The viewer's unread feed, ranked by the recommender. ``rng`` is the viewer's
        generator (the platform's own when None); ``author_filter`` keeps only those authors."""
        return self._home_timeline(viewer, limit, rng, author_filter, self._shown)

    async def home_timelines(self, requests: Sequence[tuple[str, int, Any, set[str] | None]]) -> list[list[PostView]]:
        """Many viewers' feeds at once, each exactly what :meth:`home_timeline` gives for
        ``(viewer, limit, rng, author_filter)``, in order: a batch policy's read. The feeds
        share their :class:`PostView` objects (one per post shown), so a round of a million
        viewers who see the same newest posts builds a handful of views, not millions."""
        return [self._home_timeline(viewer, limit, rng, authors, self._shown) for viewer, limit, rng, authors in requests]

    def _home_timeline(self, viewer: str, limit: int, rng: Any, author_filter: set[str] | None,
                       views: dict[int, PostView] | None) -> list[PostView]:
        if limit <= 0:
            return []
        window = self.config.candidate_window
        candidates = _Candidates(self, self._candidate_batches(viewer, author_filter, window), window, views)
        if self.recommender is None:
            return candidates[:limit]
        ranked = self.recommender.rank(viewer, candidates, limit, self._rng if rng is None else rng)
        return list(ranked)[:limit]

    async def public_timeline(self, limit: int) -> list[PostView]:
        last = len(self._author) - 1
        return [self._view(i) for i in range(last, max(last - limit, -1), -1)]

    async def search(self, query: str, limit: int) -> list[PostView]:
        """Posts holding every word of ``query`` (case-insensitive), newest first."""
        tokens = _tokens(query)
        if not tokens or limit <= 0:
            return []
        self._index_new_posts()
        postings = [self._search_index.get(token) for token in tokens]
        if not all(postings):
            return []
        shortest = min(postings, key=len)
        found = []
        for index in reversed(shortest):
            if len(tokens) == 1 or tokens <= _tokens(self._text[index]):
                found.append(self._view(index))
                if len(found) >= limit:
                    break
        return found

    def _index_new_posts(self) -> None:
        for index in range(self._indexed, len(self._text)):
            for token in _tokens(self._text[index]):
                self._search_index.setdefault(token, []).append(index)
        self._indexed = len(self._text)

    async def get_post(self, post_id: str) -> PostView | None:
        index = self._lookup(post_id)
        return None if index is None else self._view(index)

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        """Columnar (see :mod:`townsquare.platforms.in_memory_state`)."""
        from . import in_memory_state

        return in_memory_state.dump(self)

    def set_state(self, state: dict[str, Any]) -> None:
        from . import in_memory_state

        self._reset()
        in_memory_state.load(self, state)
        log.debug("platform.restored", posts=len(self._author), accounts=len(self._accounts))


def build_in_memory(config: InMemoryConfig | None, ctx: Any) -> InMemoryPlatform:
    # The engine builds the recommender before the platform and hands it over in services.
    services = getattr(ctx, "services", None)
    return InMemoryPlatform(config, recommender=getattr(services, "recommender", None))


@hookimpl
def townsquare_register_platforms():
    return [
        PlatformSpec(
            "in_memory", build_in_memory, config_model=InMemoryConfig, priority=100,
            description="accounts, posts, likes, reblogs and follows in memory; the reference platform",
        )
    ]
