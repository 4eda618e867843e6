"""Replay is a pure function of the recording, whatever order answers come back in.

The recording is made against a sampling model (an answer depends on the request and on how
often it was asked before, as a model sampling at temperature > 0 answers the same prompt
differently) that fails with seeded faults (a 500, retried; an unparsable or empty answer,
repaired, then a fallback; a decision cut off at the token limit, retried) and whose answers a seeded scheduler hands back in a shuffled order
(each answer waits a random number of event-loop turns); a decision cut off at the token limit
twice is kept, as ``llm_retry`` keeps it. The replay answers from the
recording's cache through another shuffling scheduler. Every table is equal
(``townsquare replay``'s comparison, :func:`compare_runs`), over 20 seeds of a policy made for
it and 10 of the quickstart. A policy asks the same question
three times at once each turn, so identical requests are in flight together: each must get
the answer it got when recorded, not the one that happened to come back first.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from pathlib import Path

import pytest

from helpers import ROOT, scenario_text
from townsquare.actions import Action
from townsquare.llm import LLMRequest, LLMResponse
from townsquare.llm_faults import LLMFault
from townsquare.markers import hookimpl
from townsquare.plugins.llm.llm_cache import CacheReplayProvider, cache_path
from townsquare.plugins.llm.llm_commands import compare_runs
from townsquare.launch.runner import rerun, start_run
from townsquare.scenario import validate_scenario
from townsquare.specs import PolicySpec
from townsquare.testing.fault_server import schema_instance
from townsquare.testing.llm_chain import build_chain, build_context

SEEDS = range(20)


class SamplingModel:
    """Answers from a hash of the request and of how often it was asked: equal requests get
    different answers. Labels, JSON of the request's schema, openings, or a short text."""

    name, model = "sampling", "sampling-1"

    def __init__(self) -> None:
        self.asked: dict[str, int] = {}

    def describe(self) -> dict:
        return {"name": self.name, "model": self.model, "structured": {"labels": ["guided_choice"], "json": ["json_schema"]}}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        key = request.cache_key(self.model)
        n = self.asked[key] = self.asked.get(key, -1) + 1
        h = int.from_bytes(hashlib.blake2b(f"{key}:{n}".encode(), digest_size=8).digest(), "big")
        prompt = request.messages[-1].content if request.messages else ""
        words = re.findall(r"[a-z]{5,}", prompt.lower()) or ["things"]
        text = f"{words[h % len(words)]} and {words[(h >> 7) % len(words)]}, take {h % 97}"
        if request.labels:
            text = request.labels[h % len(request.labels)]
        elif request.json_schema is not None:
            text = json.dumps(schema_instance(request.json_schema, h, text))
        elif request.answer_prefixes:
            opening = request.answer_prefixes[h % len(request.answer_prefixes)]
            text = f"{opening} {text}" if opening.endswith(":") else opening
        structured = bool(request.labels or request.json_schema is not None or request.answer_prefixes)
        return LLMResponse(text=text, prompt_tokens=len(prompt) // 4 + 1, completion_tokens=len(text) // 4 + 1, model=self.model,
                           provider=self.name, meta={"mode": "json_schema" if request.json_schema is not None else "guided_choice"}
                           if structured else {})


