"""The ``openai`` provider's transports (``[llm] transport``): every fault reads the same on
aiohttp and on the bare HTTP client as on the SDK, the same bytes go out, the proxy comes from
the environment once (the bare client refuses one), pools follow their event loop, keys stay
out of errors, and a bad setting is one clear error."""

from __future__ import annotations

import asyncio
import gc
import shutil
import ssl
import subprocess
import warnings
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from townsquare.errors import UsageError
from townsquare.llm import LLMRequest, Message
from townsquare.llm_faults import LLMFault
from townsquare.plugins.llm.openai import OpenAIConfig, OpenAIProvider
from townsquare.plugins.llm.openai_transport import TRANSPORTS, AiohttpPool, env_proxy
from townsquare.testing.fault_server import FaultServer
from townsquare.testing.llm_chain import build_chain, build_context

LIKE = "You are Ada. Post: the mountains were lovely today\nLike or skip?"
#: faults whose aiohttp error says more than the SDK's ("Connection error." / "Error code: 502")
MORE_DETAIL = {"cut", "reset", "502_html"}


def first_record(server: FaultServer, transport: str, key: str = "sk-test"):
    """The accounting's record of one like/skip call, and the fault it ended in (or None)."""

    async def go():
        provider = OpenAIProvider(OpenAIConfig(base_url=server.base_url, model="m", timeout_s=1.0, transport=transport),
                                  build_context())
        chain = build_chain(provider)
        try:
            await chain.client.choose(LIKE, ["like", "skip"], purpose="like", default="skip")
            fault = None
        except LLMFault as exc:
            fault = exc
        finally:
            await provider.aclose()
        return chain.records[0], fault

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.mark.parametrize("fault", ["200_html", "400_context", "401", "403", "404", "429", "429_bare", "500", "502_html",
                                   "body_truncated", "cut", "empty_choices", "hang", "null_content", "reset", "truncated"])
def test_every_fault_reads_the_same_on_both_transports(fault):
    rows = {}
    for transport in TRANSPORTS:
        with FaultServer(**{f"rate_{fault}": 1.0}, hang_s=3, retry_after_s=2) as server:
            record, raised = first_record(server, transport)
            assert server.counts[fault] == 1
        rows[transport] = (record.status, record.kind, raised.status if raised else None,
                           raised.retryable if raised else None, record.error)
    sdk = rows.pop("sdk")
    assert sdk[0] == "error"
    for transport, lean in rows.items():
        assert lean[:4] == sdk[:4], transport
        if fault in MORE_DETAIL:  # same exception class, a longer message
            assert lean[4].startswith(sdk[4].split(":")[0] + ": " + sdk[4].split(": ", 1)[1].rstrip(".")), transport
        else:
            assert lean[4] == sdk[4], transport
    assert "sk-test-secret-key" not in repr(rows)


def test_retry_after_reaches_the_retry_on_both_transports():
    from townsquare.lib.backoff import retry_after

    for transport in TRANSPORTS:
        with FaultServer(rate_429=1.0, retry_after_s=7) as server:
            _, fault = first_record(server, transport)
        assert retry_after(fault, now=0.0) == 7.0, transport
        with FaultServer(rate_429_bare=1.0) as server:
            _, fault = first_record(server, transport)
        assert fault.kind == "rate_limit" and retry_after(fault, now=0.0) is None, transport


