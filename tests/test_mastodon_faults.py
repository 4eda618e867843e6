"""The Mastodon platform under faults, over real HTTP to mastodon-mock (its fault plane):
5xx and timeouts retried without duplicates, 429 waiting for its reset time or refused
when the reset is too far, per-account caps, and an outage that stops the run."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest

pytest.importorskip("mastodon")
pytest.importorskip("mastodon_mock")

from helpers import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "support"))
from mastodon_server import make_platform as make, mock, register_agents as register, server  # noqa: E402,F401

from townsquare.actions import Action  # noqa: E402

NOW = "2024-01-01T08:00:00"


def test_5xx_and_timeouts_are_retried_without_duplicates(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path, request_timeout=0.5)
        await register(platform, ("a-1",))
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "status", "status": 500,
                    "body": {"error": "(sqlite3.OperationalError) database is locked"}}, "count": 2})
        first = await platform.apply_batch([Action("a-1", "post", text="after two 500s")], 0, NOW)
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "latency", "delay_ms": 1500}, "count": 1})
        second = await platform.apply_batch([Action("a-1", "post", text="after a timeout")], 1, NOW)
        retries = platform.transport.stats["retries"]
        await platform.aclose()
        return first, second, retries

    first, second, retries = asyncio.run(go())
    assert first[0].ok and second[0].ok and retries >= 3
    time.sleep(1.3)  # the timed-out request is still being served
    assert mock.stats()["status_count"] == 2  # the Idempotency-Key made the retry return the same status


def test_429_waits_for_the_reset_time(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path)
        await register(platform, ("a-1",))
        reset = int(time.time()) + 2
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "ratelimit", "headers": {
            "X-RateLimit-Reset": str(reset), "X-RateLimit-Remaining": "0", "Retry-After": "2"}}, "count": 1})
        started = time.monotonic()
        result = await platform.apply_batch([Action("a-1", "post", text="patient")], 0, NOW)
        waited = time.monotonic() - started
        later = await platform.apply_batch([Action("a-1", "post", text="after the reset")], 1, NOW)
        stats = dict(platform.transport.stats)
        await platform.aclose()
        return result, waited, later, stats

    result, waited, later, stats = asyncio.run(go())
    assert result[0].ok and later[0].ok and stats["ratelimited"] == 1
    assert waited >= 0.5
    assert mock.stats()["status_count"] == 2


def test_429_with_a_distant_reset_is_a_refusal_not_a_hang(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path, max_ratelimit_wait=1)
        await register(platform, ("a-1",))
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses/*/favourite"}, "effect": {"type": "ratelimit"}, "count": 1})
        await platform.apply_batch([Action("a-1", "post", text="x")], 0, NOW)
        await register(platform, ("a-2",))
        started = time.monotonic()
        result = await platform.apply_batch([Action("a-2", "like", target_post="p1")], 1, NOW)
        await platform.aclose()
        return result, time.monotonic() - started

    result, took = asyncio.run(go())
    assert not result[0].ok and "rate limited" in result[0].error and took < 5


def test_per_account_caps_refuse_in_wall_time(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path, status_cap=2, follow_cap=1)
        await register(platform)
        results = await platform.apply_batch([
            Action("a-1", "post", text="one"), Action("a-1", "post", text="two"), Action("a-1", "post", text="three"),
            Action("a-2", "post", text="other account"), Action("a-1", "follow", target_agent="a-2"),
            Action("a-1", "follow", target_agent="a-3"), Action("a-1", "reblog", target_post="p4"),
        ], 0, NOW)
        await platform.aclose()
        return results

    results = asyncio.run(go())
    assert [r.ok for r in results] == [True, True, False, True, True, False, False]
    assert results[2].error == "rate cap: a-1 reached 2 statuses per 3 hours"
    assert results[5].error.startswith("rate cap: a-1 reached 1 follows per 24 hours")
    assert mock.stats()["status_count"] == 3


def test_an_outage_stops_the_run_and_a_resume_sends_what_never_arrived(mock, tmp_path):
    """The server answers 503 to every post after the first: the run stops cleanly (no write
    is recorded as refused because of the outage) and the resumed round sends the rest."""
    from townsquare.errors import RunStopped

    actions = [Action("a-1", "post", text="before the outage"), Action("a-2", "post", text="during the outage")]

    async def first_then_outage():
        platform = make(mock, tmp_path, max_retries=2)
        await register(platform, ("a-1", "a-2"))
        checkpoint = json.loads(json.dumps(platform.get_state()))
        done = await platform.apply(actions[0], 0, NOW)
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "status", "status": 503}})
        with pytest.raises(RunStopped, match=r"mastodon server http://127.0.0.1:\d+ unreachable .post by a-2: gave up after 3 tries: HTTP 503"):
            await platform.apply(actions[1], 0, NOW)
        await platform.aclose()
        return checkpoint, done

    async def resumed(checkpoint):
        platform = make(mock, tmp_path)
        await register(platform, ("a-1", "a-2"))
        platform.set_state(checkpoint)
        results = await platform.apply_batch(actions, 0, NOW)
        await platform.aclose()
        return results

    checkpoint, done = asyncio.run(first_then_outage())
    assert done.ok and mock.stats()["status_count"] == 1
    mock._request("DELETE", "/api/v1/_mock/faults")
    results = asyncio.run(resumed(checkpoint))
    assert [r.created_id for r in results] == ["p1", "p2"] and results[0].remote_id == done.remote_id
    assert mock.stats()["status_count"] == 2
