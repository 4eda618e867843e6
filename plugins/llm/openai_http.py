"""A bare HTTP/1.1 keep-alive client on asyncio for the ``openai`` provider:
``[llm] transport = "http"``, the default.

It does one thing: POST a JSON body to ``BASE_URL/chat/completions`` and read the answer
(``Content-Length``, ``chunked`` or up to the close; 1xx skipped, 204 empty), over plain TCP or TLS
(verified against the system's certificates), keeping each connection for the next call
unless the server says ``Connection: close``. It sends ``Accept-Encoding: identity``, so no
answer comes compressed. It does not go through proxies: a proxy set in the environment for
the endpoint is a start-up error naming ``transport = "aiohttp"``, which does.

Why it exists: measured in an LLM-bound round (``benchmarks/scale.py --p1``, 2,560 calls at 256 in flight
on 2 cores) the whole client process spends 0.24-0.31 ms of CPU per call on it against
0.45-0.58 ms on aiohttp, whose request and response objects (and the garbage collections they
bring on) are most of the difference; the round's wall time fell from 1.7-2.0 to 1.3 x its
bound (with the engine's later savings, 0.21-0.25 ms a call and 1.11-1.19 x: docs/scale.md).
Failures are raised as :mod:`~townsquare.plugins.llm.openai_transport`'s SDK-shaped
exceptions, so they read as on the other transports: a non-2xx status is the SDK's
:class:`APIStatusError` subclass, no whole answer within ``timeout_s`` (a pool's watchdog
looks every tenth of it, at most every second) is :class:`APITimeoutError`, a reset, a refused
connection, a body cut off before its length or a reply that is no HTTP is
:class:`APIConnectionError`. A connection that failed in any way is
closed, never reused. POST is not idempotent, so nothing is sent twice: a kept connection the
server closed meanwhile fails its call as a ``connection`` fault, which ``llm_retry`` retries.
"""

from __future__ import annotations

import asyncio
import json
import math
import ssl
from typing import Any
from urllib.parse import urlsplit

from townsquare.api import UsageError

from .openai_transport import APIConnectionError, APITimeoutError, encode, env_proxy, status_error
from .limiter import Limiter

#: the most bytes a status line and its headers may take
MAX_HEAD = 65536


class NotHTTP(Exception):
    """The server's reply is no HTTP/1.x answer we can read."""


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: bytes in a buffer, a future to wait for more."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.ended = False
        self.error: BaseException | None = None
        self._waiter: asyncio.Future | None = None
        #: when the answer under way is late (the loop's clock); set by the pool
        self.deadline = math.inf
        #: the pool's watchdog closed it: its answer came too late
        self.expired = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self.ended = True
        self.error = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    @property
    def usable(self) -> bool:
        return not self.ended and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.ended = True

    def expire(self) -> None:
        """The answer is late: drop the connection, and let the call waiting on it fail."""
        self.expired = True
        if self.transport is not None:
            self.transport.abort()
        self.connection_lost(None)

    async def _more(self) -> None:
        """Wait for more bytes; raise when the connection has ended."""
        if self.ended:
            if self.error is not None:
                raise self.error
            raise ConnectionError("the server closed the connection before the whole answer came")
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def read_until(self, separator: bytes, limit: int) -> bytes:
        start = 0
        while True:
            found = self.buffer.find(separator, start)
            if found >= 0:
                line = bytes(self.buffer[:found])
                del self.buffer[:found + len(separator)]
                return line
            if len(self.buffer) > limit:
                raise NotHTTP(f"no end of line in {limit} bytes")
            start = max(0, len(self.buffer) - len(separator) + 1)
            await self._more()

    async def read_exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._more()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    async def read_to_end(self) -> bytes:
        while not self.ended:
            await self._more()
        data = bytes(self.buffer)
        self.buffer.clear()
        return data

    async def exchange(self, request: bytes) -> tuple[int, dict[str, str], bytes, bool]:
        """Send ``request``; (status, headers with lower-case names, body, keep the connection)."""
        self.transport.write(request)
        while True:
            head = (await self.read_until(b"\r\n\r\n", MAX_HEAD)).decode("latin-1")
            status_line, *lines = head.split("\r\n")
            version, _, rest = status_line.partition(" ")
            code = rest[:3]
            if not version.startswith("HTTP/1.") or not code.isdigit():
                raise NotHTTP(f"not an HTTP/1.x status line: {status_line[:60]!r}")
            headers: dict[str, str] = {}
            for line in lines:
                name, colon, value = line.partition(":")
                if not colon:
                    raise NotHTTP(f"not a header line: {line[:60]!r}")
                name = name.strip().lower()
                headers[name] = f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
            if not 100 <= int(code) < 200:  # an informational answer is followed by the real one
                break
        keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        if code in ("204", "304"):  # no body, whatever the headers say
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = await self.read_chunked()
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise NotHTTP(f"Content-Length {headers['content-length'][:20]!r}") from None
            body = await self.read_exactly(length)
        else:
            body, keep = await self.read_to_end(), False
        return int(code), headers, body, keep

    async def read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            size_line = await self.read_until(b"\r\n", 1024)
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise NotHTTP(f"chunk size {size_line[:20]!r}") from None
            if size == 0:
                while await self.read_until(b"\r\n", MAX_HEAD):  # trailers, up to the empty line
                    pass
                return bytes(body)
            body += await self.read_exactly(size)
            await self.read_exactly(2)


