"""Every kind of fault the test server injects, through the real ``openai`` client and the
kernel's classification: each ends as the fault kind :mod:`townsquare.llm_faults`
promises, or as a parse failure for answers that are no decision or no text, never as an
exception the retry middleware does not know."""

from __future__ import annotations

import asyncio

import pytest

from townsquare.llm_faults import FATAL, RETRYABLE, LLMFault
from townsquare.plugins.llm.openai import OpenAIConfig, OpenAIProvider
from townsquare.plugins.llm.openai_transport import TRANSPORTS
from townsquare.testing.fault_server import ANSWER_FAULTS, FAULTS, FATAL_FAULTS, TRANSPORT_FAULTS, FaultConfig, FaultServer
from townsquare.testing.llm_chain import build_chain, build_context

LIKE = "You are Ada. Post: the mountains were lovely today\nLike or skip?"

#: the fault kind a chat call ends in, for each injected fault
EXPECTED = {
    "hang": "timeout", "slow_headers": "timeout", "cut": "connection", "reset": "connection",
    "429": "rate_limit", "429_bare": "rate_limit", "500": "server", "502_html": "server", "200_html": "bad_body",
    "body_truncated": "bad_body", "empty_choices": "empty", "null_content": "null_content", "truncated": "length",
    "401": "auth", "403": "auth", "404": "not_found", "400_context": "too_long",
}


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


def call(server: FaultServer, coro_fn, timeout_s: float = 0.5, transport: str = "aiohttp"):
    async def go():
        provider = OpenAIProvider(OpenAIConfig(base_url=server.base_url, model="m", api_key_env="", timeout_s=timeout_s,
                                               transport=transport), build_context())
        chain = build_chain(provider)
        try:
            try:
                return await coro_fn(chain.client), chain.records
            except LLMFault as fault:
                return fault, chain.records
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_every_fault_kind_is_listed_once():
    assert len(set(FAULTS)) == len(FAULTS) == len(TRANSPORT_FAULTS) + len(ANSWER_FAULTS) + len(FATAL_FAULTS)
    assert set(EXPECTED) | {"garbage", "binary"} == set(FAULTS)
    assert {EXPECTED[k] for k in FATAL_FAULTS} <= FATAL and {EXPECTED[k] for k in TRANSPORT_FAULTS} <= RETRYABLE


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_each_fault_is_classified(fault, transport):
    with FaultServer(**{f"rate_{fault}": 1.0}, hang_s=5, slow_s=2, retry_after_s=0) as server:
        outcome, records = call(server, lambda llm: llm.choose(LIKE, ["like", "skip"], purpose="like", default="skip"),
                                transport=transport)
        assert server.counts[fault] == 1
    assert isinstance(outcome, LLMFault), outcome
    assert outcome.kind == EXPECTED[fault]
    assert [(r.status, r.kind) for r in records] == [("error", EXPECTED[fault])]
    if fault in FATAL_FAULTS:
        assert outcome.status == int(fault[:3]) and outcome.endpoint.endswith("/v1/chat/completions")


def test_slow_headers_within_the_timeout_are_just_slow(transport):
    with FaultServer(rate_slow_headers=1.0, slow_s=0.05) as server:
        answer, records = call(server, lambda llm: llm.choose(LIKE, ["like", "skip"], purpose="like", default="skip"),
                               timeout_s=30, transport=transport)
    assert answer in ("like", "skip") and [r.status for r in records] == ["ok"]


@pytest.mark.parametrize("fault,kind", [("binary", "binary"), ("garbage", None)])
def test_text_that_is_no_text_never_becomes_content(fault, kind, transport):
    with FaultServer(**{f"rate_{fault}": 1.0}) as server:
        answer, records = call(server, lambda llm: llm.text("Write a post about mountains", purpose="post"), timeout_s=30,
                               transport=transport)
    if kind is None:  # gibberish is still text: only a decision can tell it is wrong
        assert answer and [r.status for r in records] == ["ok"]
    else:
        assert answer == ""
        assert [(r.purpose, r.status, r.kind) for r in records] == [
            ("post", "ok", None), ("post.repair", "ok", None), ("post", "parse_failure", kind)]


def test_a_cut_off_post_is_still_a_post(transport):
    # finish_reason "length" on free text is a long answer, not a fault
    with FaultServer(rate_truncated=1.0) as server:
        answer, records = call(server, lambda llm: llm.text("Write a post about mountains", purpose="post"), timeout_s=30,
                               transport=transport)
    assert answer and [r.status for r in records] == ["ok"]


def test_embedding_requests_draw_transport_faults():
    config = FaultConfig.every_kind(1.0, kinds=("500",))
    assert config.rate_500 == 1.0

    async def embed(base_url):
        import openai

        client = openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)
        try:
            await client.embeddings.create(model="e", input=["cats"], encoding_format="float")
        except openai.InternalServerError:
            return "500"
        finally:
            await client.close()

    with FaultServer(config) as server:
        assert asyncio.run(embed(server.base_url)) == "500"
        assert server.counts["embeddings.500"] == 1 and server.counts["requests"] == 0
