"""Writes: a round's actions, checked in apply order, sent serially or in parallel, journaled.

1. *Plan*, in apply order and without the network: refuse what the in-memory platform refuses
   (unknown post, empty text, already liked, following oneself...), answer from the journal
   what a crashed run already sent, refuse what would pass a per-account cap, and give each
   post its local id. Every decision depends only on the restored state, so a replayed round
   plans exactly as the original did.
2. *Send*: with ``write_parallelism = 1`` one request at a time, in order; otherwise each
   agent's actions stay in order while different agents' actions go out together (a comment
   on a post made earlier in the same batch waits for it). Each request is journaled as an
   intent before it leaves and as done, with its Mastodon id, as soon as it returns.
3. A server that stays unreachable after the retries, or refuses the account itself (a bad
   token: see :mod:`.mastodon_client`), stops the run (``RunStopped``): the round is discarded
   and ``resume`` replays it once the cause is fixed; nothing is recorded as refused because
   of an outage.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import structlog

from townsquare.actions import Action, ActionResult

from .mastodon_client import RemoteError
from .mastodon_entities import parse_account, parse_relationship, parse_status, same_text
from .mastodon_journal import JournalRow, fingerprint
from .mastodon_state import pid

if TYPE_CHECKING:  # pragma: no cover
    from .mastodon import MastodonPlatform

log = structlog.get_logger("townsquare.platforms.mastodon")

#: Mastodon's per-account limits: statuses (posts, replies and reblogs) and follows.
FAMILY = {"post": "statuses", "comment": "statuses", "reblog": "statuses", "follow": "follows"}


@dataclass
class Planned:
    position: int
    action: Action
    fp: str
    result: ActionResult | None = None
    family: str | None = None
    post_index: int | None = None  # the local post this action creates
    target_index: int | None = None  # a simulation post this action targets
    target_remote: str | None = None  # a known remote target (status or account id)
    target_acct: str | None = None  # a foreign account to look up (``@acct``)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Writer:
    def __init__(self, platform: "MastodonPlatform"):
        self.p = platform
        self.state = platform.state
        self.journal = platform.journal
        self.config = platform.config
        self.stopping = False
        self._pending: Counter = Counter()

    # ------------------------------------------------------------------ plan

    async def apply(self, actions: list[Action], round: int, now: str, start: int) -> list[ActionResult]:
        self.stopping = False
        self._pending = Counter()  # cap families of this batch's unsent writes, by agent
        planned = [self._plan(Planned(start + i, a, fingerprint(a)), round, now) for i, a in enumerate(actions)]
        sends = [p for p in planned if p.result is None]
        if sends:
            if self.config.write_parallelism <= 1:
                for item in sends:
                    await self._send(item, round)
            else:
                await self._send_parallel(sends, planned, round)
        return [p.result for p in planned]  # type: ignore[misc]

    def _plan(self, item: Planned, round: int, now: str) -> Planned:
        action, state = item.action, self.state
        refusal = self._refusal(item)
        if refusal is not None:
            item.result = ActionResult(ok=False, error=refusal)
            return item
        if action.kind == "browse":
            state.reads.setdefault(action.agent_id, set()).update(action.post_ids)
            item.result = ActionResult()
            return item
        item.family = FAMILY.get(action.kind)
        recorded = self.journal.get(round, item.position)
        if recorded is not None and recorded.fingerprint != item.fp:
            log.warning("mastodon.journal_mismatch", round=round, position=item.position, agent=action.agent_id, kind=action.kind)
            recorded = None
        # Optimistic local effects, in apply order; _settle confirms or undoes them.
        if action.kind in ("post", "comment"):
            reply_to = action.target_post if action.kind == "comment" else None
            item.post_index = state.add_post(action.agent_id, action.text or "", round, now, reply_to)
        elif action.kind == "like":
            self._marks(item, state.likes, state.foreign_likes).add(action.agent_id)
        elif action.kind == "reblog":
            marks = self._marks(item, state.reblogs, state.foreign_reblogs)
            if isinstance(marks, dict):
                marks[action.agent_id] = None
            else:
                marks.add(action.agent_id)
        elif action.kind == "follow":
            state.following.setdefault(action.agent_id, set()).add(action.target_agent or "")
        elif action.kind == "unfollow":
            state.following.get(action.agent_id, set()).discard(action.target_agent or "")
        if recorded is not None and recorded.state == "done":
            self._settle(item, bool(recorded.ok), recorded.remote_id, recorded.error, recorded.wall)
            return item
        if recorded is None and item.family is not None:
            capped = self._cap(action.agent_id, item.family)
            if capped is not None:
                self._record(item, round, False, None, capped)
                return item
        return item

    def _marks(self, item: Planned, local: dict, foreign: dict) -> Any:
        if item.target_index is not None:
            return local.setdefault(item.target_index, {} if local is self.state.reblogs else set())
        return foreign.setdefault(item.action.target_post or "", set())

    def _refusal(self, item: Planned) -> str | None:
        """Why the in-memory platform would refuse this action, or None."""
        action, state = item.action, self.state
        kind, agent = action.kind, action.agent_id
        if kind not in ("post", "comment", "like", "reblog", "follow", "unfollow", "browse"):
            return f"unknown action kind {kind!r}"
        if agent not in self.p.accounts:
            return f"no account {agent!r}"
        if kind in ("comment", "like", "reblog"):
            target = action.target_post
            item.target_index = state.index_of(target)
            if item.target_index is None:
                if not (target and target[0] == "m" and target[1:].isdigit()):
                    return f"no post {target!r}"
                item.target_remote = target[1:]
        if kind in ("post", "comment") and (not action.text or not action.text.strip()):
            return f"a {kind} needs text"
        if kind == "like":
            liked = state.likes.get(item.target_index, ()) if item.target_index is not None else state.foreign_likes.get(action.target_post or "", ())
            if agent in liked:
                return f"already liked {action.target_post}"
        if kind == "reblog":
            done = state.reblogs.get(item.target_index, {}) if item.target_index is not None else state.foreign_reblogs.get(action.target_post or "", ())
            if agent in done:
                return f"already reblogged {action.target_post}"
        if kind in ("follow", "unfollow"):
            target = action.target_agent or ""
            following = state.following.get(agent, set())
            if target in self.p.accounts:
                item.target_remote = self.p.accounts[target].remote_id
            elif target.startswith("@") and len(target) > 1:
                item.target_remote = state.foreign_accounts.get(target)
                item.target_acct = target[1:]
            elif kind == "follow":
                return f"no account {target!r}"
            if kind == "unfollow":
                return None if target in following else f"not following {target!r}"
            if target == agent:
                return "an account cannot follow itself"
            if target in following:
                return f"already following {target}"
        return None

    def _cap(self, agent: str, family: str) -> str | None:
        limit, hours = (self.config.status_cap, self.config.status_cap_hours) if family == "statuses" else (self.config.follow_cap, self.config.follow_cap_hours)
        if limit <= 0:
            return None
        used = self.journal.count_recent(agent, family, time.time() - hours * 3600) + self._pending[agent, family]
        if used >= limit:
            return f"rate cap: {agent} reached {limit} {family} per {hours:g} hours"
        self._pending[agent, family] += 1
        return None

    async def reconcile(self) -> None:
        """Settle the intents a crash left (requests whose answer was lost): ask the server
        whether each took effect. Those that did become done rows, answered from the journal
        on replay and hidden from replayed reads; the others are forgotten and sent again."""
        for row in self.journal.intents():
            account = self.p.accounts.get(row.agent_id)
            if account is None or row.action is None:
                continue
            try:
                found = await self.p.transport.read(account.token, lambda c, row=row, me=account.remote_id: _applied(c, row, me),
                                                    f"reconcile a {row.kind} by {row.agent_id}")
            except RemoteError as exc:
                if exc.transient or exc.fatal:
                    raise self.p.transport.stop(exc) from None
                found = None
            if found is None:
                self.journal.forget(row.round, row.position)
            else:
                self.journal.done(row.round, row.position, row.agent_id, row.kind, row.fingerprint, row.family,
                                  row.target_remote, True, None, found, None)
            log.info("mastodon.reconciled", round=row.round, position=row.position, kind=row.kind, applied=found is not None)

    # ------------------------------------------------------------------ send

    async def _send_parallel(self, sends: list[Planned], planned: list[Planned], round: int) -> None:
        by_position = {p.position: p for p in planned}
        creators = {p.post_index: p for p in planned if p.post_index is not None}
        chains: dict[str, list[Planned]] = {}
        for item in sends:
            chains.setdefault(item.action.agent_id, []).append(item)

        async def chain(items: list[Planned]) -> None:
            for item in items:
                creator = creators.get(item.target_index) if item.target_index is not None else None
                if creator is not None and creator.position < item.position and creator.result is None:
                    await by_position[creator.position].done.wait()
                await self._send(item, round)

        outcomes = await asyncio.gather(*(chain(items) for items in chains.values()), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def _send(self, item: Planned, round: int) -> None:
        try:
            if self.stopping:
                return
            action = item.action
            account = self.p.accounts[action.agent_id]
            if item.target_index is not None:
                item.target_remote = self.state.remote[item.target_index]
                if item.target_remote is None:  # its post was refused earlier in this batch
                    self._record(item, round, False, None, f"no post {action.target_post!r}")
                    return
            self.journal.intend(round, item.position, action, item.fp, item.family, item.target_remote)
            try:
                remote_id = await self.p.transport.write(account.token, self._request(item, round), f"{action.kind} by {action.agent_id}")
            except RemoteError as exc:
                if exc.transient or exc.fatal:
                    self.stopping = True
                    raise self.p.transport.stop(exc) from None
                self._record(item, round, False, None, str(exc))
                return
            self._record(item, round, True, remote_id, None)
        finally:
            item.done.set()

    def _request(self, item: Planned, round: int) -> Callable[[Any], str | None]:
        """The blocking call for one write; returns the Mastodon id to record."""
        action, config, target = item.action, self.config, item.target_remote
        key = f"townsquare-{self.journal.run_key}-{round}-{item.position}"
        kind = action.kind
        if kind in ("post", "comment"):
            def post(client: Any) -> str:
                status = client.status_post(action.text, in_reply_to_id=target, visibility=config.visibility, idempotency_key=key)
                return str(status["id"])
            return post
        if kind == "like":
            return lambda client: (client.status_favourite(target), target)[1]
        if kind == "reblog":
            visibility = "private" if config.visibility == "direct" else config.visibility
            return lambda client: str(client.status_reblog(target, visibility=visibility)["id"])
        acct = item.target_acct

        def account_id(client: Any) -> str:
            return target if target is not None else parse_account(client.account_lookup(acct)).id

        if kind == "unfollow":
            def unfollow(client: Any) -> str:
                remote = account_id(client)
                client.account_unfollow(remote)
                return remote
            return unfollow

        def follow(client: Any) -> str:
            remote = account_id(client)
            relationship = parse_relationship(client.account_follow(remote))
            if not relationship.following and relationship.requested:
                raise RemoteError(f"follow requested: {action.target_agent} approves followers by hand", status=200)
            return remote
        return follow

    def _record(self, item: Planned, round: int, ok: bool, remote_id: str | None, error: str | None) -> None:
        """Journal the answer (committed before anything else happens), then settle local state."""
        action = item.action
        created = pid(item.post_index) if ok and item.post_index is not None else None
        self.journal.done(round, item.position, action.agent_id, action.kind, item.fp, item.family, item.target_remote,
                          ok, created, remote_id, error)
        self._settle(item, ok, remote_id, error, time.time())

    def _settle(self, item: Planned, ok: bool, remote_id: str | None, error: str | None, wall: float) -> None:
        action, state = item.action, self.state
        kind, agent = action.kind, action.agent_id
        if kind in ("post", "comment"):
            state.settle_post(item.post_index, remote_id if ok else None, wall)  # type: ignore[arg-type]
            item.result = ActionResult(created_id=pid(item.post_index), remote_id=remote_id) if ok else ActionResult(ok=False, error=error)  # type: ignore[arg-type]
            return
        item.result = ActionResult(remote_id=remote_id) if ok else ActionResult(ok=False, error=error)
        if kind == "like" and not ok:
            self._marks(item, state.likes, state.foreign_likes).discard(agent)
        elif kind == "reblog":
            marks = self._marks(item, state.reblogs, state.foreign_reblogs)
            if not ok:
                marks.pop(agent, None) if isinstance(marks, dict) else marks.discard(agent)
            elif isinstance(marks, dict):
                marks[agent] = remote_id
        elif kind == "follow":
            if not ok:
                state.following.get(agent, set()).discard(action.target_agent or "")
            elif action.target_agent and action.target_agent.startswith("@") and remote_id:
                state.foreign_accounts[action.target_agent] = remote_id
        elif kind == "unfollow" and not ok:
            state.following.setdefault(agent, set()).add(action.target_agent or "")


def _applied(client: Any, row: JournalRow, me: str) -> str | None:
    """Whether an intent's request took effect on the server; its Mastodon id if it did."""
    action, target = row.action or {}, row.target_remote
    if row.kind in ("post", "comment"):
        return _find_status(client, me, lambda s: s.reblog is None and s.in_reply_to_id == target
                            and same_text(action.get("text") or "", s.text), row.wall)
    if row.kind in ("follow", "unfollow"):
        if target is None:
            target = parse_account(client.account_lookup((action.get("target_agent") or "@")[1:])).id
        relationship = parse_relationship(client.account_relationships([target])[0])
        took = (relationship.following or relationship.requested) if row.kind == "follow" else not relationship.following
        return target if took else None
    status = client.status(target)
    if row.kind == "like":
        return target if status.get("favourited") else None
    if not status.get("reblogged"):
        return None
    return _find_status(client, me, lambda s: s.reblog is not None and s.reblog.id == target, row.wall) or target


def _find_status(client: Any, me: str, wanted: Callable[[Any], bool], since_wall: float) -> str | None:
    """The id of the account's own recent status that ``wanted`` accepts (newest 40 looked at)."""
    for data in client.account_statuses(me, limit=40):
        status = parse_status(data)
        if status.created_at.timestamp() < since_wall - 300:
            break
        if wanted(status):
            return status.id
    return None
