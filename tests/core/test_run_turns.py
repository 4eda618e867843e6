"""The engine's turn workers (``townsquare.agent_host.run_turns``) and the JSON of a browse's post ids."""

from __future__ import annotations

import asyncio

import pytest

from townsquare.agent_host import run_turns
from townsquare.engine import _ids_json, _json


def test_turns_fill_their_results_in_order_at_most_limit_at_once():
    started, active, peak = [], 0, 0

    async def turn(agent):
        nonlocal active, peak
        started.append(agent)
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.001 * (agent % 3))
        active -= 1
        return agent * 10

    async def settle(workers, exc):  # pragma: no cover - nothing fails here
        raise AssertionError("settle called")

    results = [None, "batched", None, None, None, None, "batched", None]
    asyncio.run(run_turns(turn, list(range(8)), results, 3, settle))
    assert results == [0, "batched", 20, 30, 40, 50, "batched", 70]
    assert started == [0, 2, 3, 4, 5, 7] and peak == 3


def test_after_a_failed_turn_no_new_turn_starts_and_the_ones_under_way_settle():
    started, finished, settled = [], [], []

    async def go():
        release = asyncio.Event()  # the other turns end only once the failure is being settled

        async def turn(agent):
            started.append(agent)
            if agent == 1:
                await asyncio.sleep(0)
                raise RuntimeError("turn 1 failed")
            await release.wait()
            finished.append(agent)
            return agent

        async def settle(workers, exc):
            settled.append(str(exc))
            release.set()
            await asyncio.gather(*workers, return_exceptions=True)

        await run_turns(turn, list(range(10)), [None] * 10, 3, settle)

    with pytest.raises(RuntimeError, match="turn 1 failed"):
        asyncio.run(go())
    assert started == [0, 1, 2] and sorted(finished) == [0, 2] and settled == ["turn 1 failed"]


@pytest.mark.parametrize("ids", [("p1",), ("p1", "p22", "p333"), ('a"b', "c"), ("a\\b",), ("é", "ü"), ("x\u2028",),
                                 ("tab\there",), ("", "")])
def test_post_ids_json_is_the_encoders(ids):
    assert _ids_json(ids) == _json(list(ids))
