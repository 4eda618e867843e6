"""HTTP to a Mastodon server through Mastodon.py: one client per access token, retries, limits.

Mastodon.py is synchronous, so calls run in two small thread pools, one for reads and one
for writes (``write_parallelism`` threads; 1 keeps writes serial). Each token has its own
client, hence its own rate-limit state (Mastodon limits per account), and a lock: Mastodon.py's
pacing is not thread safe. Every request of the adapter goes through :meth:`Transport.retrying`:
reads, writes, account sign-up and profile updates at build time, and ``cleanup``.

Rate limits: Mastodon.py parses the server's ``X-RateLimit-*`` headers into each client's
``ratelimit_remaining`` / ``ratelimit_reset``; we pace on them before every request
(``ratelimit_method``): ``"pace"`` spreads the remaining requests evenly until the reset, as
Mastodon.py's own pace mode does; ``"wait"`` only waits once the limit is used up; ``"throw"``
never waits. (Mastodon.py itself runs in "throw" mode: its own waits would sleep up to five
minutes per request, past any limit of ours.)

Failures, classified in one place (:func:`classify`), from the exception and the status,
headers and body of the last response the request's thread saw:

- *rate limit* (429, with or without ``Retry-After`` / ``X-RateLimit-Reset``): wait what
  the server asked (else back off) and try again; a wait longer than
  ``max_ratelimit_wait``, or ``"throw"``, is a refusal, not an endless sleep.
- *retry*: timeouts, refused or reset connections, 5xx with any body (mastodon-mock answers
  "database is locked" with a 500 under parallel writes), 408, and any answer whose body is
  not JSON or is cut off, whatever its status (a proxy's HTML error page is not the API
  speaking): retried ``max_retries`` times with exponential backoff capped at
  ``backoff_cap``, then a ``RemoteError`` with ``transient`` set (the caller stops the run:
  resumable). Writes are safe to retry: posts carry an Idempotency-Key; favourite, reblog,
  follow and unfollow are idempotent; sign-up recognises its own account (see
  :mod:`.accounts`).
- *fatal*: 401 (the token is refused) and 403 other than Mastodon's per-action "This action
  is not allowed" (a suspended account, a token without the scope): ``fatal`` set; the
  caller stops the run with :func:`stop` (exit 3, checkpoint kept).
- *refused*: any other 4xx (404, 410, 422...): the server said no to this request; a write
  is recorded as refused, while account set-up (which cannot go on without it) stops the run.

No message built here contains a token or a response body: Mastodon.py's errors carry the
status and the server's error text, and the text of a body that failed to parse (which may
hold a token) is dropped; known secrets are masked as well (:func:`redact`).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import threading
import time
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

import structlog

from townsquare.api import RunStopped, UsageError

log = structlog.get_logger("townsquare.platforms.mastodon")

T = TypeVar("T")

PACE_FACTOR = 1.1  # Mastodon.py's default ratelimit_pacefactor

INSTALL_HINT = 'the mastodon platform needs Mastodon.py: pip install -e ".[mastodon]"'


#: Mastodon's answer to an action the account may not do (a reblog of a private post): a
#: refusal of that action, unlike other 403s, which say the account or token is unusable.
NOT_ALLOWED = "this action is not allowed"
_RESPONSE_CODE = re.compile(r"response code was (\d{3})")


class RemoteError(Exception):
    """The server refused (``status`` is its HTTP status), refused for good (``fatal``: the
    run cannot go on) or kept failing (``transient``)."""

    def __init__(self, message: str, status: int | None = None, transient: bool = False, fatal: bool = False,
                 detail: Any = None):
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.fatal = fatal
        self.detail = detail  # the server's error body (sign-up reads its details), never shown


@dataclass
class Seen:
    """What the last response of a thread looked like (set by a session hook)."""

    status: int
    retry_after: float | None
    json_body: bool


@dataclass
class Failure:
    """One classified failure: ``kind`` is "ratelimit", "retry", "fatal" or "refused"."""

    kind: str
    status: int | None
    text: str
    retry_after: float | None = None


def import_mastodon() -> Any:
    """Mastodon.py, imported only when a Mastodon platform is built (its warnings then go to
    our log: :func:`fold_warnings`)."""
    try:
        import mastodon
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    fold_warnings(mastodon)
    return mastodon


def fold_warnings(module: Any) -> None:
    """Warnings that ``module``'s code raises (Mastodon.py's "Timeline 'public' appears to be
    unavailable..." under a fault, say) become warning lines of our log, with the event
    ``mastodon.library_warning``, instead of Python's two raw lines on stderr; every other
    warning is shown as before."""
    import os
    import warnings

    folder = os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    shown = warnings.showwarning
    if getattr(shown, "folds", None) == folder:
        return

    def show(message: Any, category: type, filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
        if os.path.abspath(filename).startswith(folder):
            log.warning("mastodon.library_warning", message=str(message)[:300], category=category.__name__,
                        where=f"{os.path.basename(filename)}:{lineno}")
        else:
            shown(message, category, filename, lineno, file, line)

    show.folds = folder  # type: ignore[attr-defined]
    warnings.showwarning = show


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
        self.session.hooks["response"].append(self._saw)
        self._local = threading.local()
        #: values never to show in a message (tokens, client secrets), added as they are learnt
        self.secrets: set[str] = set()
        self._reads = ThreadPoolExecutor(read_parallelism, thread_name_prefix="mastodon-read")
        self._writes = ThreadPoolExecutor(write_parallelism, thread_name_prefix="mastodon-write")
        self.stats = {"requests": 0, "retries": 0, "ratelimited": 0}

    # ------------------------------------------------------------------ clients

    def _saw(self, response: Any, *args: Any, **kwargs: Any) -> Any:
        """Session hook: remember the status, Retry-After and whether an error body was JSON."""
        json_body = True
        if response.status_code >= 400:
            try:
                response.json()
            except ValueError:
                json_body = False
        self._local.seen = Seen(response.status_code, retry_after(response.headers.get("Retry-After")), json_body)
        return response

    def last_status(self) -> int | None:
        """The status of the last response this thread saw (None: none yet)."""
        seen = getattr(self._local, "seen", None)
        return seen.status if seen else None

    def new_client(self, token: str | None = None, **kwargs: Any) -> Any:
        self.secrets.update(v for v in (token, kwargs.get("client_secret")) if v)
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
        """``attempt()`` until it answers, classifying each failure (see the module docstring)."""
        failures = limited = 0
        while True:
            if client is not None:
                self._pace(client, what)
            self.stats["requests"] += 1
            self._local.seen = None
            try:
                return attempt()
            except self.m.MastodonError as exc:
                failure = classify(self.m, exc, getattr(self._local, "seen", None))
                detail = getattr(exc, "detail", None)
            text = redact(failure.text, self.secrets)
            if failure.kind == "ratelimit":
                limited += 1
                self.stats["ratelimited"] += 1
                wait = failure.retry_after
                if wait is None:
                    reset = getattr(client, "ratelimit_reset", None)
                    wait = reset - time.time() if reset else 0.0
                if wait <= 0:
                    wait = self._backoff(limited)
                if self.ratelimit_method == "throw" or wait > self.max_ratelimit_wait or limited > self.max_retries:
                    raise RemoteError(f"{what}: rate limited by the server (next try in {wait:.0f} s)", status=429)
                log.info("mastodon.ratelimited", what=what, wait_s=round(wait, 2))
                self.sleep(wait)
            elif failure.kind == "retry":
                failures += 1
                if failures > self.max_retries:
                    raise RemoteError(f"{what}: gave up after {failures} tries: {text}", status=failure.status, transient=True)
                self.stats["retries"] += 1
                wait = self._backoff(failures)
                log.info("mastodon.retry", what=what, attempt=failures, wait_s=round(wait, 2), error=text)
                self.sleep(wait)
            else:
                raise RemoteError(f"{what}: {text}", status=failure.status, fatal=failure.kind == "fatal", detail=detail)

    def stop(self, exc: RemoteError) -> RunStopped:
        """The one-line clean stop for a failure the run cannot go past (exit 3, resumable)."""
        if exc.transient:
            return RunStopped(f"mastodon server {self.base_url} unreachable ({exc}); run `townsquare resume` when it is back")
        status = f" (HTTP {exc.status})" if exc.status else ""
        return RunStopped(f"mastodon server {self.base_url} refused{status}: {exc}; fix the cause and run `townsquare resume`")

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


def _status(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[1], int):
        return args[1]
    found = _RESPONSE_CODE.search(str(args[0])) if args else None
    return int(found.group(1)) if found else None


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def classify(m: Any, exc: BaseException, seen: Seen | None) -> Failure:
    """One Mastodon.py failure -> what to do about it (see the module docstring)."""
    if isinstance(exc, m.MastodonIllegalArgumentError) and isinstance(exc.__context__, m.MastodonError):
        # create_account and log_in wrap their OAuth step's error in this one: judge the cause
        return classify(m, exc.__context__, seen)
    text = describe(exc)
    if isinstance(exc, m.MastodonNetworkError):  # a timeout, a reset, a refused connection
        return Failure("retry", None, text)
    status = _status(exc)
    if status is None and seen is not None and not isinstance(exc, m.MastodonIllegalArgumentError):
        # (Mastodon.py's own refusal, a password login on a server that has none, is no
        # answer: the last response seen, a 200 of another request, is not its status)
        status = seen.status
    if isinstance(exc, m.MastodonRatelimitError) or status == 429:
        return Failure("ratelimit", 429, text, seen.retry_after if seen else None)
    unparsed = "could not parse response" in str(exc).lower() or (seen is not None and seen.status >= 400 and not seen.json_body)
    if unparsed or isinstance(exc, m.MastodonServerError) or (status is not None and (status >= 500 or status == 408)):
        return Failure("retry", status, text)
    if status == 401 or (status == 403 and NOT_ALLOWED not in text.lower()):
        return Failure("fatal", status, text)
    return Failure("refused", status, text)


def describe(exc: BaseException) -> str:
    """A short, token-free description of a Mastodon.py error (never a response body)."""
    args = getattr(exc, "args", ())
    status = _status(exc)
    message = str(args[0]) if args else type(exc).__name__
    if "could not parse response" in message.lower():
        return f"HTTP {status}: the answer was not JSON (an error page or a cut-off body)"
    if len(args) >= 2 and isinstance(args[1], int):
        reason = args[3] if len(args) >= 4 and args[3] else (args[2] if len(args) >= 3 else "")
        return f"HTTP {status}: {reason}"
    return message[:300]


def redact(text: str, secrets: set[str]) -> str:
    """``text`` with every known secret masked."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, "***")
    return text
