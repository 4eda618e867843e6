"""Each LLM middleware alone: cache (journal, occurrence counters, replay), budget, retry,
concurrency limit; and their order in a resolved scenario."""

from __future__ import annotations

import asyncio
import email.utils
import sqlite3
from types import SimpleNamespace

import pytest

from townsquare.api import LLMFatal
from townsquare.errors import RunStopped
from townsquare.llm import LLMRequest, LLMResponse, Message
from townsquare.plugins.llm.llm_budget import BudgetConfig, LLMBudget
from townsquare.plugins.llm.llm_cache import CACHE_FILE, CacheConfig, LLMCache, ReplayMiss, call_position
from townsquare.plugins.llm.llm_concurrency import ConcurrencyConfig, LLMConcurrency
from townsquare.plugins.llm.llm_retry import LLMRetry, RetryConfig, classify
from townsquare.testing.llm_chain import build_chain, build_context


class Sampler:
    """Answers '<prompt>#<call number>': a new sample on every call, like a model at temperature > 0."""

    name, model = "sampler", "sampler-1"

    def __init__(self, delay: float = 0.0, price: float | None = None):
        self.calls = 0
        self.delay = delay
        self.active = self.peak = 0
        if price is not None:
            self.cost = lambda response: price

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            return LLMResponse(text=f"{request.messages[-1].content}#{self.calls}", prompt_tokens=10, completion_tokens=2,
                               latency_ms=5.0 + self.calls)
        finally:
            self.active -= 1


def ask(chain, *prompts: str) -> list[str]:
    async def go():
        return [await chain.client.text(p) for p in prompts]

    return asyncio.run(go())


def cache_chain(tmp_path, provider, **config):
    return build_chain(provider, [LLMCache(CacheConfig(**config), build_context(str(tmp_path)))])


# --------------------------------------------------------------------------- cache


def test_cache_counts_identical_prompts_and_a_resumed_round_replays_from_the_journal(tmp_path):
    first = Sampler()
    chain = cache_chain(tmp_path, first)
    assert ask(chain, "p", "p", "q") == ["p#1", "p#2", "q#3"]  # identical prompts: separate samples
    state = chain.middleware[0].get_state()  # the checkpoint of round 0
    chain.round = 1
    assert ask(chain, "p", "r") == ["p#4", "r#5"]  # round 1, then the process is killed
    asyncio.run(chain.middleware[0].aclose())

    resumed_provider = Sampler()
    resumed = cache_chain(tmp_path, resumed_provider)
    resumed.middleware[0].set_state(state)
    resumed.round = 1
    assert ask(resumed, "p", "r", "p") == ["p#4", "r#5", "p#1"]
    assert resumed_provider.calls == 1  # only the new third call reached the provider
    hits = resumed.records[:2]
    # journal hits are recorded as the paid calls they were: their rows went with the discarded round
    assert [(r.status, r.prompt_tokens, r.completion_tokens, r.latency_ms) for r in hits] == [("ok", 10, 2, 9.0), ("ok", 10, 2, 10.0)]


def test_cache_restore_forgets_commits_of_a_checkpoint_that_was_never_written(tmp_path):
    chain = cache_chain(tmp_path, Sampler())
    ask(chain, "p")
    state = chain.middleware[0].get_state()
    chain.round = 1
    ask(chain, "p")
    chain.middleware[0].get_state()  # committed, but say the checkpoint file never got written
    asyncio.run(chain.middleware[0].aclose())
    resumed = cache_chain(tmp_path, Sampler())
    resumed.middleware[0].set_state(state)
    resumed.round = 1
    assert ask(resumed, "p") == ["p#2"]  # round 1's answer again, not a fresh call