def test_the_proxy_comes_from_the_environment(monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://api.openai.com/v1/chat/completions") is None
    monkeypatch.setenv("HTTPS_PROXY", "proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "gpu1,localhost")
    assert env_proxy("https://api.openai.com/v1/chat/completions") == "http://proxy.example:3128"
    assert env_proxy("https://gpu1:8000/v1/chat/completions") is None
    assert env_proxy("http://vllm:8000/v1/chat/completions") is None  # no HTTP_PROXY set
    monkeypatch.setenv("HTTP_PROXY", "http://plain:8080")
    assert env_proxy("http://vllm:8000/v1/chat/completions") == "http://plain:8080"


def test_a_provider_follows_its_event_loop_and_leaves_nothing_unclosed():
    """Built outside any loop, used and closed in one loop, then used and closed in another:
    every answer comes, and nothing is left unclosed."""
    with FaultServer() as server:
        provider = OpenAIProvider(OpenAIConfig(base_url=server.base_url, model="m", api_key_env=""), build_context())
        request = LLMRequest(messages=(Message("user", LIKE),), labels=("like", "skip"))

        async def ask():
            try:
                return await provider.complete(request)
            finally:
                await provider.aclose()

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first, second = asyncio.run(ask()), asyncio.run(ask())
            del ask, provider  # a pool the second close missed warns only once it is collected
            gc.collect()
        assert first.text in ("like", "skip") and second.text == first.text
        assert server.counts["ok"] == 2
    assert not [w for w in caught if "nclosed" in str(w.message)], [str(w.message) for w in caught]


def test_one_pool_per_route_sized_to_the_run(tmp_path):
    (tmp_path / "keys.txt").write_text("sk-one\nsk-two\n")
    config = OpenAIConfig(base_url="http://127.0.0.1:9/v1", api_key_file="keys.txt", transport="aiohttp",
                          endpoints=[{"base_url": "http://127.0.0.1:10/v1", "api_key_env": ""}])
    provider = OpenAIProvider(config, build_context(concurrency=300, base_dir=str(tmp_path)))
    pools = provider._pools
    assert all(isinstance(p, AiohttpPool) for p in pools) and [p.route for p in pools] == [0, 1, 2]
    assert [p.size for p in pools] == [101, 101, 101]  # 300 in flight over 3 routes, one spare each
    assert [p.url for p in pools] == ["http://127.0.0.1:9/v1/chat/completions"] * 2 + ["http://127.0.0.1:10/v1/chat/completions"]


def test_an_unknown_transport_is_one_clear_error():
    with pytest.raises(ValidationError, match="transport"):
        OpenAIConfig(transport="curl")


def test_both_transports_send_the_same_bytes(monkeypatch):
    """Same bytes, same seeded faults from the test server, same answers from a cache in front
    of an endpoint."""
    bodies = []
    draw = FaultServer._draw
    monkeypatch.setattr(FaultServer, "_draw", lambda self, body: bodies.append(body) or draw(self, body))
    request = LLMRequest(messages=(Message("system", "Tu es Zoë."), Message("user", 'Réponds "oui"\nou non ü')),
                         json_schema={"type": "object"}, temperature=0.2)
    with FaultServer() as server:
        for transport in TRANSPORTS:
            provider = OpenAIProvider(OpenAIConfig(base_url=server.base_url, model="m", api_key_env="", transport=transport),
                                      build_context())

            async def ask():
                try:
                    return await provider.complete(request)
                finally:
                    await provider.aclose()

            asyncio.run(ask())
    assert len(bodies) == len(TRANSPORTS) and len(set(bodies)) == 1
    assert "Zoë".encode() in bodies[0] and b'": ' not in bodies[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_requests_go_through_the_proxy_the_environment_names(transport, monkeypatch):
    """The test server as the proxy: it gets the request in absolute form and has no such route.
    The bare HTTP client goes through none: a proxy for its endpoint is one clear error."""
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    with FaultServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url.removesuffix("/v1"))
        if transport == "http":
            with pytest.raises(UsageError, match='^\\[llm\\] transport = "http" does not go through proxies.*far-away.invalid'):
                first_record(SimpleNamespace(base_url="http://far-away.invalid/v1"), transport)
            return
        record, fault = first_record(SimpleNamespace(base_url="http://far-away.invalid/v1"), transport)
    assert fault is not None and fault.kind == "not_found"
    assert "no route POST http://far-away.invalid/v1/chat/completions" in record.error


ANSWER = b'{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"like"},"finish_reason":"stop"}]}'


def scripted_server(replies: list[bytes], tls: "ssl.SSLContext | None" = None):
    """A server that answers the n-th request it reads with ``replies[n]`` (raw bytes, sent as
    they are; a reply ending in ``b"<close>"`` is sent without it and the connection closed)."""

    async def serve(seen: list[bytes], ready: asyncio.Future, stop: asyncio.Event):
        async def handle(reader, writer):
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    seen.append(head + await reader.readexactly(length))
                    reply = replies[len(seen) - 1]
                    writer.write(reply.removesuffix(b"<close>"))
                    await writer.drain()
                    if reply.endswith(b"<close>"):
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
        ready.set_result(server.sockets[0].getsockname()[1])
        await stop.wait()
        server.close()

    return serve


def ask_scripted(replies: list[bytes], calls: int, tls: "ssl.SSLContext | None" = None, **config):
    """``calls`` requests through the bare HTTP client against :func:`scripted_server`: the
    answers (or the faults) and the raw requests the server read."""
    seen: list[bytes] = []

    async def go():
        stop = asyncio.Event()
        ready = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(scripted_server(replies, tls)(seen, ready, stop))
        port = await ready
        scheme = "https" if tls else "http"
        provider = OpenAIProvider(OpenAIConfig(base_url=f"{scheme}://127.0.0.1:{port}/v1", model="m", transport="http",
                                               timeout_s=2, **config), build_context())
        chain = build_chain(provider)
        outcomes = []
        try:
            for _ in range(calls):
                try:
                    outcomes.append(await chain.client.choose(LIKE, ["like", "skip"], purpose="like", default="skip"))
                except LLMFault as fault:
                    outcomes.append(fault.kind)
        finally:
            await provider.aclose()
            stop.set()
            await task
        return outcomes, seen, chain.records

    return asyncio.run(go())


def reply(body: bytes, *headers: str, status: str = "200 OK", version: str = "HTTP/1.1") -> bytes:
    lines = [f"{version} {status}", "Content-Type: application/json", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_the_bare_client_reads_every_way_an_answer_can_come():
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (ANSWER[:10], ANSWER[10:])) + b"0\r\nX-Trailer: 1\r\n\r\n"
    replies = [
        reply(ANSWER, f"Content-Length: {len(ANSWER)}"),                              # kept alive
        reply(chunked, "Transfer-Encoding: chunked"),                                 # chunked, with a trailer
        b"HTTP/1.1 100 Continue\r\n\r\n" + reply(ANSWER, f"Content-Length: {len(ANSWER)}"),  # 1xx first
        reply(ANSWER, f"Content-Length: {len(ANSWER)}", "Connection: close"),        # then a new connection
        reply(ANSWER, version="HTTP/1.0") + b"<close>",                               # no length: up to the close
        reply(ANSWER, f"Content-Length: {len(ANSWER)}"),
    ]
    outcomes, seen, records = ask_scripted(replies, 6)
    assert outcomes == ["like"] * 6 and [r.status for r in records] == ["ok"] * 6
    request = seen[0].decode()
    assert request.startswith("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:")
    assert "Accept-Encoding: identity" in request and "Authorization: Bearer sk-test-secret-key" in request


def test_the_bare_client_turns_broken_answers_into_faults_and_never_reuses_their_connection():
    replies = [
        b"SMTP ready\r\n\r\n",                                                        # no HTTP at all
        reply(ANSWER[:20], f"Content-Length: {len(ANSWER)}") + b"<close>",           # cut off mid-body
        reply(b'{"error":{"message":"slow down"}}', "Content-Length: 33", "Retry-After: 4", status="429 Too Many"),
        reply(b"not a size\r\n", "Transfer-Encoding: chunked") + b"<close>",          # a broken chunk
        b"HTTP/1.1 204 No Content\r\n\r\n",                                          # no body, kept alive
        reply(ANSWER, f"Content-Length: {len(ANSWER)}"),
    ]
    outcomes, seen, records = ask_scripted(replies, 6)
    assert outcomes == ["connection", "connection", "rate_limit", "connection", "bad_body", "like"]
    assert records[0].error.startswith("APIConnectionError: Connection error: NotHTTP: not an HTTP/1.x status line")
    assert records[1].error.startswith("APIConnectionError: Connection error: ConnectionError: the server closed")
    assert records[2].error == "RateLimitError: Error code: 429 - slow down"
    assert len(seen) == 6


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command to make a certificate")
def test_the_bare_client_verifies_tls(tmp_path, monkeypatch):
    """TLS against a certificate the system does not trust: a ``connection`` fault naming the
    verification; trusted through ``SSL_CERT_FILE``: answers."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    answer = reply(ANSWER, f"Content-Length: {len(ANSWER)}")
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "none.pem"))
    outcomes, _, records = ask_scripted([answer], 1, tls=tls)
    assert outcomes == ["connection"] and "CERTIFICATE_VERIFY_FAILED" in records[0].error
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    outcomes, seen, _ = ask_scripted([answer, answer], 2, tls=tls)
    assert outcomes == ["like", "like"] and len(seen) == 2
