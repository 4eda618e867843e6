"""A static file server on 127.0.0.1 for the data command's tests, as awkward as real ones.

It serves ``files`` (URL path -> bytes) with the headers real file hosts send (a quoted ETag,
Last-Modified, ``Accept-Ranges``, a ``Content-Type`` with parameters, ``Content-Disposition``,
``Server``), answers ``Range: bytes=N-`` with 206 and ``Content-Range``, and honours
``If-Range`` (a changed file is sent whole with 200). ``faults[path]`` is a list of what to do
to the next requests of that path, one item per request:

* ``("cut", n)``: promise the whole body, send ``n`` bytes of it, close the connection;
* ``"reset"``: close the connection without an answer;
* ``"ignore_range"``: answer a range request with 200 and the whole file;
* ``"bad_range"``: answer 206 with a range that starts somewhere else;
* ``"503"`` / ``"429"``: that status with ``Retry-After: 0`` and an HTML body;
* ``"html"``: 200 with an HTML error page (a captive portal);
* ``"no_length"``: the body without ``Content-Length``, ended by closing the connection.

``requests`` records ``(path, headers)`` of every request (the path as sent, quoted).
"""

from __future__ import annotations

import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

HTML = b"<html><head><title>503 Service Unavailable</title></head><body><h1>Service Unavailable</h1></body></html>"


class FileServer:
    def __init__(self, files: dict[str, bytes] | None = None):
        self.files: dict[str, bytes] = dict(files or {})
        self.faults: dict[str, list[Any]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                server.requests.append((self.path, dict(self.headers.items())))
                server.answer(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "FileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def etag(self, path: str) -> str:
        import hashlib

        return '"' + hashlib.md5(self.files[path]).hexdigest()[:16] + '"'

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = unquote(handler.path)
        fault = self.faults.get(path, []).pop(0) if self.faults.get(path) else None
        if fault == "reset":
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.close_connection = True
            return
        if fault in ("503", "429", "html"):
            status = 200 if fault == "html" else int(fault)
            handler.send_response(status)
            handler.send_header("Content-Type", "text/html; charset=utf-8")
            handler.send_header("Retry-After", "0")
            handler.send_header("Content-Length", str(len(HTML)))
            handler.end_headers()
            handler.wfile.write(HTML)
            return
        if path not in self.files:
            handler.send_response(404)
            handler.send_header("Content-Type", "text/plain")
            handler.send_header("Content-Length", "9")
            handler.end_headers()
            handler.wfile.write(b"not found")
            return
        body = self.files[path]
        start = 0
        wanted = handler.headers.get("Range")
        if_range = handler.headers.get("If-Range")
        partial = bool(wanted) and fault != "ignore_range" and (if_range is None or if_range == self.etag(path))
        if partial:
            start = int(wanted.split("=", 1)[1].split("-", 1)[0])
            if start >= len(body):
                handler.send_response(416)
                handler.send_header("Content-Range", f"bytes */{len(body)}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
        shown_start = max(0, start - 7) if fault == "bad_range" else start
        handler.send_response(206 if partial else 200)
        handler.send_header("Server", "nginx/1.18.0 (Ubuntu)")
        handler.send_header("Content-Type", "application/octet-stream; charset=binary")
        handler.send_header("Content-Disposition", f'attachment; filename="{path.rsplit("/", 1)[-1]}"')
        handler.send_header("Last-Modified", "Wed, 26 Sep 2018 12:00:00 GMT")
        handler.send_header("ETag", self.etag(path))
        handler.send_header("Accept-Ranges", "bytes")
        if partial:
            handler.send_header("Content-Range", f"bytes {shown_start}-{len(body) - 1}/{len(body)}")
        chunk = body[shown_start if fault == "bad_range" else start:]
        if fault == "no_length":
            handler.send_header("Connection", "close")
            handler.close_connection = True
        else:
            handler.send_header("Content-Length", str(len(chunk)))
        handler.end_headers()
        if isinstance(fault, tuple) and fault[0] == "cut":
            handler.wfile.write(chunk[: fault[1]])
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        handler.wfile.write(chunk)
