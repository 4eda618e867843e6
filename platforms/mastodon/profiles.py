"""Reads of accounts: profiles, followers and following, from the server's entities.

Every simulation account is fetched in one go (``GET /api/v1/accounts?id[]=``, 40 at a time)
once per apply phase, so the metrics that read every agent's profile each round cost a few
requests. Counts and lists are corrected, like posts, for journaled writes a replayed round
has not reached yet (see :mod:`.feed`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from townsquare.api import AccountView

from .client import RemoteError
from .entities import RemoteAccount, parse_account
from .feed import read

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection
    from .feed import Feeds

ACCOUNTS_PER_REQUEST = 40  # GET /api/v1/accounts?id[]= (Mastodon 4.3+)


class Profiles:
    def __init__(self, conn: "Connection", feeds: "Feeds"):
        self.conn = conn
        self.feeds = feeds
        self.state = conn.state
        self._accounts: tuple[int, dict[str, RemoteAccount]] | None = None
        self._lists: dict[tuple[str, str], tuple[int, list[str]]] = {}

    @property
    def generation(self) -> int:
        return self.feeds.generation

    def corrections(self) -> Any:
        return self.feeds.corrections()

    async def _read(self, token: str | None, fn: Any, what: str) -> Any:
        return await read(self.conn.transport, token, fn, what)

    async def remote_accounts(self) -> dict[str, RemoteAccount]:
        """Every simulation account's current entity, fetched in bulk once per generation."""
        if self._accounts is not None and self._accounts[0] == self.generation:
            return self._accounts[1]
        ids = [a.remote_id for a in self.conn.accounts.values()]
        token = self.conn.any_token()
        found: dict[str, RemoteAccount] = {}
        chunks = [ids[i:i + ACCOUNTS_PER_REQUEST] for i in range(0, len(ids), ACCOUNTS_PER_REQUEST)]
        try:
            for part in await asyncio.gather(*(self._read(token, lambda c, chunk=chunk: c.accounts(chunk), "fetch accounts") for chunk in chunks)):
                found.update((a.id, a) for a in map(parse_account, part))
        except RemoteError as exc:
            if exc.status != 404:
                raise
            for remote in ids:
                found[remote] = parse_account(await self._read(token, lambda c, r=remote: c.account(r), "fetch an account"))
        self._accounts = (self.generation, found)
        return found

    async def profile(self, agent_id: str) -> AccountView | None:
        c = self.corrections()
        account = self.conn.accounts.get(agent_id)
        if account is not None:
            remote = (await self.remote_accounts()).get(account.remote_id)
            if remote is None:
                return None
            return AccountView(agent_id, remote.acct, remote.display_name, remote.note,
                               max(0, remote.followers - c.followers[remote.id]), max(0, remote.following - c.following[agent_id]),
                               max(0, remote.statuses - c.statuses[agent_id]))
        if not agent_id.startswith("@"):
            return None
        try:
            remote = parse_account(await self._read(self.conn.any_token(), lambda cl: cl.account_lookup(agent_id[1:]), "look up an account"))
        except RemoteError:
            return None
        self.state.foreign_accounts[agent_id] = remote.id
        return AccountView(agent_id, remote.acct, remote.display_name, remote.note, remote.followers, remote.following, remote.statuses)

    async def relations(self, agent_id: str, which: str) -> list[str]:
        """``followers`` or ``following`` of a simulation account, as agent ids and ``@acct``."""
        account = self.conn.accounts.get(agent_id)
        if account is None:
            return []
        cached = self._lists.get((which, agent_id))
        if cached is not None and cached[0] == self.generation:
            return list(cached[1])
        remote = account.remote_id

        def fetch(c: Any) -> list:
            first = c.account_followers(remote, limit=80) if which == "followers" else c.account_following(remote, limit=80)
            return list(c.fetch_remaining(first))
        members = {self.conn.agent_of_remote.get(a.id) or "@" + a.acct for a in map(parse_account, await self._read(account.token, fetch, f"list {which}"))}
        by_remote = {a.remote_id: agent for agent, a in self.conn.accounts.items()}
        for follower, target, sign in self.corrections().edges:
            if which == "followers" and target == remote:
                (members.discard if sign > 0 else members.add)(follower)
            elif which == "following" and follower == agent_id:
                name = by_remote.get(target) or next((k for k, v in self.state.foreign_accounts.items() if v == target), None)
                if name is not None:
                    (members.discard if sign > 0 else members.add)(name)
        result = sorted(members)
        self._lists[(which, agent_id)] = (self.generation, result)
        return list(result)
