"""``resume`` continues the run that was recorded, or refuses: a setting that changes what
agents do, a shortened run and an input file or dataset changed since the start are one line
(exit 2) naming the key or file; settings that steer the machinery change freely, and an
accepted input change is recorded with the round it took effect from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel

from helpers import cli_in_process, read_table
from townsquare.api import ALL_SETTINGS, machinery_fields
from townsquare.registry import ComponentRegistry
from townsquare.launch.scenario_files import load_scenario
from townsquare.launch.settings_kinds import changed_keys, steers_machinery
from townsquare.specs import MetricSpec

PERSONAS = [{"name": "Ada", "sentences": ["I love hiking in the mountains."]},
            {"name": "Bo", "sentences": ["I play jazz piano at night."]},
            {"name": "Cy", "sentences": ["I follow football every weekend."]}]


def scenario(tmp_path: Path, personas: str = '{ name = "jsonl", path = "people.jsonl" }', budget: int = 12) -> Path:
    (tmp_path / "people.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PERSONAS))
    path = tmp_path / "s.toml"
    path.write_text(f"""name = "t"
seed = 3
rounds = 4
[activity]
model = "always"
[recommender]
name = "random"
[llm]
name = "scripted"
[plugins.scripted]
policy_post_probability = 0.6
[plugins.llm_budget]
max_calls = {budget}
[[populations]]
name = "users"
count = 3
slots = {{ policy = "scripted_feed" }}
personas = {personas}
""")
    return path


@pytest.fixture
def stopped(tmp_path, capsys):
    """A run stopped by its LLM budget after some rounds (exit 3), resumable."""
    code, _, err = cli_in_process(capsys, "run", str(scenario(tmp_path)), "--out", str(tmp_path / "run"), "--quiet",
                                  "-p", "townsquare.testing.scripted")
    assert code == 3, err
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "stopped" and 0 < manifest["rounds_completed"] < 4
    return tmp_path / "run"


def resume(capsys, run: Path, *args: str) -> tuple[int, str]:
    code, _, err = cli_in_process(capsys, "resume", str(run), "--quiet", *args)
    return code, err.strip()


def test_resume_refuses_a_new_seed_naming_it_and_branch(stopped, capsys):
    before = (stopped / "manifest.json").read_text(), read_table(stopped, "agents")
    code, err = resume(capsys, stopped, "--set", "seed=99", "--set", "plugins.llm_budget.max_calls=1000")
    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith("error: --set seed=99: seed changes what agents do, and the run was recorded with seed = 3")
    assert f"townsquare branch {stopped} --at ROUND --set seed=..." in err
    assert ((stopped / "manifest.json").read_text(), read_table(stopped, "agents")) == before  # nothing touched


@pytest.mark.parametrize("override,key", [
    ("plugins.scripted.policy_post_probability=0.1", "plugins.scripted.policy_post_probability"),  # a plugin's setting
    ("plugins.social_agent.feed_size=1", "plugins.social_agent.feed_size"),  # one of a plugin the run does not use
    ('llm.text_reply="other"', "llm.text_reply"),  # the model's own settings
    ("recommender.name=chronological", "recommender.name"),
    ("populations.0.count=2", "populations.0.count"),
    ('populations.0.personas={ name = "inline", items = [{ name = "Zed" }] }', "populations.0.personas"),
    ("clock.minutes_per_round=5", "clock.minutes_per_round"),
])
def test_resume_refuses_every_setting_that_changes_what_agents_do(stopped, capsys, override, key):
    code, err = resume(capsys, stopped, "--set", override)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"--set {override}: {key}" in err and "changes what agents do" in err and "townsquare branch" in err


def test_resume_changes_machinery_settings_and_records_them(stopped, capsys):
    done = json.loads((stopped / "manifest.json").read_text())["rounds_completed"]
    same_llm = '{ name = "scripted", latency_ms = 1 }'  # a whole table whose only change is machinery
    code, err = resume(capsys, stopped, "--set", "plugins.llm_budget.max_calls=100000", "--set", "engine.concurrency=3",
                       "--set", f"llm={same_llm}", "--set", "seed=3", "--set", "rounds=5")
    assert code == 0, err
    manifest = json.loads((stopped / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["rounds_completed"] == 5
    assert manifest["scenario"]["plugins"]["llm_budget"]["max_calls"] == 100000
    assert manifest["resumes"] == [{"from_round": done, "inputs_changed": [], "set": [
        "plugins.llm_budget.max_calls=100000", "engine.concurrency=3", f"llm={same_llm}", "seed=3", "rounds=5"]}]


def test_rounds_may_only_grow(stopped, capsys):
    done = json.loads((stopped / "manifest.json").read_text())["rounds_completed"]
    code, err = resume(capsys, stopped, "--set", f"rounds={done - 1}", "--set", "plugins.llm_budget.max_calls=1000")
    assert code == 2 and f"the run has already played {done} rounds" in err


def test_a_persona_file_edited_between_stop_and_resume_is_named(stopped, capsys):
    manifest = json.loads((stopped / "manifest.json").read_text())
    assert set(manifest["inputs"]) == {"populations.0.personas.path"}
    people = stopped.parent / "people.jsonl"
    people.write_text(people.read_text().replace("Ada", "Ann"))
    code, err = resume(capsys, stopped, "--set", "plugins.llm_budget.max_calls=100000")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {people}: has changed since the run recorded it (populations.0.personas.path, SHA-256 ")
    assert "--accept-changed-inputs" in err
    assert json.loads((stopped / "manifest.json").read_text()) == manifest

    people.unlink()
    code, err = resume(capsys, stopped, "--set", "plugins.llm_budget.max_calls=100000", "--accept-changed-inputs")
    assert code == 2 and err.startswith("error: people.jsonl: is gone or unreadable since the run recorded it")


def test_an_accepted_input_change_is_recorded_with_its_round(stopped, capsys):
    people = stopped.parent / "people.jsonl"
    people.write_text(people.read_text().replace("mountains", "hills"))
    done = json.loads((stopped / "manifest.json").read_text())["rounds_completed"]
    code, err = resume(capsys, stopped, "--set", "plugins.llm_budget.max_calls=100000", "--accept-changed-inputs")
    assert code == 0, err
    manifest = json.loads((stopped / "manifest.json").read_text())
    [change] = manifest["input_changes"]
    assert change["key"] == "populations.0.personas.path" and change["from_round"] == done
    assert change["sha256"] == manifest["inputs"]["populations.0.personas.path"]["sha256"] != change["sha256_before"]
    assert manifest["resumes"][0]["inputs_changed"] == ["populations.0.personas.path"]


def test_an_installed_dataset_edited_between_stop_and_resume_is_named(tmp_path, capsys, data_home):
    dataset = data_home / "people-set"
    dataset.mkdir(parents=True)
    (dataset / ".townsquare-dataset.json").write_text(json.dumps({"version": "1"}))
    (dataset / "people.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PERSONAS))
    path = scenario(tmp_path, personas='{ name = "jsonl", path = "data:people-set/people.jsonl" }')
    code, _, err = cli_in_process(capsys, "run", str(path), "--out", str(tmp_path / "run"), "--quiet", "-p", "townsquare.testing.scripted")
    assert code == 3, err
    (dataset / "people.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PERSONAS[::-1]))
    code, err = resume(capsys, tmp_path / "run", "--set", "plugins.llm_budget.max_calls=100000")
    assert code == 2 and err.startswith(f"error: {dataset / 'people.jsonl'}: has changed since the run recorded it"), err


# --------------------------------------------------------------------------- the declaration


class Unmarked(BaseModel):
    threshold: float = 0.5


class Marked(BaseModel):
    machinery_settings: ClassVar = frozenset({"timeout_s"})
    timeout_s: float = 1.0
    threshold: float = 0.5


class AllMarked(BaseModel):
    machinery_settings: ClassVar = ALL_SETTINGS
    limit: int = 3


def test_a_settings_model_declares_its_machinery_once_and_behaviour_is_the_default():
    assert machinery_fields(Unmarked) == frozenset()
    assert machinery_fields(Marked) == {"timeout_s"}
    assert machinery_fields(AllMarked) == {"limit"}
    registry = ComponentRegistry()
    for name, model in (("third", Unmarked), ("marked", Marked), ("all", AllMarked)):
        spec = MetricSpec(name, lambda config, ctx: None, config_model=model)
        spec.plugin = name
        registry.add(spec)
    kind = lambda *path: steers_machinery(path, None, registry)  # noqa: E731
    assert not kind("plugins", "third", "threshold")
    assert kind("plugins", "marked", "timeout_s") and not kind("plugins", "marked", "threshold")
    assert kind("plugins", "all", "limit") and kind("populations", 0, "config", "all", "limit")
    assert not kind("populations", 0, "config", "third", "threshold")
    assert kind("engine", "concurrency") and kind("limits", "max_agents") and kind("name")
    assert not kind("seed") and not kind("rounds") and not kind("clock", "start") and not kind("activity", "alpha")


def test_component_tables_follow_their_component_model(tmp_path, make_plugins):
    path = scenario(tmp_path)
    plugins = make_plugins(enable=["townsquare.testing.scripted"])
    resolved = load_scenario(path, [], plugins)
    assert steers_machinery(("llm", "latency_ms"), resolved, plugins.registry)
    assert not steers_machinery(("llm", "name"), resolved, plugins.registry)
    assert not steers_machinery(("llm", "text_reply"), resolved, plugins.registry)


def test_every_declared_machinery_field_exists(make_plugins):
    """A misspelt name in ``machinery_settings`` would leave the real field protected silently."""
    from townsquare.scenario import EngineConfig, LimitsConfig, ScenarioModel

    registry = make_plugins(enable=["townsquare.testing.scripted"]).registry
    models = {spec.config_model for slot in registry.by_slot.values() for spec in slot.values() if spec.config_model}
    models |= {EngineConfig, LimitsConfig, ScenarioModel}
    declared = [m for m in models if getattr(m, "machinery_settings", None)]
    assert len(declared) >= 8
    for model in declared:
        assert set(model.machinery_settings) - {"*"} <= set(model.model_fields), model


def test_changed_keys_are_the_leaves_that_differ():
    old = {"seed": 1, "llm": {"name": "x", "base_url": "a"}, "populations": [{"count": 2}]}
    new = {"seed": 1, "llm": {"name": "x", "base_url": "b"}, "populations": [{"count": 2}, {"count": 1}]}
    assert sorted(changed_keys(old, new), key=str) == [("llm", "base_url"), ("populations", 1, "count")]


def test_branch_is_how_a_behaviour_setting_or_an_input_changes_from_a_round_on(stopped, capsys):
    people = stopped.parent / "people.jsonl"
    people.write_text(people.read_text().replace("mountains", "hills"))
    code, _, err = cli_in_process(capsys, "branch", str(stopped), "--at", "1", "--out", str(stopped.parent / "b"), "--quiet",
                                  "--set", "seed=99", "--set", "plugins.llm_budget.max_calls=100000")
    assert code == 0, err
    manifest = json.loads((stopped.parent / "b" / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["scenario"]["seed"] == 99
    [change] = manifest["input_changes"]
    assert (change["key"], change["from_round"]) == ("populations.0.personas.path", 1)
    assert manifest["inputs"]["populations.0.personas.path"]["sha256"] == change["sha256"]
