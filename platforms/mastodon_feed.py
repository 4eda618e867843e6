"""Reads of posts: home and public timelines, search, single posts.

Candidates for a viewer's feed (``home_source``):

- ``"following"``: the server's home timeline (followed accounts' posts and reblogs), read by
  paging back with ``max_id`` until a whole page is older than ``window_hours``, the
  ``candidate_window`` is full or ``max_pages`` pages were read. (No ``min_id``: servers that
  do not encode time in ids return nothing for a time-made one, and bulk-loaded data can sort
  above new posts, so one old page does not end the walk, a whole old page does.)
- ``"all"`` (default, like the in-memory platform, whose simulations start with no follows):
  the home timeline plus every post the simulation made within the window, read with its
  author's token so followers-only posts count, plus the server's local public timeline.

Counts come from the server's entities (``favourites_count``, ``reblogs_count``,
``replies_count``, the author's ``followers_count``): humans' likes count too. The configured
recommender ranks the unread candidates. Entities are cached until the next apply phase
(``invalidate``), so a round's concurrent readers cost one fetch.

On a replayed round (a resume after a crash), the server already holds some of the round's
writes. Reads then subtract what the journal says happened after the restored round:
statuses it created are hidden and counts are corrected, so the replay sees what the
original round saw.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from townsquare.platform import PostView

from .mastodon_client import RemoteError
from .mastodon_entities import RemoteStatus, parse_status
from .mastodon_state import pid

if TYPE_CHECKING:  # pragma: no cover
    from .mastodon import MastodonPlatform

log = structlog.get_logger("townsquare.platforms.mastodon")

_WORD = re.compile(r"\w+")


async def read(transport: Any, token: str | None, fn: Any, what: str) -> Any:
    """A read; a server that stays unreachable or refuses the token stops the run (resume continues it)."""
    try:
        return await transport.read(token, fn, what)
    except RemoteError as exc:
        if exc.transient or exc.fatal:
            raise transport.stop(exc) from None
        raise
STATUSES_PER_REQUEST = 20  # GET /api/v1/statuses?id[]= (Mastodon 4.3+)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


@dataclass
class Corrections:
    """Effects of journaled writes the restored simulation has not reached yet."""

    hidden: set[str] = field(default_factory=set)
    favourites: Counter = field(default_factory=Counter)
    reblogs: Counter = field(default_factory=Counter)
    replies: Counter = field(default_factory=Counter)
    followers: Counter = field(default_factory=Counter)  # by remote account id
    following: Counter = field(default_factory=Counter)  # by agent id
    statuses: Counter = field(default_factory=Counter)  # by agent id
    edges: list[tuple[str, str, int]] = field(default_factory=list)  # (agent, remote account, +1 follow / -1 unfollow)

    @classmethod
    def from_rows(cls, rows: list[Any]) -> "Corrections":
        c = cls()
        for row in rows:
            if row.kind in ("post", "comment", "reblog") and row.remote_id:
                c.hidden.add(row.remote_id)
                c.statuses[row.agent_id] += 1
            if row.kind == "comment" and row.target_remote:
                c.replies[row.target_remote] += 1
            elif row.kind == "reblog" and row.target_remote:
                c.reblogs[row.target_remote] += 1
            elif row.kind == "like" and (row.remote_id or row.target_remote):
                c.favourites[row.remote_id or row.target_remote] += 1
            elif row.kind in ("follow", "unfollow") and row.remote_id:
                sign = 1 if row.kind == "follow" else -1
                c.followers[row.remote_id] += sign
                c.following[row.agent_id] += sign
                c.edges.append((row.agent_id, row.remote_id, sign))
        return c


class Feeds:
    def __init__(self, platform: "MastodonPlatform"):
        self.p = platform
        self.state = platform.state
        self.config = platform.config
        self.generation = 0
        self._pool: tuple[int, dict[str, tuple[tuple, RemoteStatus]]] | None = None
        self._home: dict[str, tuple[int, list[RemoteStatus]]] = {}
        self._corrections: tuple[int, Corrections] | None = None
        self._multi_get = True
        self._lock = asyncio.Lock()

    def invalidate(self) -> None:
        """Called after every apply phase: the server has changed."""
        self.generation += 1
        self._home.clear()

    def corrections(self) -> Corrections:
        applied = self.state.applied_round
        if self._corrections is None or self._corrections[0] != applied:
            self._corrections = (applied, Corrections.from_rows(self.p.journal.future(applied)))
        return self._corrections[1]

    # ------------------------------------------------------------------ fetching

    async def _read(self, token: str | None, fn: Any, what: str) -> Any:
        return await read(self.p.transport, token, fn, what)

    async def _sim_statuses(self, indices: list[int]) -> dict[str, RemoteStatus]:
        """Current entities of simulation posts, fetched with their authors' tokens."""
        by_author: dict[str, list[str]] = {}
        for index in indices:
            remote = self.state.remote[index]
            if remote is not None:
                by_author.setdefault(self.state.author[index], []).append(remote)
        jobs = []
        for author, ids in by_author.items():
            token = self.p.accounts[author].token
            jobs += [self._fetch_statuses(token, ids[i:i + STATUSES_PER_REQUEST]) for i in range(0, len(ids), STATUSES_PER_REQUEST)]
        found: dict[str, RemoteStatus] = {}
        for part in await asyncio.gather(*jobs):
            found.update(part)
        return found

    async def _fetch_statuses(self, token: str, ids: list[str]) -> dict[str, RemoteStatus]:
        if self._multi_get:
            try:
                data = await self._read(token, lambda c: c.statuses(ids), "fetch statuses")
                return {s.id: s for s in map(parse_status, data)}
            except RemoteError as exc:
                if exc.status != 404:
                    raise
                self._multi_get = False  # a server before 4.3: one request per status
                log.info("mastodon.no_multi_get", message="server lacks GET /api/v1/statuses?id[]=; fetching one by one")
        found = {}
        for status_id in ids:
            try:
                found[status_id] = parse_status(await self._read(token, lambda c, i=status_id: c.status(i), "fetch status"))
            except RemoteError as exc:
                if exc.status not in (404, 403, 410):
                    raise
        return found

    async def _timeline(self, token: str | None, name: str) -> list[RemoteStatus]:
        """Page back through a timeline with ``max_id`` (see the module docstring)."""
        cutoff = time.time() - self.config.window_hours * 3600
        entries: list[RemoteStatus] = []
        max_id = None
        for _ in range(self.config.max_pages):
            def page(c: Any, max_id: Any = max_id) -> Any:
                if name == "home":
                    return c.timeline_home(max_id=max_id, limit=self.config.page_size)
                return c.timeline_local(max_id=max_id, limit=self.config.page_size)
            try:
                data = await self._read(token, page, f"read the {name} timeline")
            except RemoteError as exc:
                log.warning("mastodon.timeline_refused", timeline=name, error=str(exc))
                break
            statuses = [parse_status(d) for d in data]
            if not statuses:
                break
            fresh = [s for s in statuses if s.created_at.timestamp() >= cutoff]
            entries += fresh
            if not fresh or len(entries) >= self.config.candidate_window:
                break
            max_id = min(statuses, key=lambda s: int(s.id) if s.id.isdigit() else 0).id
        return entries

    async def pool(self) -> dict[str, tuple[tuple, RemoteStatus]]:
        """Simulation posts within the window and the local public timeline, by local id."""
        async with self._lock:
            if self._pool is not None and self._pool[0] == self.generation:
                return self._pool[1]
            state, cutoff = self.state, time.time() - self.config.window_hours * 3600
            indices = []
            for index in range(len(state.author) - 1, -1, -1):
                if len(indices) >= self.config.candidate_window:
                    break
                if state.live(index) and state.wall[index] >= cutoff:
                    indices.append(index)
            found = await self._sim_statuses(indices)
            pool: dict[str, tuple[tuple, RemoteStatus]] = {}
            for index in indices:
                status = found.get(state.remote[index])  # type: ignore[arg-type]
                if status is not None:
                    pool[pid(index)] = ((state.round[index], 1, index), status)
            if self.config.include_public and self.p.accounts:
                hidden = self.corrections().hidden
                for entry in await self._timeline(self.p.any_token(), "local"):
                    status = entry.original
                    if entry.id in hidden or status.id in hidden or self.foreign_to_run(entry):
                        continue
                    local, key = self.key(status)
                    pool.setdefault(local, (key, status))
            self._pool = (self.generation, pool)
            return pool

    # ------------------------------------------------------------------ views

    def key(self, status: RemoteStatus) -> tuple[str, tuple]:
        """Local id and newest-first sort key. A human's post ranks as newer than the
        simulation's posts of the round before the one in which it was first seen."""
        index = self.state.remote_index.get(status.id)
        if index is not None:
            return pid(index), (self.state.round[index], 1, index)
        seen = self.state.foreign_seen.setdefault(status.id, self.state.applied_round + 1)
        self.state.foreign_accounts.setdefault("@" + status.account.acct, status.account.id)
        return f"m{status.id}", (seen - 1, 2, int(status.id) if status.id.isdigit() else 0)

    def foreign_to_run(self, entry: RemoteStatus) -> bool:
        """A status by a simulation account that this run did not make (a replayed round's
        future, an earlier run's with the same tokens, the operator's): kept out of reads."""
        for status in (entry, entry.original):
            agent = self.p.agent_of_remote.get(status.account.id)
            if agent is None:
                continue
            if status.reblog is None:
                if status.id not in self.state.remote_index:
                    return True
                continue
            index = self.state.remote_index.get(status.reblog.id)
            made = self.state.reblogs.get(index, {}) if index is not None else self.state.foreign_reblogs.get(f"m{status.reblog.id}", ())
            if agent not in made:
                return True
        return False

    def author_of(self, status: RemoteStatus) -> str:
        return self.p.agent_of_remote.get(status.account.id) or "@" + status.account.acct

    def view(self, local: str, status: RemoteStatus, c: Corrections) -> PostView:
        counts = (max(0, status.favourites - c.favourites[status.id]), max(0, status.reblogs - c.reblogs[status.id]),
                  max(0, status.replies - c.replies[status.id]), max(0, status.account.followers - c.followers[status.account.id]))
        extra = {"remote_id": status.id}
        index = self.state.remote_index.get(status.id)
        state = self.state
        if index is not None:
            return PostView(pid(index), state.author[index], state.text[index], state.round[index], state.created[index],
                            state.reply_to[index], None, *counts, extra=extra)
        reply_to = state.local_id_of(status.in_reply_to_id) if status.in_reply_to_id else None
        return PostView(local, self.author_of(status), status.text, state.foreign_seen.get(status.id, state.applied_round + 1),
                        status.created_at.isoformat(), reply_to, None, *counts, extra=extra)

    async def home_timeline(self, viewer: str, limit: int, rng: Any, author_filter: set[str] | None) -> list[PostView]:
        account = self.p.accounts.get(viewer)
        if limit <= 0 or account is None:
            return []
        c = self.corrections()
        entries: dict[str, tuple[tuple, RemoteStatus]] = {}
        if self.config.home_source == "all":
            entries.update(await self.pool())
        cached = self._home.get(viewer)
        if cached is None or cached[0] != self.generation:
            cached = self._home[viewer] = (self.generation, await self._timeline(account.token, "home"))
        for entry in cached[1]:
            if entry.id in c.hidden or entry.original.id in c.hidden or self.foreign_to_run(entry):
                continue
            if entry.reblog is not None and entry.account.id == account.remote_id:
                continue  # one's own reblog
            local, key = self.key(entry.original)
            entries.setdefault(local, (key, entry.original))
        reads = self.state.reads.get(viewer, ())
        chosen = []
        for local, (key, status) in entries.items():
            author = self.author_of(status)
            if author == viewer or local in reads or (author_filter is not None and author not in author_filter):
                continue
            chosen.append((key, local, status))
        chosen.sort(key=lambda item: item[0], reverse=True)
        views = [self.view(local, status, c) for _, local, status in chosen[: self.config.candidate_window]]
        recommender = self.p.recommender
        if recommender is None:
            return views[:limit]
        return list(recommender.rank(viewer, views, limit, self.p.rng if rng is None else rng))[:limit]

    async def public_timeline(self, limit: int) -> list[PostView]:
        if limit <= 0:
            return []
        c = self.corrections()
        ranked = sorted((await self.pool()).items(), key=lambda item: item[1][0], reverse=True)[:limit]
        return [self.view(local, status, c) for local, (_, status) in ranked]

    async def search(self, query: str, limit: int) -> list[PostView]:
        """Posts holding every word of ``query``, newest first: the simulation's own posts and
        the public pool (server full-text search depends on Elasticsearch, so it is not used)."""
        words = _words(query)
        if not words or limit <= 0:
            return []
        state, pool = self.state, await self.pool()
        matched: dict[str, tuple[tuple, RemoteStatus | None]] = {}
        missing = []
        for index in range(len(state.author) - 1, -1, -1):
            if len(matched) >= limit:
                break
            if state.live(index) and words <= _words(state.text[index]):
                hit = pool.get(pid(index))
                matched[pid(index)] = hit if hit is not None else ((state.round[index], 1, index), None)
                if hit is None:
                    missing.append(index)
        found = await self._sim_statuses(missing) if missing else {}
        for local, (key, status) in pool.items():
            if local.startswith("m") and words <= _words(status.text):
                matched[local] = (key, status)
        c, views = self.corrections(), []
        for local, (_, status) in sorted(matched.items(), key=lambda item: item[1][0], reverse=True):
            status = status or found.get(state.remote[int(local[1:]) - 1] or "")
            if status is not None:
                views.append(self.view(local, status, c))
            if len(views) >= limit:
                break
        return views

    async def get_post(self, post_id: str) -> PostView | None:
        state, c = self.state, self.corrections()
        index = state.index_of(post_id)
        if index is not None:
            if not state.live(index):
                return None
            cached = self._pool[1].get(post_id) if self._pool and self._pool[0] == self.generation else None
            status = cached[1] if cached else (await self._sim_statuses([index])).get(state.remote[index] or "")
            return None if status is None else self.view(post_id, status, c)
        if not (post_id and post_id[0] == "m" and post_id[1:].isdigit()) or post_id[1:] in c.hidden:
            return None
        try:
            status = parse_status(await self._read(self.p.any_token(), lambda cl: cl.status(post_id[1:]), "fetch a status"))
        except RemoteError:
            return None
        if self.foreign_to_run(status):
            return None
        self.key(status)
        return self.view(post_id, status, c)