class Shuffled:
    """``inner``'s answers handed back after a seeded random number of event-loop turns, so
    calls in flight together finish in a shuffled order; with ``faults``, a seeded share of
    the calls fails (a 500) or comes back unparsable or empty."""

    def __init__(self, inner, seed: int, faults: bool):
        self.inner, self.seed, self.faults = inner, seed, faults
        self.rng = random.Random(seed)
        self.name, self.model = inner.name, inner.model
        self.seen: dict[str, int] = {}
        self.turns: list[int] = []

    def describe(self) -> dict:
        return self.inner.describe()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        key = request.cache_key(self.model)
        n = self.seen[key] = self.seen.get(key, -1) + 1
        response = await self.inner.complete(request)
        turns = self.rng.randrange(60)
        self.turns.append(turns)
        for _ in range(turns):
            await asyncio.sleep(0)
        if self.faults:
            draw = int.from_bytes(hashlib.blake2b(f"{self.seed}:{key}:{n}".encode(), digest_size=4).digest(), "big") / 2**32
            structured = bool(request.labels or request.json_schema is not None)
            if draw < 0.05 and n == 0:  # a retry is never refused again: two attempts always get an answer
                raise LLMFault("server", "injected HTTP 500", status=500)
            if 0.05 <= draw < 0.2 and structured:  # cut off at the token limit: retried, kept when it happens twice
                response.text, response.meta = response.text[: len(response.text) // 2] + "%", {**response.meta, "finish_reason": "length"}
            elif 0.2 <= draw < 0.3:
                response.text = "%% ## garbage ## %%" if structured or request.answer_prefixes else ""
        return response

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


class Chorus:
    """Each turn: the same question three times at once, a mood label, then a post per answer."""

    def __init__(self, config, ctx):
        pass

    async def step(self, ctx) -> list[Action]:
        llm = ctx.require_llm("chorus")
        me = ctx.agent.id
        question = f"You are {ctx.agent.persona.name}. In round {ctx.round}, say what is on your mind about mountains and music."
        answers = await asyncio.gather(*(llm.text(question, purpose="say") for _ in range(3)))
        mood = await llm.choose(f"You are {ctx.agent.persona.name}. Happy or sad?", ["happy", "sad"], purpose="mood", default="happy")
        feed = await ctx.home_timeline(3)
        likes = await asyncio.gather(*(llm.choose(f"Post: {p.text}\nLike or skip?", ["like", "skip"], purpose="like", default="skip")
                                       for p in feed))
        return ([Action(me, "post", text=f"{mood}: {a}") for a in answers if a]
                + [Action(me, "like", target_post=p.id) for p, liked in zip(feed, likes) if liked == "like"])

    def get_state(self) -> dict:
        return {}

    def set_state(self, state: dict) -> None:
        pass


class ChorusPlugin:
    @hookimpl
    def townsquare_register_policies(self):
        return [PolicySpec("chorus", Chorus, description="test: identical requests in flight together")]


CHORUS = scenario_text(rounds=4, count=4, policy="chorus", llm=True,
                       extra='[recommender]\nname = "random"\n[plugins.llm_retry]\nbase_delay_s = 0\nattempts = 2\n')

QUICKSTART = ROOT / "examples" / "quickstart.toml"
#: the quickstart cut to 5 rounds of half a day (plans, posts with knowledge, decisions and a
#: follow reflection's summaries, asked all at once)
QUICKSTART_SET = ['llm={ name = "oracle" }', "rounds=5", "clock.minutes_per_round=720", "plugins.llm_retry.base_delay_s=0",
                  "plugins.llm_retry.attempts=2"]


def record_and_replay(tmp_path: Path, scenario, overrides: list[str], seed: int, plugins) -> tuple[list[str], Shuffled]:
    recorder = Shuffled(SamplingModel(), seed, faults=True)
    _, summary = start_run(scenario, overrides=overrides, out=tmp_path / "recorded", plugins=plugins, llm_provider=recorder)
    assert summary.stopped is None, summary.stopped
    manifest = json.loads((tmp_path / "recorded" / "manifest.json").read_text())
    replayer = Shuffled(CacheReplayProvider(cache_path(tmp_path / "recorded"), validate_scenario(manifest["scenario"], "manifest")),
                        seed + 1000, faults=False)
    rerun(tmp_path / "recorded", tmp_path / "replayed", plugins=plugins, llm_provider=replayer)
    return compare_runs(tmp_path / "recorded" / "events.sqlite", tmp_path / "replayed" / "events.sqlite"), recorder


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_identical_requests_in_flight_together_replay_identically(tmp_path, make_plugins, seed):
    path = tmp_path / "chorus.toml"
    path.write_text(CHORUS)
    differences, recorder = record_and_replay(tmp_path, path, [], seed,
                                              make_plugins(ChorusPlugin(), enable=["townsquare.testing.scripted"]))
    assert differences == []
    assert len(set(recorder.turns)) > 10  # the answers really came back shuffled


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS[:10])
def test_the_quickstart_replays_identically_whatever_order_answers_come_back_in(tmp_path, make_plugins, seed):
    differences, _ = record_and_replay(tmp_path, QUICKSTART, QUICKSTART_SET, seed,
                                       make_plugins(enable=["townsquare.testing.oracle"]))
    assert differences == []


