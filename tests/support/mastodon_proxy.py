"""Test helper: a seeded fault-injecting HTTP proxy in front of mastodon-mock, as nasty as the
proxies and overloaded servers in front of a real instance.

mastodon-mock's own fault plane answers *instead of* the server (a forced status, a 429, a
delay); this proxy adds what only something in the middle can do, each at its own rate per
matching request, drawn from a seeded generator:

before the server sees the request
  ``html_502``        an nginx-style HTML 502 page
  ``reset``           the connection closed with a TCP reset, no answer
  ``ratelimit``       429 with ``Retry-After`` (seconds)
  ``ratelimit_bare``  429 with neither ``Retry-After`` nor ``X-RateLimit-*``, HTML body
  ``slow``            the answer held back ``slow_s`` seconds (then served)

after the server applied the request (its answer is lost)
  ``html_502_after``  the server's answer replaced by an HTML 502 page
  ``reset_after``     the connection reset instead of the answer
  ``cut``             the answer's body cut in half (a consistent Content-Length): not JSON
  ``cut_close``       the full Content-Length announced, half the body sent, connection closed
  ``hang_after``      the answer held back ``hang_s`` seconds, then the connection closed without
                      it (a client whose timeout is shorter gives up first: a timeout after the
                      server acted)

``only`` limits the faults to requests whose ``METHOD /path`` matches one of its globs (e.g.
``"POST /api/v1/accounts"``), ``limit`` their number; mastodon-mock's control plane (``/api/v1/_mock``) and
``/health`` are never touched. ``counts`` tells how many of each kind were injected.

``password_grant=True`` makes the server behave as Mastodon before 4.4 for OAuth: the proxy
remembers the e-mail and password of every sign-up it forwards and answers a ``password``
grant on ``/oauth/token`` with a token for that account (through mastodon-mock's
``/api/v1/_mock/login``); ``/.well-known/oauth-authorization-server`` is a 404, as it was
then. Without it, mastodon-mock answers as 4.4+: no password logins.
"""

from __future__ import annotations

import fnmatch
import http.client
import json
import random
import socket
import struct
import threading
import time
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BEFORE = ("html_502", "reset", "ratelimit", "ratelimit_bare", "slow")
AFTER = ("html_502_after", "reset_after", "cut", "cut_close", "hang_after")
KINDS = BEFORE + AFTER
EXEMPT = ("/api/v1/_mock", "/health")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "te", "upgrade"}
HTML_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n"
            b"<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")


class FaultProxy:
    def __init__(self, upstream: str, *, seed: int = 0, rates: dict[str, float] | None = None, only: list[str] | None = None,
                 password_grant: bool = False, slow_s: float = 0.3, retry_after: int = 1, hang_s: float = 1.0):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts: Counter = Counter()
        self.password_grant = password_grant
        self.slow_s = slow_s
        self.hang_s = hang_s
        self.retry_after = retry_after
        self.logins: dict[str, tuple[str, str]] = {}  # e-mail -> (username, password), from forwarded sign-ups
        self.configure(rates or {}, only)
        self.server: ThreadingHTTPServer | None = None

    def configure(self, rates: dict[str, float], only: list[str] | None = None, limit: int | None = None) -> None:
        """Change the fault rates (per kind, 0..1, summing to at most 1), the requests they hit
        and how many faults to inject at most from now on (None: no limit)."""
        unknown = set(rates) - set(KINDS)
        if unknown or sum(rates.values()) > 1:
            raise ValueError(f"bad fault rates {rates}")
        with self.lock:
            self.rates = dict(rates)
            self.only = list(only) if only else None
            self.left = limit

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> "FaultProxy":
        proxy = self

        class Handler(ProxyHandler):
            owner = proxy

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def draw(self, method: str, path: str) -> str | None:
        """The fault for one request, or None."""
        if path.startswith(EXEMPT):
            return None
        with self.lock:
            if self.only is not None and not any(fnmatch.fnmatch(f"{method} {path}", rule) for rule in self.only):
                return None
            x, edge = self.rng.random(), 0.0
            for kind in KINDS:
                edge += self.rates.get(kind, 0.0)
                if x < edge and self.left != 0:
                    self.counts[kind] += 1
                    self.left = None if self.left is None else self.left - 1
                    return kind
        return None


