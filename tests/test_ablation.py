"""Disabling each built-in plugin in turn still completes a run, or fails with one clear line
when that plugin is the only provider of something the run needs."""

from __future__ import annotations

import pytest

from helpers import read_table, scenario_text
from townsquare.errors import ScenarioError
from townsquare.plugin_manager import DEFAULT_PLUGINS, canonical_name

#: plugin -> the error a minimal run gets without it (it alone provides a needed slot)
SOLE_PROVIDERS = {
    "in_memory": "platform.name: no enabled plugin provides a component for platform",
    "persona_files": "populations[0].personas.name: unknown persona_source 'inline'",
    "hash_embedder": "embedder.name: no enabled plugin provides a component for embedder",
    "embedding_baseline": "populations[0].slots.policy: no enabled plugin provides a component for policy",
}


@pytest.mark.parametrize("plugin", [canonical_name(m) for m in DEFAULT_PLUGINS])
def test_disable_each_builtin(plugin, make_plugins, write_scenario, run_scenario):
    plugins = make_plugins(disable=[plugin])
    text = scenario_text(rounds=2).replace('slots = { policy = "embedding_baseline" }', "")
    path = write_scenario(text)
    if plugin in SOLE_PROVIDERS:
        with pytest.raises(ScenarioError, match=SOLE_PROVIDERS[plugin].replace("[", r"\[").replace("]", r"\]")):
            run_scenario(path, plugins=plugins)
        return
    run_dir, summary = run_scenario(path, plugins=plugins)
    assert summary.rounds_completed == 2
    components = {row["component"] for row in run_dir.read_manifest()["slot_table"]}
    assert plugin not in {row["plugin"] for row in run_dir.read_manifest()["slot_table"]}
    assert components  # the fallback components are named in the manifest
    assert read_table(run_dir.path, "agents")


def test_disabling_the_default_recommender_falls_back_and_says_so(make_plugins, write_scenario, run_scenario):
    run_dir, _ = run_scenario(write_scenario(scenario_text(rounds=1)), plugins=make_plugins(disable=["chronological"]))
    rows = {(r["scope"], r["slot"]): r["component"] for r in run_dir.read_manifest()["slot_table"]}
    assert rows[("run", "recommender")] == "random"


def test_naming_a_disabled_component_stops_with_an_error(make_plugins, write_scenario, run_scenario):
    text = scenario_text(rounds=1, extra='[recommender]\nname = "chronological"\n')
    with pytest.raises(ScenarioError, match="recommender.name: unknown recommender 'chronological' .choose from: random."):
        run_scenario(write_scenario(text), plugins=make_plugins(disable=["chronological"]))