class HTTPPool:
    """One route: at most ``size`` kept connections to one endpoint, one key."""

    def __init__(self, base_url: str, key: str, route: int, size: int, timeout_s: float):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f'[llm] transport = "http": {base_url!r} is not an http:// or https:// URL')
        self.route = route
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        if env_proxy(self.url) is not None:
            raise UsageError(f'[llm] transport = "http" does not go through proxies, and the environment sets one for '
                             f'{parts.hostname}: use transport = "aiohttp" (or NO_PROXY={parts.hostname})')
        self.load = 0
        #: connections at most
        self.size = size
        self._timeout_s = timeout_s
        self._host, self._tls = parts.hostname, parts.scheme == "https"
        self._port = parts.port or (443 if self._tls else 80)
        target = f"{parts.path.rstrip('/')}/chat/completions" + (f"?{parts.query}" if parts.query else "")
        host = parts.netloc.rpartition("@")[2]
        self._head = (f"POST {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
                      "Content-Type: application/json\r\nAccept: application/json\r\nAccept-Encoding: identity\r\n"
                      "User-Agent: townsquare\r\nContent-Length: ").encode("latin-1")
        self._ssl = ssl.create_default_context() if self._tls else None
        self._idle: list[Connection] = []
        self._open: set[Connection] = set()
        self._limiter: Limiter | None = None
        #: connections awaiting an answer, watched by ``_watchdog`` for their deadlines
        self._busy: set[Connection] = set()
        self._watchdog: asyncio.Future | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def send(self, body: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # first call, or a new loop: the old one's connections are gone with it
            self._loop, self._limiter, self._idle, self._open, self._busy = loop, Limiter(self.size), [], set(), set()
            self._watchdog = None
        payload = encode(body)
        request = self._head + b"%d\r\n\r\n" % len(payload) + payload
        url = self.url
        deadline = loop.time() + self._timeout_s
        connection = None
        limiter = self._limiter
        try:
            if not limiter.take():  # ``async with`` would run two coroutines a call even with room
                await limiter.wait()
            try:
                connection = self._idle_connection()
                if connection is None:  # none kept: connecting, with the call's deadline
                    async with asyncio.timeout_at(deadline):
                        connection = await self._connect()
                status, headers, raw = await self._exchange(connection, request, deadline)
            finally:
                limiter.release()
        except TimeoutError as exc:
            raise APITimeoutError(url) from exc
        except (OSError, NotHTTP) as exc:  # ConnectionError, TLS errors, refused, DNS
            if connection is not None and connection.expired:
                raise APITimeoutError(url) from exc
            raise APIConnectionError(f"Connection error: {type(exc).__name__}: {exc}", url) from exc
        if not 200 <= status < 300:
            raise status_error(status, raw, headers, url)
        if "json" in headers.get("content-type", ""):
            return json.loads(raw)  # a cut-off body raises JSONDecodeError: bad_body
        return raw.decode("utf-8", "replace")  # an HTML page at 200: the provider says it is no answer

    def _idle_connection(self) -> Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable:
                return connection
            self._forget(connection)
        return None

    async def _connect(self) -> Connection:
        _, connection = await asyncio.get_running_loop().create_connection(
            Connection, self._host, self._port, ssl=self._ssl, server_hostname=self._host if self._tls else None)
        self._open.add(connection)
        return connection

    async def _exchange(self, connection: Connection, request: bytes, deadline: float) -> tuple[int, dict[str, str], bytes]:
        connection.deadline = deadline
        self._busy.add(connection)
        if self._watchdog is None:
            self._watchdog = asyncio.ensure_future(self._watch())
        try:
            status, headers, body, keep = await connection.exchange(request)
        except BaseException:  # cut off, timed out or cancelled mid-answer: the stream is unusable
            self._forget(connection)
            raise
        finally:
            self._busy.discard(connection)
        if keep and connection.usable and not connection.buffer:
            self._idle.append(connection)
        else:
            self._forget(connection)
        return status, headers, body

    async def _watch(self) -> None:
        """Expire the connections whose answer is past its deadline, looking every tenth of
        ``timeout_s`` (at most every second) while answers are awaited: one task per pool
        instead of a timer per call (a timer per call was 5 % of the client's CPU at 2,560
        calls a second)."""
        loop = asyncio.get_running_loop()
        tick = min(1.0, self._timeout_s / 10)
        try:
            while self._busy:
                await asyncio.sleep(tick)
                now = loop.time()
                for connection in [c for c in self._busy if c.deadline <= now]:
                    connection.expire()
        finally:
            if self._watchdog is asyncio.current_task():  # not a newer loop's watchdog
                self._watchdog = None

    def _forget(self, connection: Connection) -> None:
        connection.close()
        self._open.discard(connection)

    async def aclose(self) -> None:
        if self._loop is asyncio.get_running_loop():
            if self._watchdog is not None:
                self._watchdog.cancel()
            for connection in list(self._open):
                self._forget(connection)
            await asyncio.sleep(0)  # let the transports finish closing in this loop
        self._idle, self._open, self._busy, self._loop, self._watchdog = [], set(), set(), None, None
