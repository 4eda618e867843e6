"""How the ``openai`` provider's requests reach an endpoint: ``[llm] transport``.

``"aiohttp"`` (the default): one :mod:`aiohttp` session per route (endpoint and key) posting
the JSON body itself. ``"sdk"``: the ``openai`` SDK's generic ``client.post`` over its httpx
stack. Both send the same body to ``BASE_URL/chat/completions`` with the same
``Authorization: Bearer KEY`` header and give the provider the decoded JSON answer.

Why two, and why aiohttp by default: measured on this project's 2-core machine against the
fault server (``benchmarks/llm_throughput.py``, 2,560 calls at 256 in flight, 100 ms), the
client's CPU per call is about 1.5-1.7 ms through the SDK, 2.3 ms through httpx alone, 0.9 ms
through the SDK on aiohttp (``DefaultAioHttpClient``) and 0.24 ms through aiohttp alone (its
HTTP parser is C): one process tops out near 600 calls a second with the SDK and near 4,000
with aiohttp. The SDK stays for what only it does (its own authentication hooks, an Azure
client); every failure reads the same either way.

Failures of the aiohttp transport are raised as exceptions shaped for
:func:`townsquare.llm_faults.classify`, so they get the same kinds as the SDK's:

* :class:`HTTPStatusError` for a non-2xx status (``status_code``, ``body``: the decoded JSON
  error or None, ``response.headers`` for ``Retry-After``, ``request.url`` for the message):
  429 is ``rate_limit``, 5xx ``server`` (an HTML page from a proxy too), 401/403 ``auth``,
  404 ``not_found``, a 400 about the context ``too_long``;
* :class:`HTTPTimeout` when no whole answer came in ``timeout_s`` (``timeout``);
* :class:`HTTPConnectionError` for a reset, a refused connection, a body cut off before its
  ``Content-Length``, a malformed response (``connection``);
* a 2xx body that is no JSON (an HTML page served with status 200, a JSON body cut off) is a
  ``bad_body`` :class:`~townsquare.api.LLMFault` with the start of what came.

Keys go into the ``Authorization`` header only: no message, log line or exception carries
one. A proxy from the environment (``HTTPS_PROXY``..., ``NO_PROXY``) is honoured as the SDK
does.
"""

from __future__ import annotations

import asyncio
import json
import math
from types import SimpleNamespace
from typing import Any

from townsquare.api import LLMFault

#: Most connections in one SDK pool: httpx scans every connection of a pool on each request,
#: so one pool of 256 connections would cost milliseconds per call.
POOL_SIZE = 16

TRANSPORTS = ("aiohttp", "sdk")


class HTTPError(Exception):
    """A failed request of the aiohttp transport; ``request.url`` says where it went."""

    def __init__(self, message: str, url: str):
        super().__init__(message)
        self.request = SimpleNamespace(url=url)


class HTTPTimeout(HTTPError):
    """No whole answer within the timeout."""


class HTTPConnectionError(HTTPError):
    """The connection failed: refused, reset, closed mid-body, or no readable HTTP answer."""


class HTTPStatusError(HTTPError):
    """A non-2xx answer. ``body`` is the decoded JSON body (an OpenAI error object) or None."""

    def __init__(self, status: int, raw: bytes, headers: Any, url: str):
        text = raw.decode("utf-8", "replace")
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        self.status_code = status
        self.body = body
        self.response = SimpleNamespace(status_code=status, headers=headers)
        super().__init__(f"Error code: {status} - {body if body is not None else text[:200]}", url)


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
        # the proxy is looked up once: aiohttp's trust_env would look it (and ~/.netrc) up in a
        # thread on every request, two thread hops per call
        self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                                              headers=self._headers, proxy=env_proxy(self.url),
                                              cookie_jar=aiohttp.DummyCookieJar())
        self._loop = loop
        return self._session

    async def send(self, body: dict[str, Any]) -> Any:
        import aiohttp

        session = self._open()
        url = self.url
        try:
            async with session.post(url, data=json.dumps(body).encode(), allow_redirects=False) as response:
                raw = await response.read()
                status, headers = response.status, response.headers
        except (asyncio.TimeoutError, TimeoutError) as exc:
            raise HTTPTimeout("Request timed out.", url) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise HTTPConnectionError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, url) from exc
        if not 200 <= status < 300:
            raise HTTPStatusError(status, raw, headers, url)
        try:
            return json.loads(raw)
        except ValueError:  # an HTML page at 200, a JSON body cut off, bytes that are no UTF-8
            snippet = raw[:80].decode("utf-8", "replace")
            raise LLMFault("bad_body", f"not JSON ({headers.get('Content-Type', 'no content type')}): {snippet!r}",
                           status=status, endpoint=url) from None

    def _drop(self) -> None:
        """Forget a session whose loop is gone, closing its sockets without that loop."""
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


def open_pools(transport: str, routes: list[tuple[str | None, str]], connections: int, timeout_s: float) -> list[Any]:
    """The pools for ``routes`` (``(base_url, key)``), sized for ``connections`` calls in flight."""
    per_route = math.ceil(connections / len(routes))
    if transport == "aiohttp":
        return [AiohttpPool(url or "https://api.openai.com/v1", key, route, per_route + 1, timeout_s)
                for route, (url, key) in enumerate(routes)]
    import openai  # heavy: imported when a run uses the SDK

    shards = math.ceil(per_route / POOL_SIZE)
    size = math.ceil(per_route / shards) + 1
    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=size, max_keepalive_connections=size)
    return [SDKPool(openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0, timeout=timeout_s,
                                       http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=timeout_s)), route)
            for route, (url, key) in enumerate(routes) for _ in range(shards)]
