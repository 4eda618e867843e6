"""The openai provider against the fault server, on each transport (aiohttp, the SDK): usage
and cost, round-robin over endpoints and keys, pool sizing, JSON mode, retries on real
transport errors, garbage answers, missing keys."""

from __future__ import annotations

import asyncio
import logging

import pytest
import structlog

from townsquare.api import LLMFatal
from townsquare.errors import UsageError
from townsquare.plugins.llm.openai import OpenAIConfig, OpenAIProvider, connection_budget
from townsquare.plugins.llm.llm_retry import LLMRetry, RetryConfig
from townsquare.plugins.llm.openai_transport import TRANSPORTS
from townsquare.testing.fault_server import FaultServer
from townsquare.testing.llm_chain import build_chain, build_context

LIKE = "You are Ada. Post: the mountains were lovely today\nLike or skip?"


@pytest.fixture(scope="module")
def server():
    with FaultServer() as running:
        yield running


#: the transport the test at hand runs on (set by the ``transport`` fixture)
TRANSPORT = ["aiohttp"]


@pytest.fixture(autouse=True, params=TRANSPORTS)
def transport(request):
    TRANSPORT[0] = request.param
    return request.param


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-main")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def provider_for(base_url: str, ctx=None, **config) -> OpenAIProvider:
    config.setdefault("transport", TRANSPORT[0])
    return OpenAIProvider(OpenAIConfig(base_url=base_url, model="test-model", **config), ctx or build_context())


def run(coro_fn):
    """Run ``coro_fn(chain...)`` and close the provider on the same loop."""
    async def go():
        try:
            return await coro_fn()
        finally:
            for provider in opened:
                await provider.aclose()
            opened.clear()

    return asyncio.run(go())


opened: list[OpenAIProvider] = []


def chain_for(provider, *middleware):
    opened.append(provider)
    return build_chain(provider, list(middleware))


def test_usage_cost_and_label_request(server):
    chain = chain_for(provider_for(server.base_url, price_prompt_per_1k=2.0, price_completion_per_1k=4.0, label_max_tokens=5,
                                   structured="off"))
    answer = run(lambda: chain.client.choose(LIKE, ["like", "skip"], purpose="like", default="skip"))
    assert answer in ("like", "skip")
    [record] = chain.records
    assert (record.status, record.provider, record.model, record.purpose) == ("ok", "openai", "test-model", "like")
    assert record.prompt_tokens == len(LIKE) // 4 + 1 and record.completion_tokens == 2
    assert record.cost == pytest.approx((record.prompt_tokens * 2.0 + record.completion_tokens * 4.0) / 1000)
    body = server.recent[-1]
    assert body["max_tokens"] == 5 and body["temperature"] == 0.7 and "response_format" not in body


def test_json_mode_and_temperature_override(server):
    chain = chain_for(provider_for(server.base_url, temperature=0.0, max_tokens_param="max_completion_tokens",
                                   structured="json_object"))
    value = run(lambda: chain.client.json("Reply in JSON: what now?", {"type": "object"}, purpose="plan", default=None))
    assert set(value) == {"answer"}
    body = server.recent[-1]
    assert body["response_format"] == {"type": "json_object"} and body["temperature"] == 0.0
    assert body["max_completion_tokens"] == 256 and "max_tokens" not in body


def test_round_robin_over_endpoints_and_keys(server, tmp_path, monkeypatch):
    (tmp_path / "keys.txt").write_text("# two keys\nsk-file-one\n\nsk-file-two\n")
    monkeypatch.setenv("OTHER_KEY", "sk-other")
    with FaultServer() as other:
        provider = provider_for(server.base_url, build_context(base_dir=str(tmp_path)), api_key_file="keys.txt",
                                endpoints=[{"base_url": other.base_url, "api_key_env": "OTHER_KEY"}])
        chain = chain_for(provider)
        before = dict(server.keys)

        async def six():
            for i in range(6):
                await chain.client.text(f"post number {i}")

        run(six)
        assert {k: n - before.get(k, 0) for k, n in server.keys.items() if n != before.get(k, 0)} == {"sk-file-one": 2, "sk-file-two": 2}
        assert dict(other.keys) == {"sk-other": 2}


