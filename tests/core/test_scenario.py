"""Scenario loading: overrides, resolution, and one-line errors with exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import scenario_text
from townsquare.errors import ScenarioError
from townsquare.plugin_manager import make_plugin_manager
from townsquare.launch.scenario_files import apply_overrides, load_scenario


@pytest.fixture(scope="module")
def plugins():
    return make_plugin_manager(autoload=False)


def test_defaults_and_slot_table(write_scenario, plugins):
    scenario = load_scenario(write_scenario(scenario_text()), [], plugins)
    assert scenario.platform.spec.name == "in_memory"
    assert scenario.recommender.spec.name == "chronological"
    assert scenario.embedder.spec.name == "hash"
    assert scenario.model.clock.minutes_per_round == 60
    rows = {(r["scope"], r["slot"]): (r["component"], r["plugin"]) for r in scenario.slot_table()}
    assert rows[("run", "platform")] == ("in_memory", "in_memory")
    assert rows[("users", "policy")] == ("embedding_baseline", "embedding_baseline")
    assert rows[("users", "planner")] == ("-", "-")


def test_overrides_swap_tables_and_index_lists():
    data = {"platform": {"name": "in_memory"}, "populations": [{"count": 3}], "rounds": 2}
    out = apply_overrides(data, ["platform.name=mastodon", "platform.base_url=http://127.0.0.1:9", "populations.0.count=7", "rounds=5", "clock.minutes_per_round=30"], "s.toml")
    assert out["platform"] == {"name": "mastodon", "base_url": "http://127.0.0.1:9"}
    assert out["populations"][0]["count"] == 7 and out["rounds"] == 5
    assert out["clock"] == {"minutes_per_round": 30}
    assert data["platform"]["name"] == "in_memory"  # the input is not changed


def test_naming_another_recommender_drops_the_old_ones_settings():
    data = {"recommender": {"name": "mastodon_digest", "smoothing": True}}
    assert apply_overrides(data, ["recommender.name=random"], "--set")["recommender"] == {"name": "random"}
    # the same name keeps them; settings given before or after the name are the new one's
    assert apply_overrides(data, ["recommender.name=mastodon_digest"], "--set")["recommender"]["smoothing"] is True
    assert apply_overrides(data, ["recommender.k=3", "recommender.name=x", "recommender.j=1"], "--set")["recommender"] == \
        {"name": "x", "k": 3, "j": 1}


def test_override_changes_a_resolved_component(write_scenario, plugins):
    scenario = load_scenario(write_scenario(scenario_text()), ["recommender.name=random"], plugins)
    assert scenario.recommender.spec.name == "random"


def test_plugin_section_is_validated_and_passed(write_scenario, plugins):
    text = scenario_text(extra="[plugins.embedding_baseline]\nlike_threshold = 0.5\n")
    scenario = load_scenario(write_scenario(text), [], plugins)
    assert scenario.populations[0].slots["policy"].config.like_threshold == 0.5


BAD = [
    ("missing key", lambda t: t.replace("rounds = 3\n", ""), "s.toml: rounds: missing required key"),
    ("wrong type", lambda t: t.replace("rounds = 3", 'rounds = "three"'), "s.toml: rounds: input should be a valid integer"),
    ("bad value", lambda t: t.replace("rounds = 3", "rounds = 0"), "s.toml: rounds: input should be greater than 0"),
    ("unknown key", lambda t: t.replace("rounds = 3", "rounds = 3\nroundz = 4"), "s.toml: roundz: unknown key (expected one of:"),
    ("unknown nested key", lambda t: t.replace('model = "always"', 'model = "always"\nbeta = 2'), "s.toml: activity.beta: unknown key (expected one of: alpha, hourly, model, x_min)"),
    ("unknown component", lambda t: t.replace('policy = "embedding_baseline"', 'policy = "telepathy"'), "s.toml: populations[0].slots.policy: unknown policy 'telepathy' (choose from: embedding_baseline, embedding_items, generative_agent, recagent_policy, social_agent, social_agent_combined, social_agent_routed, town_agent)"),
    ("unknown platform", lambda t: t + '\n[platform]\nname = "myspace"\n', "s.toml: platform.name: unknown platform 'myspace' (choose from: in_memory, mastodon, recsys, town)"),
    ("unknown plugin section", lambda t: t + "\n[plugins.nonesuch]\nx = 1\n", "s.toml: plugins.nonesuch: no plugin named 'nonesuch' is installed"),
    ("bad plugin setting", lambda t: t + "\n[plugins.embedding_baseline]\nlike_threshold = \"high\"\n", "s.toml: plugins.embedding_baseline.like_threshold: input should be a valid number"),
    ("unknown slot", lambda t: t.replace('policy = "embedding_baseline"', 'policy = "embedding_baseline", mood = "x"'), "s.toml: populations[0].slots.mood: unknown slot"),
    ("bad toml", lambda t: t + "\n[[[", "s.toml: invalid TOML"),
    ("wrong population type", lambda t: t.replace("count = 3", "count = -1"), "s.toml: populations[0].count: input should be greater than or equal to 1"),
]


@pytest.mark.parametrize("label,edit,message", BAD, ids=[b[0] for b in BAD])
def test_malformed_scenarios_give_one_line(label, edit, message, tmp_path, plugins, monkeypatch):
    path = tmp_path / "s.toml"
    path.write_text(edit(scenario_text()))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError) as info:
        load_scenario("s.toml", [], plugins)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(message), text


def test_cli_exit_status_2_and_no_traceback(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(scenario_text().replace("rounds = 3", 'rounds = "three"'))
    out = subprocess.run([sys.executable, "-m", "townsquare.cli", "run", str(path), "--out", str(tmp_path / "r")], capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: {path}: rounds: input should be a valid integer") and lines[0].endswith("(got 'three')")
    assert not (tmp_path / "r").exists()


def test_cli_debug_shows_the_traceback(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(scenario_text().replace("rounds = 3", 'rounds = "three"'))
    out = subprocess.run([sys.executable, "-m", "townsquare.cli", "run", str(path), "--debug"], capture_output=True, text=True)
    assert out.returncode != 0 and "Traceback" in out.stderr


def test_missing_file_is_one_line(plugins):
    with pytest.raises(ScenarioError, match="^nope.toml: no such file$"):
        load_scenario("nope.toml", [], plugins)


def test_bad_override_syntax(write_scenario, plugins):
    with pytest.raises(ScenarioError, match="--set: rounds5: expected dotted.key=value"):
        load_scenario(write_scenario(scenario_text()), ["rounds5"], plugins)


def _never_built(config, ctx):
    """A factory for resolve-only tests (a class such as ``object`` would be checked against
    its slot's protocol when the scenario is resolved)."""
    raise AssertionError("resolve-only test: components are never built")


def test_unnamed_slots_follow_what_the_policy_uses(make_plugins, write_scenario):
    import types

    from townsquare import hookimpl
    from townsquare.specs import PlannerSpec, PolicySpec

    def plugin(name, hook, records):
        module = types.SimpleNamespace(**{hook: hookimpl(lambda: records)})
        module.plugin_name = name
        return module

    planners = [
        plugin("plan_a", "townsquare_register_planners", [PlannerSpec("plan_a", _never_built, priority=1000)]),
        plugin("plan_b", "townsquare_register_planners", [PlannerSpec("plan_b", _never_built, priority=0)]),
        plugin("planful", "townsquare_register_policies", [PolicySpec("planful", _never_built, uses={"planner": "plan_b"})]),
    ]
    text = scenario_text()
    path = write_scenario(text)
    # the baseline uses no planner: a loaded planner plugin does not leak into its agents
    plugins = make_plugins(*planners)
    assert "planner" not in load_scenario(path, [], plugins).populations[0].slots
    # naming "auto" still fills it with the highest priority
    auto = load_scenario(path, ["populations.0.slots.planner=auto"], plugins)
    assert auto.populations[0].slots["planner"].spec.name == "plan_a"
    # a policy that uses a planner gets its preferred one, and the fallback when that is disabled
    uses = load_scenario(path, ["populations.0.slots.policy=planful"], plugins)
    assert uses.populations[0].slots["planner"].spec.name == "plan_b"
    fallback = load_scenario(path, ["populations.0.slots.policy=planful"], make_plugins(*planners, disable=["plan_b"]))
    assert fallback.populations[0].slots["planner"].spec.name == "plan_a"
    none = load_scenario(path, ["populations.0.slots.policy=planful", "populations.0.slots.planner=none"], plugins)
    assert "planner" not in none.populations[0].slots


def test_components_that_need_knowledge(make_plugins, write_scenario):
    import types

    from townsquare import hookimpl
    from townsquare.errors import ScenarioError
    from townsquare.specs import KnowledgeSourceSpec, PersonaComponentSpec, PolicySpec

    module = types.SimpleNamespace(
        townsquare_register_persona_components=hookimpl(lambda: [
            PersonaComponentSpec("bounded", _never_built, persona_kind="knowledge", priority=100, needs_knowledge=True),
            PersonaComponentSpec("nothing", _never_built, persona_kind="knowledge", priority=10),
        ]),
        townsquare_register_policies=hookimpl(lambda: [PolicySpec("knower", _never_built, uses={"persona.knowledge": "bounded"})]),
        townsquare_register_knowledge_sources=hookimpl(lambda: [KnowledgeSourceSpec("kb", _never_built)]),
    )
    module.plugin_name = "knowing"
    plugins = make_plugins(module)
    path = write_scenario(scenario_text())
    policy = ["populations.0.slots.policy=knower"]
    # no [knowledge] table: the preferred component needs one, so the fallback fills the slot
    assert load_scenario(path, policy, plugins).populations[0].slots["persona.knowledge"].spec.name == "nothing"
    # with a knowledge source, the preferred one
    with_kb = load_scenario(path, policy + ["knowledge.name=kb"], plugins)
    assert with_kb.populations[0].slots["persona.knowledge"].spec.name == "bounded"
    # naming it explicitly without a source is an error
    with pytest.raises(ScenarioError, match=r"populations\[0\].slots.persona.knowledge: 'bounded' needs a knowledge source"):
        load_scenario(path, policy + ["populations.0.slots.persona.knowledge=bounded"], plugins)


def test_slot_names_as_toml_dotted_keys(write_scenario, plugins):
    text = scenario_text().replace('slots = { policy = "embedding_baseline" }', 'slots = { policy = "embedding_baseline", persona.context = "none", memory.short_term = "none" }')
    scenario = load_scenario(write_scenario(text), ["populations.0.slots.memory.stream=none"], plugins)
    assert scenario.model.populations[0].slots == {"policy": "embedding_baseline", "persona.context": "none", "memory.short_term": "none", "memory.stream": "none"}