def test_a_kept_cut_off_answer_replays_as_it_was_kept(tmp_path):
    """A decision cut off at the token limit on every attempt is kept once the retries are
    spent (its parser then repairs or falls back). Replayed from the cache, that answer is the
    recorded one: it is not a fault again, retried into the next recorded answer."""
    from townsquare.plugins.llm.llm_cache import CacheConfig, LLMCache
    from townsquare.plugins.llm.llm_retry import LLMRetry, RetryConfig

    class CutOff:
        name, model = "cut", "cut-1"

        async def complete(self, request: LLMRequest) -> LLMResponse:
            return LLMResponse(text='{"answer": "hal', meta={"finish_reason": "length", "mode": "json_schema"}, model=self.model)

    ctx = build_context(str(tmp_path), llm={"name": "scripted"})
    recording = build_chain(CutOff(), [LLMCache(CacheConfig(), ctx), LLMRetry(RetryConfig(attempts=2, base_delay_s=0), ctx)])
    recorded = asyncio.run(recording.client.json("Say it.", {"type": "object"}, purpose="say", default={"answer": "none"}))
    asyncio.run(recording.middleware[0].aclose())
    assert recorded == {"answer": "none"}  # kept twice (request and repair), unparsable: the default
    # each attempt's error row is the record, the kept answer's included; then the fallback
    assert recording.statuses() == ["error", "error", "error", "error", "parse_failure"]

    replay = CacheReplayProvider(tmp_path, ctx.scenario)
    replaying = build_chain(replay, [LLMRetry(RetryConfig(attempts=2, base_delay_s=0), ctx)])
    again = asyncio.run(replaying.client.json("Say it.", {"type": "object"}, purpose="say", default={"answer": "none"}))
    assert again == recorded
    assert replaying.statuses() == ["parse_failure"]  # as the recording reads once its failed attempts are left out

    journal = build_chain(CutOff(), [LLMCache(CacheConfig(), ctx), LLMRetry(RetryConfig(attempts=2, base_delay_s=0), ctx)])
    journal.middleware[0].set_state({"round": 0})  # a resumed round: the journal answers, nothing is asked
    assert asyncio.run(journal.client.json("Say it.", {"type": "object"}, purpose="say", default={"answer": "none"})) == recorded
    asyncio.run(journal.middleware[0].aclose())
    assert journal.statuses() == ["parse_failure"]


def test_calls_of_ids_that_are_no_agent_keep_their_own_order():
    """Persona enrichment asks for ``persona:POP:K`` ids, none an agent's: each numbers its calls
    from 0, so their rows are grouped by id, not interleaved as they happened to come back."""
    from townsquare.llm import Issue, LLMCallRecord
    from townsquare.llm_journal import ROW, LLMJournal, kept_row

    def call(agent: str, issue: int) -> LLMCallRecord:
        return LLMCallRecord(round=-1, agent_id=agent, purpose="enrich", provider="p", model="m", status="ok", issue=Issue(issue, 0))

    arrived = [call("persona:users:1", 0), call("persona:users:0", 0), call("persona:users:0", 1), call("persona:users:1", 1)]
    for order in (arrived, arrived[::-1], arrived[1::2] + arrived[::2]):
        journal = LLMJournal()
        for record in order:
            journal.record(record)
        assert [row[1] for row in journal.take()] == ["persona:users:0", "persona:users:0", "persona:users:1", "persona:users:1"]
    # an agent's rows go by its order, whatever its id
    assert [row[ROW + 1] for row in sorted([kept_row(call("b", 0), 2, 0), kept_row(call("z", 5), 1, 1)])] == ["z", "b"]
