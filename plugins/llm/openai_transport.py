"""How the ``openai`` provider's requests reach an endpoint: ``[llm] transport``.

``"http"`` (the default): :mod:`townsquare.plugins.llm.openai_http`, a bare HTTP/1.1
keep-alive client on asyncio, the leanest; it goes through no proxy. ``"aiohttp"``: one
:mod:`aiohttp` session per route (endpoint and key), proxies from the environment honoured.
``"sdk"``: the ``openai`` SDK's generic ``client.post`` over its httpx stack. All three send
the same bytes (:func:`encode`) to ``BASE_URL/chat/completions`` with the same
``Authorization: Bearer KEY`` header and give the provider the decoded JSON answer.

Why three, and why the bare client by default: measured on this project's 2-core machine
against the test server at 256 calls in flight, the transport's CPU per call is about
1.5-1.7 ms through the SDK, 2.3 ms through httpx alone, 0.9 ms through the SDK on aiohttp
(``DefaultAioHttpClient``), 0.25 ms through aiohttp alone and 0.09 ms through the bare client.
In a whole LLM-bound round (``benchmarks/scale.py --p1``, 2,560 calls) the client process spent 1.8-2.1,
0.45-0.58 and 0.24-0.31 ms per call on the SDK, aiohttp and the bare client (fewer objects per
call, fewer garbage collections), and the round took 4.8-5.2, 1.7-2.0 and 1.3 x its bound.
aiohttp stays for proxies, the SDK for what only it does (its own environment variables and
hooks); every failure reads the same on all three.

Failures of the aiohttp and bare transports are raised as the exceptions the SDK raises for them, by
the same names (:class:`APIStatusError` and its subclasses per status, :class:`APITimeoutError`,
:class:`APIConnectionError`) and with the same shape, so :func:`townsquare.llm_faults.classify`
gives them the same kinds and ``llm_calls.error`` reads the same whichever transport ran:

* a non-2xx status: ``status_code``, ``body`` (the decoded JSON error, else the text),
  ``response.headers`` (``Retry-After``), ``request.url``; 429 is ``rate_limit``, 5xx
  ``server`` (a proxy's HTML page too), 401/403 ``auth``, 404 ``not_found``, a 400 about the
  context ``too_long``;
* no whole answer within ``timeout_s`` (a hang, headers that come too slowly):
  :class:`APITimeoutError` (``timeout``);
* a reset, a refused connection, a body cut off before its ``Content-Length``, a malformed
  response: :class:`APIConnectionError` (``connection``);
* a 2xx JSON body that does not decode (cut off mid-way) raises ``json.JSONDecodeError``
  (``bad_body``); a 2xx body that is not JSON (an HTML page at 200) is handed over as text, which
  the provider rejects as ``bad_body``, as the SDK does.

Keys go into the ``Authorization`` header only: no message, log line or exception carries
one. A proxy from the environment (``HTTPS_PROXY``..., ``NO_PROXY``) is honoured by aiohttp and
the SDK alike (:func:`env_proxy`).
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from townsquare.api import json_encoder


#: Most connections in one SDK pool: httpx scans every connection of a pool on each request,
#: so one pool of 256 connections would cost milliseconds per call.
POOL_SIZE = 16

TRANSPORTS = ("aiohttp", "http", "sdk")


class APIError(Exception):
    """A failed request of the aiohttp or bare transport; ``request.url`` says where it went."""

    def __init__(self, message: str, url: str):
        super().__init__(message)
        self.request = SimpleNamespace(url=url)


class APITimeoutError(APIError):
    """No whole answer within the timeout."""

    def __init__(self, url: str):
        super().__init__("Request timed out.", url)


class APIConnectionError(APIError):
    """The connection failed: refused, reset, closed mid-body, or no readable HTTP answer."""


class APIStatusError(APIError):
    """A non-2xx answer. ``body``: the decoded JSON body (an OpenAI error object), else the text."""

    def __init__(self, status: int, raw: bytes, headers: Any, url: str):
        text = raw.decode("utf-8", "replace")
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = text or None
        inner = body.get("error", body) if isinstance(body, dict) else None
        said = inner.get("message") if isinstance(inner, dict) else None
        self.status_code = status
        self.body = body
        self.response = SimpleNamespace(status_code=status, headers=headers)
        super().__init__(f"Error code: {status}" + (f" - {said or body}" if body else ""), url)


#: the SDK's exception for each status (``InternalServerError`` for every 5xx)
_STATUS_ERRORS = {status: type(name, (APIStatusError,), {"__doc__": f"HTTP {status}."}) for status, name in (
    (400, "BadRequestError"), (401, "AuthenticationError"), (403, "PermissionDeniedError"), (404, "NotFoundError"),
    (409, "ConflictError"), (422, "UnprocessableEntityError"), (429, "RateLimitError"), (500, "InternalServerError"))}


def status_error(status: int, raw: bytes, headers: Any, url: str) -> APIStatusError:
    """The exception for a non-2xx answer, of the class the SDK raises for that status."""
    cls = _STATUS_ERRORS.get(500 if status >= 500 else status, APIStatusError)
    return cls(status, raw, headers, url)


class SDKPool:
    """One ``AsyncOpenAI`` client: one route, one httpx connection pool."""

    def __init__(self, client: Any, route: int):
        self.client = client
        self.route = route
        self.url = f"{str(client.base_url).rstrip('/')}/chat/completions"
        self.load = 0

    async def send(self, body: dict[str, Any]) -> Any:
        return await self.client.post("/chat/completions", cast_to=object, body=body)

    async def aclose(self) -> None:
        await self.client.close()


class AiohttpPool:
    """One route over an :class:`aiohttp.ClientSession` of ``size`` keep-alive connections.

    The session is opened on the first request, in the loop that makes it (aiohttp binds a
    session to its loop; the provider may be built outside any loop). A later call from
    another loop (the first one is gone) opens a new session there.
    """

    def __init__(self, base_url: str, key: str, route: int, size: int, timeout_s: float):
        self.route = route
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        self.load = 0
        #: connections in the pool
        self.size = size
        self._timeout_s = timeout_s
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                         "Accept": "application/json", "User-Agent": "townsquare"}
        # looked up once: aiohttp's trust_env would look the proxy (and ~/.netrc) up in a thread
        # on every request, two thread hops per call
        self._proxy = env_proxy(self.url)
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _open(self) -> Any:
        import aiohttp  # heavy-ish: imported when a run first sends

        loop = asyncio.get_running_loop()
        if self._session is not None:
            if self._loop is loop:
                return self._session
            self._drop()
        connector = aiohttp.TCPConnector(limit=self.size, limit_per_host=0)
        self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                                              headers=self._headers, cookie_jar=aiohttp.DummyCookieJar())
        self._loop = loop
        return self._session

    async def send(self, body: dict[str, Any]) -> Any:
        import aiohttp

        session = self._open()
        url = self.url
        try:
            async with session.post(url, data=encode(body), proxy=self._proxy, allow_redirects=False) as response:
                raw = await response.read()
                status, json_body = response.status, "json" in response.content_type
                if not 200 <= status < 300:
                    raise status_error(status, raw, response.headers, url)
        except TimeoutError as exc:  # asyncio.TimeoutError and aiohttp's timeouts are TimeoutError
            raise APITimeoutError(url) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise APIConnectionError(f"Connection error: {type(exc).__name__}: {exc}", url) from exc
        if json_body:
            return json.loads(raw)  # a cut-off body raises JSONDecodeError: bad_body
        return raw.decode("utf-8", "replace")  # an HTML page at 200: the provider says it is no answer

    def _drop(self) -> None:
        """Forget a session of another loop (one that was not closed in its own loop): marked
        closed without that loop; its sockets go with it when it is collected."""
        session, self._session = self._session, None
        connector = session.connector
        if connector is not None:
            connector._close()
        session.detach()

    async def aclose(self) -> None:
        if self._session is None:
            return
        if self._loop is asyncio.get_running_loop():
            await self._session.close()
            self._session = None
        else:
            self._drop()


def encode(body: dict[str, Any]) -> bytes:
    """The request body, byte for byte as the SDK sends it (compact, UTF-8): an endpoint, a
    cache in front of it or the fault server's seeded draws see the same request either way."""
    return _BODY_JSON(body).encode()


#: one kept encoder (``json.dumps`` with options makes a new one per call)
_BODY_JSON = json_encoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def env_proxy(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``,
    minus ``NO_PROXY``), as httpx and the SDK read it; None for none."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    proxies = getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or (parts.hostname and proxy_bypass(parts.hostname)):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"
