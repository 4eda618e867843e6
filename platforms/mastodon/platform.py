"""The Mastodon platform: the kernel's platform protocol over a real Mastodon REST API.

A scenario switches to it with one line (``[platform] name = "mastodon"`` plus ``base_url``);
agents then post, reply, favourite, reblog and follow as accounts on that server, beside
whoever else is there. Zhou et al. ran their sandbox on Mastodon the same way (through
Mastodon.py). The parts get the run's :class:`.connection.Connection`; this module only puts them together
behind the platform protocol (see the package docstring for the list).

Posts default to ``private`` (followers only): a study should not broadcast machine-written
posts to a server's public timelines unless it means to. Accounts are flagged as bots.
See ``docs/mastodon.md`` for running a study on your own instance.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Awaitable, Callable, Sequence, TypeVar

import structlog

from townsquare.api import AccountView, Action, ActionResult, PostView, UsageError

from .accounts import sign_up, username_for
from .client import RemoteError, Transport
from .config import MastodonConfig
from .connection import AgentAccount, open_connection
from .entities import parse_account
from .feed import Feeds
from .profiles import Profiles
from .writes import Writer

log = structlog.get_logger("townsquare.platforms.mastodon")
T = TypeVar("T")

class MastodonPlatform:
    """The platform protocol over Mastodon. ``run_dir`` holds the journal (in memory if None)."""

    def __init__(self, config: MastodonConfig, recommender: Any = None, run_dir: str | None = None, base_dir: str = ".",
                 transport: Transport | None = None):
        self.conn = open_connection(config, run_dir, base_dir, transport, recommender)
        self._order: dict[str, int] = {}
        self._round: int | None = None
        self._position = 0
        self._reconciled = False
        self._probed = False
        self._ready_lock = asyncio.Lock()
        self.feeds = Feeds(self.conn)
        self.writer = Writer(self.conn)
        self.profiles = Profiles(self.conn, self.feeds)

    async def _ready(self) -> None:
        """Before the first read or write: settle what a crash left in flight."""
        if self._reconciled:
            return
        async with self._ready_lock:
            if not self._reconciled:
                await self.writer.reconcile()
                self._reconciled = True

    async def _call(self, work: Callable[[], Awaitable[T]]) -> T:
        """Settle what a crash left in flight, then ``work()``. A server failure that no step
        handled stops the run cleanly (one line, exit 3, checkpoint kept), never a traceback."""
        try:
            await self._ready()
            return await work()
        except RemoteError as exc:
            raise self.conn.transport.stop(exc) from None

    async def _probe(self) -> None:
        """Once, before the first new account: is ``base_url`` a Mastodon API at all? (A resumed
        run whose accounts the journal knows sends nothing.)"""
        if self._probed:
            return
        try:
            await self.conn.transport.read(None, lambda c: c.instance_v1(), "read the instance (GET /api/v1/instance)")
        except RemoteError as exc:
            if not exc.transient:  # an answer, but not the API's: a wrong base_url
                exc = RemoteError(f"not a Mastodon API: {exc}", exc.status, fatal=True)
            raise self.conn.transport.stop(exc) from None
        self._probed = True

    # ------------------------------------------------------------------ accounts

    async def register_account(self, agent_id: str, display_name: str, bio: str) -> AccountView:
        """Bind an agent to its account (tokens file, or sign-up) and set its profile. On a
        resumed run the journal already knows the account: no request unless the profile changed."""
        index = self._order.setdefault(agent_id, len(self._order))
        known = self.conn.journal.account(agent_id)
        if known is None:
            await self._probe()
        token = await self._token(agent_id, index, known)
        try:
            known = await self._bind(agent_id, token, known, display_name, bio)
        except RemoteError as exc:
            # The run cannot go on without the account: a clean stop (exit 3), resumable once fixed.
            where = f"the {self.conn.credentials.source} entry {index + 1}" if self.conn.credentials.configured else "its sign-up token"
            raise self.conn.transport.stop(RemoteError(f"cannot set up the account of {agent_id} ({where}): {exc}", exc.status,
                                                  exc.transient, exc.fatal)) from None
        self.conn.accounts[agent_id] = AgentAccount(known["remote_id"], known["acct"], token)
        self.conn.agent_of_remote[known["remote_id"]] = agent_id
        log.debug("mastodon.account", agent=agent_id, acct=known["acct"], remote_id=known["remote_id"])
        return AccountView(agent_id, known["acct"], display_name, bio)

    async def _bind(self, agent_id: str, token: str, known: dict[str, Any] | None, display_name: str, bio: str) -> dict[str, Any]:
        if known is None:
            me = parse_account(await self.conn.transport.read(token, lambda c: c.me(), f"verify the account of {agent_id}"))
            source = self.conn.credentials.source if self.conn.credentials.configured else "signup"
            self.conn.journal.put_account(agent_id, me.id, me.username, me.acct, source, None, self._order[agent_id])
            known = self.conn.journal.account(agent_id)
        assert known is not None
        note = (bio + ("\n\n" + self.conn.config.note_suffix if self.conn.config.note_suffix else "")).strip()
        profile = hashlib.sha256(repr((display_name, note, self.conn.config.bot)).encode()).hexdigest()[:16]
        if self.conn.config.update_profile and known["profile"] != profile:
            await self.conn.transport.write(
                token, lambda c: c.account_update_credentials(display_name=display_name[:30], note=note[:500], bot=self.conn.config.bot),
                f"set the profile of {agent_id}",
            )
            self.conn.journal.put_account(agent_id, known["remote_id"], known["username"], known["acct"], known["source"], profile,
                                     known["index"])
        return known

    async def _token(self, agent_id: str, index: int, known: dict[str, Any] | None) -> str:
        if self.conn.credentials.configured:
            token = self.conn.credentials.token_for(agent_id, index)
            if token is None:
                raise UsageError(f"mastodon: no token for agent {agent_id} (agent number {index + 1}; "
                                 f"the {self.conn.credentials.source} holds {len(self.conn.credentials)})")
            return token
        assert self.conn.store is not None
        token = self.conn.store.tokens.get(agent_id)
        if token is not None:
            return token
        if known is not None:
            raise UsageError(f"mastodon: the sign-up token of {agent_id} ({known['acct']}) is not in {self.conn.store.path}; "
                             "was the token store moved or deleted?")
        username = username_for(agent_id, self.conn.journal.run_key, self.conn.config.username_prefix)
        store, config, transport, journal = self.conn.store, self.conn.config, self.conn.transport, self.conn.journal
        log.info("mastodon.sign_up", agent=agent_id, username=username)
        try:
            return await transport.run_read(
                lambda: sign_up(transport, store, agent_id, username, config.signup_email_domain, config.app_name,
                                on_orphan=journal.put_orphan))
        except RemoteError as exc:
            raise transport.stop(exc) from None

    async def profile(self, agent_id: str) -> AccountView | None:
        return await self._call(lambda: self.profiles.profile(agent_id))

    async def followers(self, agent_id: str) -> list[str]:
        return await self._call(lambda: self.profiles.relations(agent_id, "followers"))

    async def following(self, agent_id: str) -> list[str]:
        return await self._call(lambda: self.profiles.relations(agent_id, "following"))

    # ------------------------------------------------------------------ writes

    async def apply(self, action: Action, round: int, now: str) -> ActionResult:
        """One action; its journal key is its position among this round's ``apply`` calls."""
        if round != self._round:
            self._round, self._position = round, 0
        position, self._position = self._position, self._position + 1
        try:
            (result,) = await self._call(lambda: self.writer.apply([action], round, now, position))
        finally:
            self.feeds.invalidate()
        self._applied(round)
        return result

    async def apply_batch(self, actions: Sequence[Action], round: int, now: str) -> list[ActionResult]:
        """A round's actions in apply order; answers in the same order (see :mod:`.writes`)."""
        self._round, self._position = round, len(actions)
        try:
            results = await self._call(lambda: self.writer.apply(list(actions), round, now, 0))
        finally:
            self.feeds.invalidate()  # whatever reached the server changed it
        self._applied(round)
        return results

    def _applied(self, round: int) -> None:
        self.conn.state.applied_round = max(self.conn.state.applied_round, round)
        self.feeds.invalidate()

    # ------------------------------------------------------------------ reads

    async def home_timeline(self, viewer: str, limit: int, *, rng: Any = None, author_filter: set[str] | None = None) -> list[PostView]:
        """The viewer's unread candidates (see :mod:`.feed`), ranked by the recommender."""
        return await self._call(lambda: self.feeds.home_timeline(viewer, limit, rng, author_filter))

    async def public_timeline(self, limit: int) -> list[PostView]:
        return await self._call(lambda: self.feeds.public_timeline(limit))

    async def search(self, query: str, limit: int) -> list[PostView]:
        return await self._call(lambda: self.feeds.search(query, limit))

    async def get_post(self, post_id: str) -> PostView | None:
        return await self._call(lambda: self.feeds.get_post(post_id))

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {"local": self.conn.state.get_state(), "rng": self.conn.rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        self.conn.state.set_state(state.get("local", {}))
        if "rng" in state:
            self.conn.rng.bit_generator.state = state["rng"]
        self._round = None
        self.feeds.invalidate()

    async def aclose(self) -> None:
        self.conn.close()


def build_mastodon(config: MastodonConfig, ctx: Any) -> MastodonPlatform:
    services = getattr(ctx, "services", None)
    return MastodonPlatform(config, recommender=getattr(services, "recommender", None), run_dir=getattr(services, "run_dir", None),
                            base_dir=getattr(ctx, "base_dir", ".") or ".")