def test_replay_from_answers_as_cached_and_fails_loudly_on_a_miss(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    record = cache_chain(tmp_path / "a", Sampler())
    ask(record, "p", "p", "q")
    asyncio.run(record.middleware[0].aclose())
    provider = Sampler()
    replay = cache_chain(tmp_path / "b", provider, replay_from=str(tmp_path / "a"))
    assert ask(replay, "p", "p", "q") == ["p#1", "p#2", "q#3"]
    assert provider.calls == 0
    assert {(r.status, r.cost) for r in replay.records} == {("cached", 0.0)}
    with pytest.raises(ReplayMiss, match=r"^cache miss in replay: text for users-0001 \(round 0, the agent's call 4 of the round; "):
        ask(replay, "never asked")
    # an answer belongs to its place: the same questions asked in another order are another run
    reordered = cache_chain(tmp_path / "b", Sampler(), replay_from=str(tmp_path / "a"))
    with pytest.raises(ReplayMiss, match=r"\(round 0, the agent's call 2 of the round; "):
        ask(reordered, "p", "q", "p")
    assert not (tmp_path / "b" / CACHE_FILE).exists()


def test_cache_disabled_passes_through(tmp_path):
    provider = Sampler()
    chain = cache_chain(tmp_path, provider, enabled=False)
    assert ask(chain, "p", "p") == ["p#1", "p#2"]
    assert not (tmp_path / CACHE_FILE).exists()


def test_cache_commits_answers_in_groups(tmp_path, monkeypatch):
    import time

    from townsquare.plugins.llm import llm_cache

    def stored():
        return sqlite3.connect(tmp_path / CACHE_FILE).execute("SELECT agent, n, round, committed, text FROM responses").fetchall()

    monkeypatch.setattr(llm_cache, "GROUP_ROWS", 2)
    monkeypatch.setattr(llm_cache, "GROUP_SECONDS", 0.2)
    chain = cache_chain(tmp_path, Sampler())
    store = chain.middleware[0].store
    ask(chain, "p")
    assert stored() == [] and store._writing is None  # the group is still open
    ask(chain, "q")
    # a full group goes to the writer thread, which commits it: readable by another process
    # before any checkpoint, the call did not wait for it
    assert store._writing is not None
    store.wait_written()
    # each answer at its place: round 0, the agent's calls 0 and 1 (:func:`call_position`)
    assert stored() == [("users-0001", call_position(0, (0, 0)), 0, 0, "p#1"), ("users-0001", call_position(0, (1, 0)), 0, 0, "q#2")]
    ask(chain, "r")
    time.sleep(0.25)
    ask(chain, "s")  # the group window has passed: committed
    store.wait_written()
    assert [row[4] for row in stored()] == ["p#1", "q#2", "r#3", "s#4"]
    # the rowids the answers were given are the rows' (a checkpoint commits them by rowid)
    assert sqlite3.connect(tmp_path / CACHE_FILE).execute("SELECT rowid, text FROM responses").fetchall() == [
        (1, "p#1"), (2, "q#2"), (3, "r#3"), (4, "s#4")]


def test_cache_writer_errors_surface_and_a_reopened_journal_numbers_on(tmp_path, monkeypatch):
    from townsquare.plugins.llm import llm_cache

    monkeypatch.setattr(llm_cache, "GROUP_ROWS", 1)
    chain = cache_chain(tmp_path, Sampler())
    ask(chain, "p", "q")
    asyncio.run(chain.middleware[0].aclose())
    again = cache_chain(tmp_path, Sampler())
    store = again.middleware[0].store
    assert store._next_rowid == 3
    ask(again, "r")
    store.wait_written()
    assert sqlite3.connect(tmp_path / CACHE_FILE).execute("SELECT rowid, text FROM responses ORDER BY rowid").fetchall()[-1][0] == 3

    def broken(rows):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_write", broken)
    ask(again, "s")  # handed to the writer, which fails
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        store.wait_written()


def test_a_stop_waits_for_calls_in_flight_to_land_in_the_cache(tmp_path):
    class StopOrSlow(Sampler):
        async def complete(self, request):
            if request.messages[-1].content == "stop":
                raise RunStopped("budget")
            await asyncio.sleep(0.05)
            return await super().complete(request)

    chain = cache_chain(tmp_path, StopOrSlow())
    seen = {}

    async def stopper():
        await asyncio.sleep(0.01)
        try:
            await chain.client.text("stop")
        except RunStopped:
            seen["rows"] = sqlite3.connect(tmp_path / CACHE_FILE).execute("SELECT text FROM responses").fetchall()

    async def go():
        await asyncio.gather(chain.client.text("slow"), stopper())

    asyncio.run(go())
    assert seen["rows"] == [("slow#1",)]


# --------------------------------------------------------------------------- budget


def budget_chain(tmp_path, provider, cache: bool = False, **limits):
    ctx = build_context(str(tmp_path))
    links = ([LLMCache(CacheConfig(), ctx)] if cache else []) + [LLMBudget(BudgetConfig(**limits), ctx)]
    return build_chain(provider, links)


def test_budget_stops_at_max_calls_and_says_what_was_spent(tmp_path):
    chain = budget_chain(tmp_path, Sampler(price=0.25), max_calls=3)
    ask(chain, "a", "b", "c")
    with pytest.raises(RunStopped) as stop:
        ask(chain, "d")
    assert stop.value.reason == (f"LLM budget reached: 3 calls (limit 3), 36 tokens, $0.75; raise it with: "
                                 f"townsquare resume {tmp_path} --set plugins.llm_budget.max_calls=6")
    budget = chain.middleware[0]
    assert budget.get_state() == {"calls": 3, "tokens": 36, "cost": 0.75}
    other = LLMBudget(BudgetConfig(max_calls=5), build_context(str(tmp_path)))
    other.set_state(budget.get_state())
    assert other.get_state() == budget.get_state()


@pytest.mark.parametrize("limit,key", [({"max_tokens": 30}, "max_tokens=60"), ({"max_cost": 0.5}, "max_cost=1.0")])
def test_budget_stops_at_tokens_or_cost(tmp_path, limit, key):
    chain = budget_chain(tmp_path, Sampler(price=0.25), **limit)
    with pytest.raises(RunStopped, match=f"--set plugins.llm_budget.{key}$"):
        ask(chain, *"abcdef")
    assert len(chain.records) in (2, 3)


def test_budget_reserves_calls_in_flight(tmp_path):
    provider = Sampler(delay=0.01)
    chain = budget_chain(tmp_path, provider, max_calls=2)

    async def go():
        return await asyncio.gather(*(chain.client.text(str(i)) for i in range(6)), return_exceptions=True)

    results = asyncio.run(go())
    assert provider.calls == 2
    assert sum(isinstance(r, RunStopped) for r in results) == 4


def test_budget_counts_journal_hits_but_not_replayed_answers(tmp_path):
    chain = budget_chain(tmp_path, Sampler(), cache=True, max_calls=10)
    state = chain.middleware[0].get_state()
    ask(chain, "a", "b")
    asyncio.run(chain.middleware[0].aclose())
    provider = Sampler()
    resumed = budget_chain(tmp_path, provider, cache=True, max_calls=10)
    resumed.middleware[0].set_state(state)
    ask(resumed, "a", "b")  # the discarded round again: paid once, counted once
    assert provider.calls == 0 and resumed.middleware[1].calls == 2
    budget = LLMBudget(BudgetConfig(max_calls=1), build_context(str(tmp_path)))
    chain = build_chain(Sampler(), [budget])
    chain.accounting.account(LLMRequest(messages=(Message("user", "x"),)), LLMResponse(text="y", cached=True))
    assert budget.calls == 0


# --------------------------------------------------------------------------- retry


class HTTPError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None):
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.response = SimpleNamespace(status_code=status, headers=headers or {})