def test_missing_key_is_one_clear_error(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(UsageError, match=f"^llm openai API key for {server.base_url}: environment variable OPENAI_API_KEY is not set$"):
        provider_for(server.base_url)
    opened.append(provider_for(server.base_url, api_key_env=""))  # a server that takes no key
    run(lambda: asyncio.sleep(0))


def test_keys_are_never_logged(server, tmp_path):
    (tmp_path / "keys.txt").write_text("sk-secret-1\nsk-secret-2\n")
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with structlog.testing.capture_logs() as logs:
            opened.append(provider_for(server.base_url, build_context(base_dir=str(tmp_path)), api_key_file="keys.txt"))
            run(lambda: asyncio.sleep(0))
    finally:
        structlog.configure(**saved)
    assert logs and "sk-secret" not in repr(logs)


def test_connection_pools_are_sized_to_the_run(server, transport):
    assert connection_budget(build_context(concurrency=16).scenario) == 16
    assert connection_budget(build_context(concurrency=16, plugins={"llm_concurrency": {"limit": 300}}).scenario) == 300
    provider = provider_for(server.base_url, build_context(concurrency=256))
    opened.append(provider)
    if transport == "sdk":
        assert len(provider._pools) == 16  # 256 connections in pools of at most 16
    else:
        assert [pool.size for pool in provider._pools] == [257]  # one pool per route
    run(lambda: asyncio.sleep(0))


def retrying(provider, attempts: int):
    retry = LLMRetry(RetryConfig(attempts=attempts), build_context())
    slept = []

    async def sleep(seconds):
        slept.append(seconds)

    retry.sleep = sleep
    return chain_for(provider, retry), slept


def test_retry_after_from_a_real_rate_limit_error():
    with FaultServer(rate_429=1.0, retry_after_s=3) as limited:
        chain, slept = retrying(provider_for(limited.base_url), attempts=3)
        with pytest.raises(LLMFatal, match=r"failed 3 times \(text for users-0001\); last: http://127\.0\.0\.1:\d+/v1/"
                                                 r"chat/completions: HTTP 429 rate_limit: Rate limit reached"):
            run(lambda: chain.client.text("hello there"))
        assert slept == [3.0, 3.0] and limited.counts["429"] == 3
        assert chain.statuses() == ["error"] * 3


def test_a_hang_times_out_and_is_retried():
    with FaultServer(rate_hang=1.0, hang_s=5) as hanging:
        chain, slept = retrying(provider_for(hanging.base_url, timeout_s=0.2), attempts=2)
        with pytest.raises(LLMFatal, match="timeout: Request timed out"):
            run(lambda: chain.client.text("hello there"))
        assert len(slept) == 1 and [r.error for r in chain.records] == ["APITimeoutError: Request timed out."] * 2


def test_a_wrong_url_is_rejected_without_retries(server):
    chain, slept = retrying(provider_for(server.base_url.removesuffix("/v1")), attempts=5)
    with pytest.raises(LLMFatal, match=r"refused the request .* not retried: http://127\.0\.0\.1:\d+/chat/completions: "
                                             r"HTTP 404 not_found"):
        run(lambda: chain.client.text("hello there"))
    assert slept == []


def test_a_decision_cut_off_at_the_token_limit_is_a_retried_fault():
    """Retried; cut off on every attempt, the answer goes to the parser (repair, then the
    decision's default): a model that talks too long is no outage, the run goes on."""
    with FaultServer(rate_truncated=1.0) as broken:
        chain, slept = retrying(provider_for(broken.base_url), attempts=3)
        assert run(lambda: chain.client.choose(LIKE, ["like", "skip"], purpose="like", default="skip")) == "skip"
        records = [(r.purpose, r.status, r.kind) for r in chain.records]
        assert records[:6] == [("like", "error", "length")] * 3 + [("like.repair", "error", "length")] * 3
        assert records[6][1] == "parse_failure" and len(records) == 7
        assert all(r.completion_tokens > 0 for r in chain.records[:6])  # paid for, and counted


@pytest.mark.parametrize("fault", ["garbage"])
def test_malformed_answers_end_in_the_default_never_outside_the_labels(fault):
    with FaultServer(**{f"rate_{fault}": 1.0}) as broken:
        chain = chain_for(provider_for(broken.base_url))

        async def decide():
            label = await chain.client.choose(LIKE, ["like", "skip"], purpose="like", default="skip")
            value = await chain.client.json("Reply in JSON.", {"type": "object"}, purpose="plan", default={"d": 1})
            return label, value

        assert run(decide) == ("skip", {"d": 1})
        assert chain.statuses() == ["ok", "ok", "parse_failure", "ok", "ok", "parse_failure"]
        assert [r.purpose for r in chain.records] == ["like", "like.repair", "like", "plan", "plan.repair", "plan"]
