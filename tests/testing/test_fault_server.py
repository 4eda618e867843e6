"""The fault-injecting test server: local only, seeded faults, deterministic answers,
embeddings, 256 concurrent requests at 100 ms latency, and its command line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request

import openai
import pytest

from townsquare.plugins.llm.openai import OpenAIConfig, OpenAIProvider
from townsquare.plugins.llm.openai_transport import TRANSPORTS
from townsquare.testing.fault_server import FaultServer
from townsquare.testing.llm_chain import build_context


def test_binds_to_localhost_only():
    with pytest.raises(ValueError, match="refusing to bind to '0.0.0.0'"):
        FaultServer(host="0.0.0.0")
    with pytest.raises(ValueError, match="sum to at most 1"):
        FaultServer(rate_429=0.7, rate_500=0.7)


async def _chat(base_url: str, prompts: list[str], **extra) -> list[str]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)
    answers = []
    try:
        for prompt in prompts:
            try:
                response = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}], **extra)
                answers.append(response.choices[0].message.content)
            except openai.APIStatusError as exc:
                answers.append(str(exc.status_code))
    finally:
        await client.close()
    return answers


def test_faults_are_seeded_per_request_and_answers_deterministic():
    prompts = [f"Post {i}: walks in the park. Like or skip?" for i in range(40)] * 2
    config = dict(seed=3, rate_429=0.2, rate_500=0.2, rate_garbage=0.2, retry_after_s=0)
    with FaultServer(**config) as a, FaultServer(**config) as b:
        first, second = asyncio.run(_chat(a.base_url, prompts)), asyncio.run(_chat(b.base_url, prompts))
        assert first == second and a.counts == b.counts
        assert a.counts["requests"] == 80 and a.counts["ok"] + a.counts["429"] + a.counts["500"] + a.counts["garbage"] == 80
        assert min(a.counts["429"], a.counts["500"], a.counts["garbage"]) > 5
    assert {answer for answer in first if answer in ("like", "skip")} == {"like", "skip"}
    assert first[:40] != first[40:]  # a repeated request draws again
    with FaultServer() as plain:
        text = asyncio.run(_chat(plain.base_url, ["Write about mountains", "Answer with exactly one of: follow, ignore."]))
        assert text[0] == "a short post about mountains" and text[1] in ("follow", "ignore")


def test_a_reply_is_made_when_its_request_comes_and_goes_out_latency_later():
    # Made at once and due latency_ms after the request's arrival, answers and HTTP faults
    # alike: the time the server takes to make a reply is not added to its latency.
    server = FaultServer(latency_ms=250, rate_500=0.5, seed=1)

    async def replies():
        made = []
        for i in range(12):
            request = {"model": "m", "messages": [{"role": "user", "content": f"Post {i}. Like or skip?"}]}
            made.append(await server._answer_request("/v1/chat/completions", request, json.dumps(request).encode(), 7.0))
        return made

    made = asyncio.run(replies())
    assert {reply.status for reply in made} == {200, 500}
    assert all(reply.due == pytest.approx(7.25) for reply in made)

    async def timed(base_url):
        loop = asyncio.get_running_loop()
        started = loop.time()
        await _chat(base_url, ["Like or skip?"])
        return loop.time() - started

    with FaultServer(latency_ms=200) as live:
        assert asyncio.run(timed(live.base_url)) >= 0.2  # a lower bound: a busy machine only adds to it


def test_embeddings_are_deterministic_unit_vectors():
    async def embed(base_url):
        client = openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)
        try:
            as_floats = await client.embeddings.create(model="e", input=["cats", "dogs", "cats"], encoding_format="float")
            as_base64 = await client.embeddings.create(model="e", input="cats", dimensions=16)  # the SDK asks for base64
            return [d.embedding for d in as_floats.data], as_base64.data[0].embedding
        finally:
            await client.close()

    with FaultServer() as server:
        vectors, short = asyncio.run(embed(server.base_url))
    assert vectors[0] == vectors[2] != vectors[1] and len(vectors[0]) == 64 and len(short) == 16
    assert sum(v * v for v in vectors[0]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sustains_256_concurrent_requests(transport):
    # The server holds every request until 256 are open at once (a probe, not a clock): the
    # client's pool really sends 256 together, and every one is answered.
    with FaultServer(hold_until=256, hang_s=120) as server:
        provider = OpenAIProvider(OpenAIConfig(base_url=server.base_url, api_key_env="", transport=transport),
                                  build_context(concurrency=256))

        async def burst():
            from townsquare.llm import LLMRequest, Message

            requests = [LLMRequest(messages=(Message("user", f"post {i}"),)) for i in range(256)]
            try:
                return await asyncio.gather(*(provider.complete(r) for r in requests))
            finally:
                await provider.aclose()

        answers = asyncio.run(burst())
        assert server.peak_in_flight == 256
        assert server.counts["ok"] == 256 and len(answers) == 256


def test_runs_as_a_process_and_reports_counts():
    process = subprocess.Popen([sys.executable, "-m", "townsquare.testing.fault_server", "--port", "0", "--rate-500", "1"],
                               stdout=subprocess.PIPE, text=True)
    try:
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        assert asyncio.run(_chat(base_url, ["hi"])) == ["500"]
        with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats") as response:
            assert json.load(response) == {"requests": 1, "500": 1}
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