class Flaky(Sampler):
    """Raises the given errors in turn, then answers."""

    def __init__(self, *errors: BaseException):
        super().__init__()
        self.errors = list(errors)

    async def complete(self, request):
        if self.errors:
            self.calls += 1
            raise self.errors.pop(0)
        return await super().complete(request)


def retry_chain(provider, seed: int = 0, **config):
    retry = LLMRetry(RetryConfig(**config), build_context(seed=seed))
    slept: list[float] = []

    async def sleep(seconds):
        slept.append(seconds)

    retry.sleep = sleep
    retry.clock = lambda: 1_700_000_000.0
    return build_chain(provider, [retry]), slept


@pytest.mark.parametrize("headers,wait", [
    ({"retry-after": "2"}, 2.0),
    ({"retry-after-ms": "1500"}, 1.5),
    ({"retry-after": email.utils.formatdate(1_700_000_007.0, usegmt=True)}, 7.0),
    ({"retry-after": "900"}, 120.0),  # capped at max_retry_after_s
])
def test_retry_honours_retry_after(headers, wait):
    chain, slept = retry_chain(Flaky(HTTPError(429, headers)))
    assert ask(chain, "p") == ["p#2"]
    assert slept == [wait]
    assert chain.statuses() == ["error", "ok"]


def test_retry_backs_off_with_seeded_full_jitter_and_caps_attempts():
    chain, slept = retry_chain(Flaky(*[HTTPError(500) for _ in range(9)]), attempts=5, base_delay_s=1.0, max_delay_s=3.0)
    with pytest.raises(LLMFatal) as stop:
        ask(chain, "p")
    assert isinstance(stop.value, RunStopped)
    assert stop.value.reason == "LLM call failed 5 times (text for users-0001); last: LLM provider 'sampler': HTTP 500 server: HTTP 500"
    assert chain.statuses() == ["error"] * 5  # every failed attempt has its row
    assert len(slept) == 4 and all(0 <= s <= cap for s, cap in zip(slept, [1, 2, 3, 3]))
    same_seed, again = retry_chain(Flaky(*[HTTPError(500) for _ in range(9)]), attempts=5, base_delay_s=1.0, max_delay_s=3.0)
    with pytest.raises(LLMFatal):
        ask(same_seed, "p")
    assert again == slept  # the jitter comes from the run's seed


@pytest.mark.parametrize("error", [HTTPError(408), HTTPError(503), TimeoutError(), ConnectionResetError()])
def test_retry_retries_transient_errors(error):
    chain, slept = retry_chain(Flaky(error))
    assert ask(chain, "p") == ["p#2"] and len(slept) == 1


