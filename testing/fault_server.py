"""A fault-injecting OpenAI-compatible HTTP server, FOR TESTS AND BENCHMARKS ONLY.

``POST /v1/chat/completions`` and ``POST /v1/embeddings`` answer like an OpenAI endpoint
after ``latency_ms`` (plus a random extra up to ``latency_jitter_ms``, from an unseeded
generator: concurrent calls come back in a different order each run, as from a real server); ``GET /stats`` returns :attr:`FaultServer.counts` as JSON. A minimal
HTTP/1.1 server on asyncio streams (keep-alive, ``Content-Length`` bodies), bound to
127.0.0.1 only, so it sustains hundreds of concurrent requests on two cores.

Faults are drawn per request from a hash of ``(seed, body, how often that body came before)``:
which request gets which fault does not depend on arrival order, a retried request draws
again, and the same calls in the same order get the same faults. Each kind has its own rate
(``rate_<kind>``; ``FAULTS`` lists them), as nasty as real proxies and overloaded servers:

* transport: ``hang`` (no answer for ``hang_s``, past a client's timeout), ``slow_headers``
  (the status line, then ``slow_s`` before the other headers), ``cut`` (the connection closed
  mid-body), ``reset`` (a TCP reset instead of an answer);
* HTTP: ``429`` (with ``Retry-After``), ``429_bare`` (without), ``500`` (JSON error),
  ``502_html`` (a proxy's HTML page), ``200_html`` (an HTML page with status 200),
  ``body_truncated`` (status 200, the JSON body cut off mid-way), and the fatal ``401``,
  ``403``, ``404`` (model not found) and ``400_context`` (context too long);
* the answer: ``empty_choices`` (``choices: []``), ``null_content`` (``content: null``),
  ``truncated`` (the content cut in half, ``finish_reason: "length"``), ``garbage``
  (unparsable text) and ``binary`` (NUL bytes and control characters).

Embedding requests draw the transport and HTTP faults too (``embeddings.<kind>`` in
:attr:`FaultServer.counts`), and ``empty_choices`` as an empty ``data`` list.

Normal answers are deterministic too: a prompt that names its choices ("Like or skip?",
"Answer with exactly one of: like, skip.") gets one of them, a JSON request (``response_format``)
a JSON object ``{"answer": ...}``, anything else a short text naming a word of the prompt.
Constraints are honoured as a constraining server would: ``response_format`` ``json_schema``
gets an instance of the schema (an enum's member, every required property), vLLM's choice
(``structured_outputs.choice`` or ``guided_choice``) one of the choices; the faults still
strike (a proxy does not care what was asked), and :attr:`FaultServer.recent` keeps the last
request bodies for tests to read.

In process::

    with FaultServer(latency_ms=100, rate_429=0.05) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test")

As a process: ``python -m townsquare.testing.fault_server --port 0 --latency-ms 100``
prints the base URL on its first line and serves until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import random
import re
import signal
import socket
import struct
import threading
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field, fields
from typing import Any

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: transport and HTTP faults: what a proxy or an overloaded server does to any request
TRANSPORT_FAULTS = ("hang", "slow_headers", "cut", "reset", "429", "429_bare", "500", "502_html", "200_html",
                    "body_truncated")
#: what a model or its server does to a chat answer
ANSWER_FAULTS = ("empty_choices", "null_content", "truncated", "garbage", "binary")
#: requests a client must not retry
FATAL_FAULTS = ("401", "403", "404", "400_context")
FAULTS = TRANSPORT_FAULTS + ANSWER_FAULTS + FATAL_FAULTS
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 411: "Length Required",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway"}
_HTML = "<html><head><title>{status} {reason}</title></head><body><center><h1>{status} {reason}</h1></center><hr><center>nginx</center></body></html>"
_FATAL = {
    "401": (401, "Incorrect API key provided (fault server).", "invalid_request_error", "invalid_api_key"),
    "403": (403, "You are not allowed to use this model (fault server).", "permission_error", None),
    "404": (404, "The model does not exist or you do not have access to it (fault server).", "invalid_request_error",
            "model_not_found"),
    "400_context": (400, "This model's maximum context length is 8192 tokens; your messages resulted in 9100 tokens "
                         "(fault server).", "invalid_request_error", "context_length_exceeded"),
}
_CHOICE_LIST = re.compile(r"exactly one of:\s*([^\n.]+)", re.IGNORECASE)
_CHOICE_PAIR = re.compile(r"\b([A-Za-z]+) or ([A-Za-z]+)\?\s*$")


@dataclass
class FaultConfig:
    """Latency, fault rates (each 0..1, summed at most 1) and fault details."""

    latency_ms: float = 0.0
    #: each answer waits up to this much more, drawn anew per request (not seeded: timing noise)
    latency_jitter_ms: float = 0.0
    seed: int = 0
    rate_hang: float = 0.0
    rate_slow_headers: float = 0.0
    rate_cut: float = 0.0
    rate_reset: float = 0.0
    rate_429: float = 0.0
    rate_429_bare: float = 0.0
    rate_500: float = 0.0
    rate_502_html: float = 0.0
    rate_200_html: float = 0.0
    rate_body_truncated: float = 0.0
    rate_empty_choices: float = 0.0
    rate_null_content: float = 0.0
    rate_truncated: float = 0.0
    rate_garbage: float = 0.0
    rate_binary: float = 0.0
    rate_401: float = 0.0
    rate_403: float = 0.0
    rate_404: float = 0.0
    rate_400_context: float = 0.0
    retry_after_s: float = 1.0
    hang_s: float = 30.0
    slow_s: float = 0.2
    dimensions: int = 64
    #: a concurrency probe: each request waits (at most ``hang_s``) until this many are in
    #: flight at once, so a test sees a client's concurrency without timing it; 0 = off
    hold_until: int = 0

    @classmethod
    def every_kind(cls, rate: float, kinds: tuple[str, ...] = TRANSPORT_FAULTS + ANSWER_FAULTS, **settings: Any) -> "FaultConfig":
        """``rate`` of faults in all, spread evenly over ``kinds`` (default: every retryable
        kind and the answer faults)."""
        return cls(**{f"rate_{kind}": rate / len(kinds) for kind in kinds}, **settings)

    def rates(self) -> list[tuple[str, float]]:
        rates = [(kind, getattr(self, f"rate_{kind}")) for kind in FAULTS]
        if any(r < 0 for _, r in rates) or sum(r for _, r in rates) > 1:
            raise ValueError("fault rates must be >= 0 and sum to at most 1")
        return rates


class FaultServer:
    """The server. ``counts``: requests, ok, embeddings and one entry per fault kind served;
    ``keys``: requests per bearer token; ``recent``: the last chat request bodies;
    ``peak_in_flight``: the most API requests it has held at once."""

    def __init__(self, config: FaultConfig | None = None, *, host: str = "127.0.0.1", port: int = 0, **settings: Any):
        if host not in LOCAL_HOSTS:
            raise ValueError(f"fault server: refusing to bind to {host!r}; it serves 127.0.0.1 only")
        self.config = config or FaultConfig(**settings)
        self._rates = self.config.rates()
        self.host, self.port = "127.0.0.1" if host == "localhost" else host, port
        self.counts: Counter[str] = Counter()
        self.keys: Counter[str] = Counter()
        self.recent: deque[dict[str, Any]] = deque(maxlen=256)
        self._seen: Counter[bytes] = Counter()
        self.in_flight = self.peak_in_flight = 0
        self._all_in: asyncio.Event | None = None
        self._handlers: set[asyncio.Task] = set()
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    # ------------------------------------------------------------------ lifecycle

    async def start_serving(self) -> None:
        """Listen on the current event loop (``port`` 0 picks a free port)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and drop every open connection (hanging requests included)."""
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        self._server = None

    def start(self) -> "FaultServer":
        """Serve from a background thread with its own event loop."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-server", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.start_serving(), self._loop).result(timeout=10)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self.close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> "FaultServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        loop = asyncio.get_running_loop()  # its clock times each request from when its head was read
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                arrived = loop.time()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers = {}
                for line in lines[1:]:
                    name, sep, value = line.partition(":")
                    if sep:
                        headers[name.strip().lower()] = value.strip()
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    await self._send(writer, _json_reply(411, {"error": {"message": "send a Content-Length body"}}), close=True)
                    return
                body = await reader.readexactly(int(headers.get("content-length", 0) or 0))
                if "authorization" in headers:
                    self.keys[headers["authorization"].removeprefix("Bearer ")] += 1
                reply = await self._route(method, path.split("?", 1)[0], body, arrived)
                if reply is None:  # a hang: give up on the request without a word
                    return
                close = headers.get("connection", "").lower() == "close" or reply.mode in ("cut", "reset")
                await self._send(writer, reply, close=close)
                if close:
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _send(self, writer: asyncio.StreamWriter, reply: "_Reply", close: bool = False) -> None:
        if reply.mode == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:  # SO_LINGER 0: close() sends a TCP reset
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        status_line = f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Error')}\r\n".encode()
        head = [f"Content-Type: {reply.content_type}", f"Content-Length: {len(reply.body)}",
                f"Connection: {'close' if close else 'keep-alive'}"]
        head += [f"{name}: {value}" for name, value in reply.headers.items()]
        rest = ("\r\n".join(head) + "\r\n\r\n").encode()
        if reply.mode == "slow_headers":
            writer.write(status_line)
            await writer.drain()
            await asyncio.sleep(self.config.slow_s)
            writer.write(rest + reply.body)
        elif reply.mode == "cut":  # promise the whole body, send half, hang up
            writer.write(status_line + rest + reply.body[: len(reply.body) // 2])
            await writer.drain()
            writer.transport.abort()
            return
        else:
            writer.write(status_line + rest + reply.body)
        await writer.drain()

    async def _route(self, method: str, path: str, body: bytes, arrived: float) -> "_Reply | None":
        if method == "GET" and path == "/stats":
            return _json_reply(200, dict(self.counts))
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/embeddings"):
            return _json_reply(404, {"error": {"message": f"no route {method} {path}", "type": "invalid_request_error"}})
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return _json_reply(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
        loop = asyncio.get_running_loop()
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.config.hold_until:
                await self._hold()
                arrived = loop.time()  # the latency runs from when the request is let through
            reply = await self._answer_request(path, request, body, arrived)
            if reply is not None and reply.due > loop.time():  # made at once, sent when due
                await asyncio.sleep(reply.due - loop.time())
            return reply
        finally:
            self.in_flight -= 1

    async def _hold(self) -> None:
        """Wait until ``hold_until`` requests are in flight (or ``hang_s`` passes)."""
        if self._all_in is None:
            self._all_in = asyncio.Event()
        if self.in_flight >= self.config.hold_until:
            self._all_in.set()
        try:
            await asyncio.wait_for(self._all_in.wait(), self.config.hang_s)
        except asyncio.TimeoutError:
            pass

    async def _answer_request(self, path: str, request: Any, body: bytes, arrived: float) -> "_Reply | None":
        """The reply, made at once; its ``due`` is ``latency_ms`` after ``arrived`` (when the
        request's head was read), so the time it takes to make is inside the latency, not added
        to it (at 2,560 requests a second that was several milliseconds a request)."""
        embeddings = path == "/v1/embeddings"
        self.counts["embeddings" if embeddings else "requests"] += 1
        fault, h = self._draw(body)
        if fault is not None:
            self.counts[f"embeddings.{fault}" if embeddings else fault] += 1
        if fault == "hang":
            await asyncio.sleep(self.config.hang_s)
            return None
        due = arrived + (self.config.latency_ms + random.random() * self.config.latency_jitter_ms) / 1000
        if fault in TRANSPORT_FAULTS or fault in FATAL_FAULTS:
            reply = self._http_fault(fault)
            if reply is not None:
                reply.due = due
                return reply
        if embeddings:
            data = self._embeddings(request)
            if fault == "empty_choices":
                data["data"] = []
            elif fault is None:
                self.counts["embeddings.ok"] += 1
            reply = _json_reply(200, data)
        else:
            reply = self._chat(request, fault, h)
        if fault == "body_truncated":
            reply.body = reply.body[: len(reply.body) // 2]
        elif fault in ("slow_headers", "cut", "reset"):
            reply.mode = fault
        reply.due = due
        return reply

    def _http_fault(self, fault: str) -> "_Reply | None":
        """The reply for a transport or HTTP fault; None for those that garble a normal answer."""
        if fault == "429":
            after = self.config.retry_after_s
            return _json_reply(429, _error("Rate limit reached (fault server)", "rate_limit_error"),
                               {"Retry-After": str(int(after)) if float(after).is_integer() else str(after)})
        if fault == "429_bare":
            return _json_reply(429, _error("Rate limit reached (fault server)", "rate_limit_error"))
        if fault == "500":
            return _json_reply(500, _error("The server had an error (fault server)", "server_error"))
        if fault in ("502_html", "200_html"):
            status = 502 if fault == "502_html" else 200
            page = _HTML.format(status=502, reason="Bad Gateway").encode()
            return _Reply(status, page, "text/html")
        if fault in _FATAL:
            status, message, kind, code = _FATAL[fault]
            return _json_reply(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})
        return None

    # ------------------------------------------------------------------ answers

    def _draw(self, body: bytes) -> tuple[str | None, int]:
        """The fault for this body (None: a normal answer) and a hash for choosing answers."""
        digest = hashlib.blake2b(body, digest_size=16).digest()
        seen = self._seen[digest]
        self._seen[digest] += 1
        roll = hashlib.blake2b(struct.pack("<qq", self.config.seed, seen) + digest, digest_size=8).digest()
        u = int.from_bytes(roll, "big") / 2**64
        for kind, rate in self._rates:
            if u < rate:
                return kind, int.from_bytes(digest[:8], "big")
            u -= rate
        return None, int.from_bytes(digest[:8], "big")

    def _chat(self, request: dict[str, Any], fault: str | None, h: int) -> "_Reply":
        self.recent.append(request)
        messages = request.get("messages") or [{}]
        prompt = str(messages[-1].get("content", ""))
        text: str | None = self._answer(request, prompt, h)
        finish = "stop"
        if fault == "garbage":
            text = "".join("#@%&*~^;:!?"[(h >> (3 * i)) % 11] for i in range(12)) + " qxzv brrp"
        elif fault == "binary":
            text = "\x00\x01\x02" + "".join(chr((h >> (4 * i)) % 32) for i in range(12)) + "\x00"
        elif fault == "truncated":
            whole = json.dumps({"answer": text})
            text, finish = whole[: len(whole) // 2], "length"
        elif fault == "null_content":
            text = None
        elif fault is None or fault == "slow_headers":
            self.counts["ok"] += 1
        prompt_tokens = sum(len(str(m.get("content", ""))) // 4 + 1 for m in messages)
        completion_tokens = len(text or "") // 4 + 1
        choices = [] if fault == "empty_choices" else [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish, "logprobs": None}]
        payload = {
            "id": f"chatcmpl-{h:016x}", "object": "chat.completion", "created": 0, "model": request.get("model", ""),
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        return _json_reply(200, payload)

    @staticmethod
    def _answer(request: dict[str, Any], prompt: str, h: int) -> str:
        guided = (request.get("structured_outputs") or {}).get("choice") or request.get("guided_choice")
        if guided:
            return str(guided[h % len(guided)])
        choices = _choices(prompt)
        if choices:
            text = choices[h % len(choices)]
        else:
            words = re.findall(r"[a-z]{5,}", prompt.lower())
            text = f"a short post about {words[h % len(words)] if words else 'things'}"
        response_format = request.get("response_format") or {}
        if response_format.get("type") == "json_schema":
            return json.dumps(schema_instance((response_format.get("json_schema") or {}).get("schema") or {}, h, text))
        if response_format.get("type") == "json_object":
            return json.dumps({"answer": text})
        return text

    def _embeddings(self, request: dict[str, Any]) -> dict[str, Any]:
        inputs = request.get("input", "")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        dims = int(request.get("dimensions") or self.config.dimensions)
        data = []
        for i, text in enumerate(inputs):
            vector = _vector(json.dumps(text), dims)
            if request.get("encoding_format") == "base64":
                encoded: Any = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
            else:
                encoded = vector
            data.append({"object": "embedding", "index": i, "embedding": encoded})
        tokens = sum(len(json.dumps(t)) // 4 + 1 for t in inputs)
        return {"object": "list", "data": data, "model": request.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


@dataclass
class _Reply:
    """One HTTP reply: ``mode`` ``normal``, ``slow_headers``, ``cut`` or ``reset``."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    mode: str = "normal"
    #: when it goes out (the server loop's clock); 0: at once
    due: float = 0.0


def _json_reply(status: int, payload: Any, headers: dict[str, str] | None = None) -> _Reply:
    return _Reply(status, json.dumps(payload).encode(), headers=headers or {})


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _choices(prompt: str) -> list[str]:
    listed = _CHOICE_LIST.search(prompt)
    if listed:
        return [c.strip().lower() for c in listed.group(1).split(",") if c.strip()]
    pair = _CHOICE_PAIR.search(prompt.strip())
    return [pair.group(1).lower(), pair.group(2).lower()] if pair else []


def schema_instance(schema: Any, h: int, text: str) -> Any:
    """A value of ``schema`` (a constraining server's answer): an enum's member picked by ``h``,
    every property of an object, ``minItems`` (at least one) items, ``text`` for a string."""
    if not isinstance(schema, dict):
        return text
    if "enum" in schema:
        return schema["enum"][h % len(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:  # each property draws on its own bits of h
        return {key: schema_instance(sub, h ^ zlib.crc32(key.encode()), text) for key, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [schema_instance(schema.get("items") or {}, h >> (5 + i), text) for i in range(max(1, schema.get("minItems", 1)))]
    if kind == "integer":
        return int(schema.get("minimum", h % 10))
    if kind == "number":
        return float(schema.get("minimum", h % 10))
    if kind == "boolean":
        return bool(h & 1)
    if kind == "null":
        return None
    limit = schema.get("maxLength")
    return text[:limit] if isinstance(limit, int) else text


def _vector(text: str, dims: int) -> list[float]:
    """A unit vector from a hash of ``text``: equal texts, equal vectors."""
    raw = b""
    counter = 0
    while len(raw) < 4 * dims:
        raw += hashlib.blake2b(text.encode() + counter.to_bytes(4, "big"), digest_size=64).digest()
        counter += 1
    values = [v / 2**31 - 1.0 for v in struct.unpack(f">{dims}I", raw[: 4 * dims])]
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    return [v / norm for v in values]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m townsquare.testing.fault_server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", choices=LOCAL_HOSTS)
    parser.add_argument("--port", type=int, default=0)
    for f in fields(FaultConfig):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    args = vars(parser.parse_args(argv))
    host, port = args.pop("host"), args.pop("port")
    server = FaultServer(FaultConfig(**args), host=host, port=port)

    async def serve() -> None:
        await server.start_serving()
        print(server.base_url, flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await stop.wait()
        await server.close()

    asyncio.run(serve())


if __name__ == "__main__":  # pragma: no cover
    main()