class QuietServer(ThreadingHTTPServer):
    """A client that gave up on its request (its timeout, during a slow answer) closes the
    connection: the answer's broken pipe is that client's business, not a proxy error."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class ProxyHandler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.handle_any()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    # ------------------------------------------------------------------ one request

    def handle_any(self) -> None:
        owner = self.owner
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urllib.parse.urlsplit(self.path).path
        fault = owner.draw(self.command, path)
        if fault == "slow":
            time.sleep(owner.slow_s)
        elif fault in BEFORE:
            return self.inject(fault)
        answer = self.emulated(path, body) or self.forward(body)
        if answer is None:
            return self.inject("html_502")  # the server itself is gone
        status, headers, content = answer
        if fault in ("html_502_after", "reset_after"):
            return self.inject("reset" if fault == "reset_after" else "html_502")
        if fault == "hang_after":
            time.sleep(owner.hang_s)
            self.close_connection = True
            return
        if fault == "cut":
            content = content[: len(content) // 2]
        if fault == "cut_close":
            self.send(status, headers, content[: len(content) // 2], length=len(content))
            self.close_connection = True
            return
        self.send(status, headers, content)

    def forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes] | None:
        up = self.owner.upstream
        connection = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            connection.request(self.command, self.path, body=body or None, headers=headers)
            response = connection.getresponse()
            content = response.read()
            return response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP], content
        except OSError:
            return None
        finally:
            connection.close()

    def emulated(self, path: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """Mastodon before 4.4: password logins (see the module docstring)."""
        owner = self.owner
        if not owner.password_grant:
            return None
        if path == "/.well-known/oauth-authorization-server":
            return 404, [("Content-Type", "application/json")], b'{"error":"Record not found"}'
        if self.command != "POST":
            return None
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode("utf-8", "replace")).items()}
        if path == "/api/v1/accounts":
            answer = self.forward(body)
            if answer is not None and answer[0] == 200:
                with owner.lock:
                    owner.logins[form.get("email", "")] = (form.get("username", ""), form.get("password", ""))
            return answer
        if path == "/oauth/token" and form.get("grant_type") == "password":
            with owner.lock:
                known = owner.logins.get(form.get("username", ""))
            if known is None or known[1] != form.get("password"):
                return 400, [("Content-Type", "application/json")], b'{"error":"invalid_grant"}'
            return self.mock_login(known[0])
        return None

    def mock_login(self, username: str) -> tuple[int, list[tuple[str, str]], bytes] | None:
        up = self.owner.upstream
        connection = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
        try:
            connection.request("POST", "/api/v1/_mock/login", body=json.dumps({"username": username}),
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, [("Content-Type", "application/json")], response.read()
        except OSError:
            return None
        finally:
            connection.close()

    # ------------------------------------------------------------------ answers

    def send(self, status: int, headers: list[tuple[str, str]], content: bytes, length: int | None = None) -> None:
        self.send_response(status)
        for key, value in headers:
            if key.lower() not in ("date", "server"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(content) if length is None else length))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(content)
        self.wfile.flush()

    def inject(self, fault: str) -> None:
        if fault == "reset":
            # SO_LINGER 0: close() sends a TCP reset, as a crashing proxy does
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        if fault == "ratelimit":
            self.send(429, [("Content-Type", "application/json"), ("Retry-After", str(self.owner.retry_after))],
                      b'{"error":"Too many requests"}')
        elif fault == "ratelimit_bare":
            self.send(429, [("Content-Type", "text/html")], b"<html><body><h1>429 Too Many Requests</h1></body></html>")
        else:
            self.send(502, [("Content-Type", "text/html")], HTML_502)