def test_retry_does_not_retry_a_rejected_request_or_a_bug():
    chain, slept = retry_chain(Flaky(HTTPError(400)))
    with pytest.raises(LLMFatal, match=r"^LLM endpoint refused the request \(text for users-0001\), not retried: "
                                             r"LLM provider 'sampler': HTTP 400 rejected: HTTP 400$"):
        ask(chain, "p")
    assert slept == [] and chain.statuses() == ["error"]
    chain, slept = retry_chain(Flaky(KeyError("a bug")))
    with pytest.raises(KeyError, match="a bug"):
        ask(chain, "p")
    assert slept == []
    assert classify(RunStopped("budget")) is None


def test_an_unknown_provider_exception_is_retried_then_stops_cleanly():
    class SDKHiccup(Exception):  # raised by a library we have never heard of
        pass

    chain, slept = retry_chain(Flaky(SDKHiccup("odd"), SDKHiccup("odd again")))
    assert ask(chain, "p") == ["p#3"] and len(slept) == 2
    assert [(r.status, r.kind) for r in chain.records] == [("error", "unknown"), ("error", "unknown"), ("ok", None)]
    chain, _ = retry_chain(Flaky(*[SDKHiccup("down") for _ in range(3)]), attempts=3)
    with pytest.raises(LLMFatal, match=r"failed 3 times .* unknown: down$"):
        ask(chain, "p")


# --------------------------------------------------------------------------- concurrency


def test_concurrency_never_exceeds_the_limit():
    provider = Sampler(delay=0.005)
    limit = LLMConcurrency(ConcurrencyConfig(limit=5), build_context())
    chain = build_chain(provider, [limit])

    async def go():
        await asyncio.gather(*(chain.client.text(str(i)) for i in range(40)))

    asyncio.run(go())
    assert provider.peak == limit.peak == 5
    assert LLMConcurrency(ConcurrencyConfig(), build_context(concurrency=7)).limit == 7


def test_limiter_serves_waiters_in_order_and_a_cancelled_waiter_loses_no_place():
    from townsquare.plugins.llm.limiter import Limiter

    async def go():
        limiter, order = Limiter(2), []

        async def hold(name: str, seconds: float):
            async with limiter:
                order.append(name)
                await asyncio.sleep(seconds)

        first = [asyncio.ensure_future(hold(n, 0.02)) for n in ("a", "b")]
        await asyncio.sleep(0)
        assert limiter.free == 0
        waiting = [asyncio.ensure_future(hold(n, 0.0)) for n in ("c", "d", "e")]
        await asyncio.sleep(0)
        waiting[1].cancel()  # "d" gives up before its turn
        await asyncio.gather(*first, waiting[0], waiting[2])
        assert order == ["a", "b", "c", "e"] and limiter.free == 2

        # a waiter handed a place and cancelled before it ran passes the place on
        async with limiter:
            async with limiter:
                late = [asyncio.ensure_future(hold(n, 0.0)) for n in ("f", "g")]
                await asyncio.sleep(0)
            late[0].cancel()  # "f" was handed the place released just now, and never runs
        await asyncio.gather(late[1])
        assert late[0].cancelled() and order[-1] == "g" and limiter.free == 2

    asyncio.run(go())


# --------------------------------------------------------------------------- the chain


def test_middleware_order_in_a_resolved_scenario():
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.scenario import resolve

    plugins = make_plugin_manager(enable=["townsquare.testing.scripted"])
    data = {"rounds": 1, "llm": {"name": "scripted"},
            "populations": [{"name": "u", "count": 1, "personas": {"name": "inline", "items": [{"name": "A"}]}}]}
    scenario = resolve(data, "<test>", ".", plugins)
    assert [c.spec.name for c in scenario.llm_middleware] == ["llm_cache", "llm_budget", "llm_retry", "llm_concurrency"]


def test_a_decision_cut_off_on_every_attempt_falls_to_its_parser_not_a_stop():
    """A small model that runs past max_tokens each time: after the attempts, the cut-off
    answer reaches the JSON parser (repair, then the safe default), and the run goes on."""
    class Rambler:
        name, model = "rambler", "rambler"

        async def complete(self, request):
            return LLMResponse(text='{"sentence": "on and on and on', meta={"finish_reason": "length"})

    chain, slept = retry_chain(Rambler(), attempts=3)
    answer = asyncio.run(chain.client.json("Compress this.", {"type": "object"}, purpose="sensory", default={"sentence": ""}))
    assert answer == {"sentence": ""}
    assert len(slept) == 4  # 2 retries for the question, 2 for its repair
    assert chain.statuses() == ["error"] * 6 + ["parse_failure"]  # every cut-off attempt has its row
