"""HTTP to a Mastodon server through Mastodon.py: one client per access token, retries, limits.

Mastodon.py is synchronous, so calls run in two small thread pools, one for reads and one
for writes (``write_parallelism`` threads; 1 keeps writes serial). Each token has its own
client, hence its own rate-limit state (Mastodon limits per account), and a lock: Mastodon.py's
pacing is not thread safe.

Rate limits: Mastodon.py parses the server's ``X-RateLimit-*`` headers into each client's
``ratelimit_remaining`` / ``ratelimit_reset``; we pace on them before every request
(``ratelimit_method``): ``"pace"`` spreads the remaining requests evenly until the reset, as
Mastodon.py's own pace mode does; ``"wait"`` only waits once the limit is used up; ``"throw"``
never waits. (Mastodon.py itself runs in "throw" mode: its own waits would sleep up to five
minutes per request, past any limit of ours.)

Failures:

- 429: wait for the reset time the server sent (or back off when it sent none) and try
  again; a reset further away than ``max_ratelimit_wait`` seconds, or ``"throw"``, is a
  refusal (``RemoteError``), not an endless sleep.
- 5xx (mastodon-mock answers "database is locked" with a 500 under parallel writes), timeouts,
  refused connections and truncated bodies: retried ``max_retries`` times with exponential
  backoff capped at ``backoff_cap``. Writes are safe to retry: posts carry an Idempotency-Key;
  favourite, reblog, follow and unfollow are idempotent on the server.
- other 4xx: a ``RemoteError`` at once (the server refused; retrying would not help).

No message built here contains a token: Mastodon.py's errors carry the status and the
server's error text, never request headers.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

import structlog

from townsquare.errors import UsageError

log = structlog.get_logger("townsquare.platforms.mastodon")

T = TypeVar("T")

PACE_FACTOR = 1.1  # Mastodon.py's default ratelimit_pacefactor

INSTALL_HINT = 'the mastodon platform needs Mastodon.py: pip install -e ".[mastodon]"'


class RemoteError(Exception):
    """The server refused (``status`` is its HTTP status) or kept failing (``transient``)."""

    def __init__(self, message: str, status: int | None = None, transient: bool = False):
        super().__init__(message)
        self.status = status
        self.transient = transient


def import_mastodon() -> Any:
    """Mastodon.py, imported only when a Mastodon platform is built."""
    try:
        import mastodon
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return mastodon


class Transport:
    """Mastodon.py clients for one server, with retries and two thread pools."""

    def __init__(
        self,
        base_url: str,
        *,
        request_timeout: float = 30.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        max_ratelimit_wait: float = 300.0,
        ratelimit_method: str = "pace",
        read_parallelism: int = 4,
        write_parallelism: int = 1,
        user_agent: str = "townsquare",
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.m = import_mastodon()
        import requests
        from requests.adapters import HTTPAdapter

        self.base_url = base_url.rstrip("/")
        self.request_timeout = request_timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_ratelimit_wait = max_ratelimit_wait
        self.ratelimit_method = ratelimit_method
        self.user_agent = user_agent
        self.sleep = sleep
        # One connection pool for every client: a thousand agents must not mean a thousand
        # idle keep-alive sockets.
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=read_parallelism + write_parallelism + 2, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self._clients: dict[str, tuple[Any, threading.Lock]] = {}
        self._clients_lock = threading.Lock()
        self._reads = ThreadPoolExecutor(read_parallelism, thread_name_prefix="mastodon-read")
        self._writes = ThreadPoolExecutor(write_parallelism, thread_name_prefix="mastodon-write")
        self.stats = {"requests": 0, "retries": 0, "ratelimited": 0}

    # ------------------------------------------------------------------ clients

    def new_client(self, token: str | None = None, **kwargs: Any) -> Any:
        return self.m.Mastodon(
            access_token=token, api_base_url=self.base_url, ratelimit_method="throw",
            request_timeout=self.request_timeout, version_check_mode="none", session=self.session,
            user_agent=self.user_agent, **kwargs,
        )

    def _client(self, token: str | None) -> tuple[Any, threading.Lock]:
        key = token or ""
        with self._clients_lock:
            entry = self._clients.get(key)
            if entry is None:
                entry = self._clients[key] = (self.new_client(token), threading.Lock())
            return entry

    # ------------------------------------------------------------------ calls

    def call(self, token: str | None, fn: Callable[[Any], T], what: str) -> T:
        """``fn(client)`` with retries (see the module docstring); runs in the caller's thread."""
        client, lock = self._client(token)
        with lock:
            return self.retrying(lambda: fn(client), what, client)

    def _pace(self, client: Any, what: str) -> None:
        """Wait before a request as the client's known rate-limit state asks."""
        reset, remaining, last = client.ratelimit_reset, client.ratelimit_remaining, client.ratelimit_lastcall
        now = time.time()
        if self.ratelimit_method == "throw" or not reset or reset <= now or last is None:
            return
        if remaining <= 0:
            wait = reset - now
            if wait > self.max_ratelimit_wait:
                raise RemoteError(f"{what}: rate limit used up for {wait:.0f} s more", status=429)
        elif self.ratelimit_method == "pace":
            # Mastodon.py's pace formula: the remaining requests evenly until the reset.
            wait = ((reset - now) / remaining - (now - last)) / PACE_FACTOR
        else:
            return
        if wait > 0:
            self.sleep(wait)

    def retrying(self, attempt: Callable[[], T], what: str, client: Any = None) -> T:
        m = self.m
        failures = limited = 0
        while True:
            if client is not None:
                self._pace(client, what)
            self.stats["requests"] += 1
            try:
                return attempt()
            except m.MastodonRatelimitError:
                limited += 1
                self.stats["ratelimited"] += 1
                reset = getattr(client, "ratelimit_reset", None)
                wait = reset - time.time() if reset else 0.0
                if wait <= 0:
                    wait = self._backoff(limited)
                if self.ratelimit_method == "throw" or wait > self.max_ratelimit_wait or limited > self.max_retries:
                    raise RemoteError(f"{what}: rate limited by the server (next try in {wait:.0f} s)", status=429) from None
                log.info("mastodon.ratelimited", what=what, wait_s=round(wait, 2))
                self.sleep(wait)
            except (m.MastodonServerError, m.MastodonNetworkError) as exc:
                failures += 1
                self._retry_or_raise(exc, what, failures)
            except m.MastodonAPIError as exc:
                status = _status(exc)
                if status is None and "could not parse response" in str(exc).lower():
                    failures += 1  # a truncated body: the request may have worked; safe to redo
                    self._retry_or_raise(exc, what, failures)
                    continue
                raise RemoteError(f"{what}: {describe(exc)}", status=status) from None

    def _retry_or_raise(self, exc: Exception, what: str, failures: int) -> None:
        if failures > self.max_retries:
            raise RemoteError(f"{what}: gave up after {failures} tries: {describe(exc)}", status=_status(exc), transient=True) from None
        self.stats["retries"] += 1
        wait = self._backoff(failures)
        log.info("mastodon.retry", what=what, attempt=failures, wait_s=round(wait, 2), error=describe(exc))
        self.sleep(wait)

    def _backoff(self, attempt: int) -> float:
        wait = min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1))
        return wait * (0.5 + random.random() / 2)

    async def read(self, token: str | None, fn: Callable[[Any], T], what: str) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._reads, self.call, token, fn, what)

    async def write(self, token: str | None, fn: Callable[[Any], T], what: str) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._writes, self.call, token, fn, what)

    async def run_read(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._reads, fn)

    def close(self) -> None:
        self._reads.shutdown(wait=True)
        self._writes.shutdown(wait=True)
        self.session.close()


def _status(exc: Exception) -> int | None:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[1], int):
        return args[1]
    return None


def describe(exc: Exception) -> str:
    """A short, token-free description of a Mastodon.py error."""
    args = getattr(exc, "args", ())
    status = _status(exc)
    if status is not None:
        reason = args[3] if len(args) >= 4 and args[3] else (args[2] if len(args) >= 3 else "")
        return f"HTTP {status}: {reason}"
    text = str(args[0]) if args else type(exc).__name__
    return text[:300]
