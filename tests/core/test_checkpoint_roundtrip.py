"""Every component's state round-trips: a checkpoint restored into a freshly built world
gives back the same checkpoint (get_state after set_state is the identity)."""

from __future__ import annotations

import asyncio
import json

import pytest

from helpers import scenario_text
from townsquare import state
from townsquare.launch.run_lock import create
from townsquare.rundir import RunDir
from townsquare.launch.runner import load_run
from townsquare.world import World

SCENARIOS = {
    "embedding_baseline": dict(policy="embedding_baseline"),
    "scripted_feed": dict(policy="scripted_feed", llm=True, extra='[recommender]\nname = "random"\n'),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_restored_checkpoint_equals_saved(name, make_plugins, write_scenario, run_scenario, tmp_path):
    plugins = make_plugins(enable=["townsquare.testing.scripted"])
    run_dir, _ = run_scenario(write_scenario(scenario_text(rounds=3, count=4, **SCENARIOS[name])), plugins=plugins)
    round_, saved = run_dir.latest_checkpoint()
    assert round_ == 2

    _, scenario, _ = load_run(run_dir.path, plugins)
    fresh = World(scenario, create(tmp_path / "fresh", "fresh"))

    async def restore():
        await fresh.build()
        fresh.set_state(saved)
        try:
            return fresh.get_state(round_)
        finally:
            await fresh.aclose()

    restored = asyncio.run(restore())
    # compare the encoded form: numpy arrays become comparable base64 records
    assert json.loads(state.dumps(restored)) == json.loads(state.dumps(saved))
    assert saved["platform"] and saved["agents"]
