"""Disabling each built-in plugin in turn still completes a run of the social agent, with the
fallback component named in the manifest, or stops with the one clear line expected when that
plugin is the only provider of something the scenario needs (STYLE.md, convention 10)."""

from __future__ import annotations

import pytest

from helpers import ROOT, read_table
from townsquare.errors import UsageError
from townsquare.plugin_manager import DEFAULT_PLUGINS, canonical_name

SCENARIO = f"""
name = "ablation"
seed = 5
rounds = 3
[clock]
minutes_per_round = 480
[llm]
name = "scripted"
[knowledge]
name = "hotpotqa"
path = "{ROOT / 'tests' / 'data' / 'hotpotqa_sample.json'}"
persist = false
[plugins.scripted]
rules = {{ "topics" = "1. Training a puppy", "like|forward|comment" = "like" }}
[[populations]]
name = "users"
count = 3
[populations.personas]
name = "inline"
items = [
  {{ name = "Ada", sentences = ["I train dogs.", "I love hiking."] }},
  {{ name = "Bo", sentences = ["I restore old cars."] }},
]
"""

#: plugin -> the start of the one-line error a run without it gets (it alone provides a needed piece)
SOLE_PROVIDERS = {
    "in_memory": "plugins.mastodon.base_url: missing required key",  # auto falls to mastodon, which needs a server
    "persona_files": "populations[0].personas.name: unknown persona_source 'inline'",
    "hotpotqa": "knowledge.name: unknown knowledge 'hotpotqa'",
}
#: plugins whose fallback may be unavailable in this environment (an optional extra)
MAYBE = {"hash": "embedder 'minilm'"}


@pytest.mark.parametrize("plugin", [canonical_name(m) for m in DEFAULT_PLUGINS])
def test_disable_each_builtin(plugin, make_plugins, write_scenario, run_scenario):
    plugins = make_plugins(disable=[plugin], enable=["townsquare.testing.scripted"])
    path = write_scenario(SCENARIO)
    if plugin in SOLE_PROVIDERS:
        with pytest.raises(UsageError) as info:
            run_scenario(path, plugins=plugins)
        assert SOLE_PROVIDERS[plugin] in str(info.value) and "\n" not in str(info.value)
        return
    try:
        run_dir, summary = run_scenario(path, plugins=plugins)
    except UsageError as exc:
        assert plugin in MAYBE and MAYBE[plugin] in str(exc), exc
        return
    assert summary.rounds_completed == 3
    table = run_dir.read_manifest()["slot_table"]
    assert plugin not in {row["plugin"] for row in table}
    assert read_table(run_dir.path, "agents")


def test_full_scenario_uses_the_paper_components(make_plugins, write_scenario, run_scenario):
    run_dir, _ = run_scenario(write_scenario(SCENARIO), plugins=make_plugins(enable=["townsquare.testing.scripted"]))
    rows = {(r["scope"], r["slot"]): r["component"] for r in run_dir.read_manifest()["slot_table"]}
    assert rows[("users", "policy")] == "social_agent"
    assert rows[("users", "persona.context")] == "dynamic_persona"
    assert rows[("users", "persona.knowledge")] == "knowledge_boundary"
    assert rows[("users", "planner")] == "activity_plan"
    assert rows[("users", "reflector")] == "follow_reflection"
    assert rows[("users", "memory.short_term")] == "action_memory"


@pytest.mark.parametrize("plugin,fallback", [
    ("dynamic_persona", ("persona.context", "full_persona")),
    ("knowledge_boundary", ("persona.knowledge", "unbounded_knowledge")),
    ("social_agent", ("policy", "social_agent_combined")),
    ("chronological", ("recommender", "random")),
])
def test_paper_ablations_fall_back_as_documented(plugin, fallback, make_plugins, write_scenario, run_scenario):
    plugins = make_plugins(disable=[plugin], enable=["townsquare.testing.scripted"])
    run_dir, _ = run_scenario(write_scenario(SCENARIO), plugins=plugins)
    rows = {r["slot"]: r["component"] for r in run_dir.read_manifest()["slot_table"]}
    assert rows[fallback[0]] == fallback[1]


def test_naming_a_disabled_component_stops_with_an_error(make_plugins, write_scenario, run_scenario):
    from townsquare.errors import ScenarioError

    text = SCENARIO + '\n[recommender]\nname = "chronological"\n'
    with pytest.raises(ScenarioError, match=r"recommender.name: unknown recommender 'chronological' .choose from: (\w+, )*mastodon_digest, (\w+, )*random."):
        run_scenario(write_scenario(text), plugins=make_plugins(disable=["chronological"], enable=["townsquare.testing.scripted"]))
