"""The ``openai`` provider's transports (``[llm] transport``): every fault reads the same on
aiohttp as on the SDK, the proxy comes from the environment once, a session follows its event
loop, keys stay out of errors, and a bad setting is one clear error."""

from __future__ import annotations

import asyncio
import gc
import warnings
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

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
    sdk, lean = rows["sdk"], rows["aiohttp"]
    assert lean[:4] == sdk[:4] and sdk[0] == "error"
    if fault in MORE_DETAIL:  # same exception class, a longer message
        assert lean[4].startswith(sdk[4].split(":")[0] + ": " + sdk[4].split(": ", 1)[1].rstrip("."))
    else:
        assert lean[4] == sdk[4]
    assert "sk-test-secret-key" not in repr(rows)


def test_retry_after_reaches_the_retry_on_both_transports():
    from townsquare.llm_faults import retry_after

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
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    assert "Zoë".encode() in bodies[0] and b'": ' not in bodies[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_requests_go_through_the_proxy_the_environment_names(transport, monkeypatch):
    """The test server as the proxy: it gets the request in absolute form and has no such route."""
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    with FaultServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url.removesuffix("/v1"))
        record, fault = first_record(SimpleNamespace(base_url="http://far-away.invalid/v1"), transport)
    assert fault is not None and fault.kind == "not_found"
    assert "no route POST http://far-away.invalid/v1/chat/completions" in record.error
