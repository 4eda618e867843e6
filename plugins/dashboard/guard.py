"""What the dashboard lets in: requests for one of its own host names, and state-changing
requests only from its own pages.

The dashboard has no login; what keeps other people's web pages out is this:

* **Host** (DNS rebinding): a page on ``evil.example`` whose name is made to resolve to
  127.0.0.1 reaches the dashboard with ``Host: evil.example``. Only the names the dashboard is
  served under are answered (:func:`allowed_hosts`: the loopback names, plus the ``--host``
  address, plus this machine's names when ``--host`` is every interface, plus ``--allow-host``);
  anything else is a 400.
* **Origin** (cross-site requests): a request that is not ``GET``/``HEAD``/``OPTIONS`` must come
  from a page of this dashboard. A browser says where a request comes from in ``Origin`` (and
  ``Sec-Fetch-Site``); a foreign origin, ``Origin: null`` or ``Sec-Fetch-Site: cross-site`` is a
  403. A request with neither (``curl``, a script) is let through: it is not a web page.
* **JSON only** (:func:`wants_json`): the interview endpoint takes ``application/json`` alone, a
  type no cross-site form or simple request can send without the browser asking first (a
  preflight, which the dashboard never allows).

A bug while making a page is answered with one line (known secrets scrubbed, as in the logs)
and logged the same way: no traceback reaches the browser or the server's log.
"""

from __future__ import annotations

import html
import json
import socket
from typing import Any, Iterable
from urllib.parse import urlsplit

import structlog

from townsquare.api import redact_text

log = structlog.get_logger("townsquare.dashboard")

#: names that always mean this machine
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: addresses that mean every interface of this machine
EVERY_INTERFACE = ("0.0.0.0", "::", "")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def allowed_hosts(host: str = "127.0.0.1", extra: Iterable[str] = ()) -> set[str]:
    """The host names the dashboard answers to when it listens on ``host``."""
    names = set(LOOPBACK)
    bound = normal_host(host)
    if bound in EVERY_INTERFACE:  # reachable from the network: by this machine's names and addresses
        for name in {socket.gethostname(), socket.getfqdn()}:
            names.add(normal_host(name))
            try:
                names |= {normal_host(info[4][0]) for info in socket.getaddrinfo(name, None)}
            except OSError:
                pass
    else:
        names.add(bound)
    return names | {normal_host(name) for name in extra}


def normal_host(name: str) -> str:
    """``[::1]``, ``LocalHost.`` -> ``::1``, ``localhost``."""
    return name.strip().strip("[]").rstrip(".").lower()


def split_host(header: str) -> str:
    """The host of a ``Host`` header, without the port (``[::1]:8000`` -> ``::1``)."""
    header = header.strip()
    if header.startswith("["):
        return normal_host(header[1:header.find("]")] if "]" in header else header)
    return normal_host(header.rsplit(":", 1)[0] if header.count(":") == 1 else header)


class Guard:
    """ASGI middleware: the Host and Origin checks of the module docstring."""

    def __init__(self, app: Any, hosts: Iterable[str]):
        self.app = app
        self.hosts = {normal_host(name) for name in hosts}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        host = headers.get("host", "")
        if split_host(host) not in self.hosts:
            await _refuse(send, 400, f"this dashboard is not served under the name {split_host(host)[:80]!r} "
                                     "(serve it with --allow-host NAME to add one)")
            return
        if scope["method"] not in SAFE_METHODS:
            problem = foreign_origin(headers, scope.get("scheme", "http"), host)
            if problem is not None:
                await _refuse(send, 403, problem)
                return
        started = False

        async def sending(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:  # noqa: BLE001 - a page's bug is one line, never a traceback
            text = redact_text(f"the dashboard failed on {scope.get('path', '')}: {type(exc).__name__}: {exc}")
            log.warning("dashboard.failed", path=scope.get("path", ""), error=text)
            if started:
                raise
            if str(scope.get("path", "")).startswith("/api/"):
                await _refuse(send, 500, text)
            else:
                await _send(send, 500, "text/html; charset=utf-8", f"<!doctype html><title>error</title><p>{html.escape(text)}</p>".encode())


def foreign_origin(headers: dict[str, str], scheme: str, host: str) -> str | None:
    """Why a state-changing request does not come from this dashboard's own pages, or None."""
    origin = headers.get("origin")
    if origin is not None:
        if origin.strip().lower() == "null":
            return "refused: a request from an opaque origin (Origin: null)"
        parts = urlsplit(origin.strip())
        if parts.scheme != scheme or (parts.netloc or "").lower() != host.strip().lower():
            return f"refused: a request from another site ({origin[:80]}); ask from the dashboard's own page"
        return None
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"refused: a {site} request; ask from the dashboard's own page"
    return None


def wants_json(content_type: str | None) -> bool:
    """Whether a request's ``Content-Type`` is JSON (``application/json``, any parameters)."""
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"


async def _refuse(send: Any, status: int, message: str) -> None:
    await _send(send, status, "application/json", json.dumps({"error": redact_text(message)}).encode())


async def _send(send: Any, status: int, content_type: str, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
