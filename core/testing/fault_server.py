"""A fault-injecting OpenAI-compatible HTTP server, FOR TESTS AND BENCHMARKS ONLY.

``POST /v1/chat/completions`` and ``POST /v1/embeddings`` answer like an OpenAI endpoint
after ``latency_ms``; ``GET /stats`` returns :attr:`FaultServer.counts` as JSON. A minimal
HTTP/1.1 server on asyncio streams (keep-alive, ``Content-Length`` bodies), bound to
127.0.0.1 only, so it sustains hundreds of concurrent requests on two cores.

Faults are drawn per request from a hash of ``(seed, body, how often that body came before)``:
which request gets which fault does not depend on arrival order, a retried request draws
again, and the same calls in the same order get the same faults. Kinds (``FAULTS``): ``429``
(with ``Retry-After``), ``500``, ``hang`` (no answer for ``hang_s``, past a client's timeout),
``garbage`` (200 with unparsable text) and ``truncated`` (200 with JSON cut in half).

Normal answers are deterministic too: a prompt that names its choices ("Like or skip?",
"Answer with exactly one of: like, skip.") gets one of them, a JSON request (``response_format``)
a JSON object ``{"answer": ...}``, anything else a short text naming a word of the prompt.

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
import re
import signal
import struct
import threading
from collections import Counter, deque
from dataclasses import dataclass, fields
from typing import Any

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
FAULTS = ("429", "500", "hang", "garbage", "truncated")
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 411: "Length Required", 429: "Too Many Requests",
            500: "Internal Server Error"}
_CHOICE_LIST = re.compile(r"exactly one of:\s*([^\n.]+)", re.IGNORECASE)
_CHOICE_PAIR = re.compile(r"\b([A-Za-z]+) or ([A-Za-z]+)\?\s*$")


@dataclass
class FaultConfig:
    """Latency, fault rates (each 0..1, summed at most 1) and fault details."""

    latency_ms: float = 0.0
    seed: int = 0
    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_hang: float = 0.0
    rate_garbage: float = 0.0
    rate_truncated: float = 0.0
    retry_after_s: float = 1.0
    hang_s: float = 30.0
    dimensions: int = 64

    def rates(self) -> list[tuple[str, float]]:
        rates = [(kind, getattr(self, f"rate_{kind}")) for kind in FAULTS]
        if any(r < 0 for _, r in rates) or sum(r for _, r in rates) > 1:
            raise ValueError("fault rates must be >= 0 and sum to at most 1")
        return rates


class FaultServer:
    """The server. ``counts``: requests, ok, embeddings and one entry per fault kind served;
    ``keys``: requests per bearer token; ``recent``: the last chat request bodies."""

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
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers = {}
                for line in lines[1:]:
                    name, sep, value = line.partition(":")
                    if sep:
                        headers[name.strip().lower()] = value.strip()
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    await self._respond(writer, 411, {"error": {"message": "send a Content-Length body"}}, close=True)
                    return
                body = await reader.readexactly(int(headers.get("content-length", 0) or 0))
                if "authorization" in headers:
                    self.keys[headers["authorization"].removeprefix("Bearer ")] += 1
                answer = await self._route(method, path.split("?", 1)[0], body)
                if answer is None:  # a hang: give up on the request without a word
                    return
                status, payload, extra = answer
                close = headers.get("connection", "").lower() == "close"
                await self._respond(writer, status, payload, extra, close=close)
                if close:
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._handlers.discard(task)
            writer.close()

    @staticmethod
    async def _respond(writer: asyncio.StreamWriter, status: int, payload: Any, extra: dict[str, str] | None = None,
                       close: bool = False) -> None:
        data = json.dumps(payload).encode()
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", "Content-Type: application/json",
                f"Content-Length: {len(data)}", f"Connection: {'close' if close else 'keep-alive'}"]
        head += [f"{name}: {value}" for name, value in (extra or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        await writer.drain()

    async def _route(self, method: str, path: str, body: bytes) -> tuple[int, Any, dict[str, str]] | None:
        if method == "GET" and path == "/stats":
            return 200, dict(self.counts), {}
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/embeddings"):
            return 404, {"error": {"message": f"no route {method} {path}", "type": "invalid_request_error"}}, {}
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return 400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}}, {}
        if path == "/v1/embeddings":
            self.counts["embeddings"] += 1
            if self.config.latency_ms:
                await asyncio.sleep(self.config.latency_ms / 1000)
            return 200, self._embeddings(request), {}
        return await self._chat(request, body)

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

    async def _chat(self, request: dict[str, Any], body: bytes) -> tuple[int, Any, dict[str, str]] | None:
        self.counts["requests"] += 1
        self.recent.append(request)
        fault, h = self._draw(body)
        if fault is not None:
            self.counts[fault] += 1
        if fault == "hang":
            await asyncio.sleep(self.config.hang_s)
            return None
        if self.config.latency_ms:
            await asyncio.sleep(self.config.latency_ms / 1000)
        if fault == "429":
            after = self.config.retry_after_s
            return 429, _error("Rate limit reached (fault server)", "rate_limit_error"), {
                "Retry-After": str(int(after)) if float(after).is_integer() else str(after)}
        if fault == "500":
            return 500, _error("The server had an error (fault server)", "server_error"), {}
        messages = request.get("messages") or [{}]
        prompt = str(messages[-1].get("content", ""))
        text = self._answer(request, prompt, h)
        if fault == "garbage":
            text = "".join("#@%&*~^;:!?"[(h >> (3 * i)) % 11] for i in range(12)) + " qxzv brrp"
        elif fault == "truncated":
            whole = json.dumps({"answer": text})
            text = whole[: len(whole) // 2]
        else:
            self.counts["ok"] += 1
        prompt_tokens = sum(len(str(m.get("content", ""))) // 4 + 1 for m in messages)
        completion_tokens = len(text) // 4 + 1
        return 200, {
            "id": f"chatcmpl-{h:016x}", "object": "chat.completion", "created": 0, "model": request.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "length" if fault == "truncated" else "stop", "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }, {}

    @staticmethod
    def _answer(request: dict[str, Any], prompt: str, h: int) -> str:
        choices = _choices(prompt)
        if choices:
            text = choices[h % len(choices)]
        else:
            words = re.findall(r"[a-z]{5,}", prompt.lower())
            text = f"a short post about {words[h % len(words)] if words else 'things'}"
        if (request.get("response_format") or {}).get("type") in ("json_object", "json_schema"):
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


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _choices(prompt: str) -> list[str]:
    listed = _CHOICE_LIST.search(prompt)
    if listed:
        return [c.strip().lower() for c in listed.group(1).split(",") if c.strip()]
    pair = _CHOICE_PAIR.search(prompt.strip())
    return [pair.group(1).lower(), pair.group(2).lower()] if pair else []


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
