"""Persona sources: inline and JSON Lines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from townsquare.components import BuildContext
from townsquare.errors import UsageError
from townsquare.plugins.personas import persona_files
from townsquare.plugins.personas.persona_files import PersonaFilesConfig, build_inline, build_jsonl

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def ctx(base_dir="."):
    return BuildContext(services=None, seed=0, base_dir=str(base_dir))


def test_inline_cycles_in_order_with_unique_names():
    config = PersonaFilesConfig.model_validate({"items": [
        {"name": "Ann", "sentences": ["I bake."], "fields": {"age": 30}},
        {"name": "Bo"},
    ]})
    source = build_inline(config, ctx())
    personas = source.load(5, np.random.default_rng(0))
    assert [p.name for p in personas] == ["Ann", "Bo", "Ann #2", "Bo #2", "Ann #3"]
    assert personas[2].sentences == ["I bake."] and personas[2].fields == {"age": 30}
    assert personas[1].sentences == [] and personas[1].fields == {}
    personas[0].sentences.append("changed")  # copies: the source is not touched
    assert source.load(1, None)[0].sentences == ["I bake."]
    assert source.load(0, None) == []


def test_inline_needs_items():
    with pytest.raises(UsageError, match="inline source needs items"):
        build_inline(PersonaFilesConfig(), ctx())
    with pytest.raises(UsageError, match="no personas"):
        build_inline(PersonaFilesConfig(items=[]), ctx()).load(2, None)


def test_jsonl_resolves_relative_paths_against_base_dir(tmp_path):
    lines = [{"name": "Cy", "sentences": ["I hike."], "fields": {"location": "Oslo"}}, {"name": "Di"}]
    (tmp_path / "people.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    source = build_jsonl(PersonaFilesConfig(path="people.jsonl"), ctx(tmp_path))
    personas = source.load(3, None)
    assert [p.name for p in personas] == ["Cy", "Di", "Cy #2"]
    assert personas[0].text == "I hike. location: Oslo"
    absolute = build_jsonl(PersonaFilesConfig(path=str(tmp_path / "people.jsonl")), ctx("/nowhere"))
    assert [p.name for p in absolute.load(2, None)] == ["Cy", "Di"]


@pytest.mark.parametrize("content, problem", [
    ('{"name": "A"}\n{"sentences": ["x"]}\n', ':2: missing "name"'),
    ('{"name": "A"}\n\n{"name": "B",}\n', ":3: invalid JSON"),
    ('["A"]\n', ":1: expected a JSON object, got list"),
    ('{"name": "A", "sentences": "I hike."}\n', ':1: "sentences" must be a list of strings'),
    ('{"name": "A", "fields": [1]}\n', ':1: "fields" must be an object'),
    ('{"name": "A", "bio": "x"}\n', ':1: unknown key "bio"'),
    ('{"name": "  "}\n', ':1: missing "name"'),
])
def test_jsonl_errors_name_file_and_line(tmp_path, content, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UsageError) as info:
        build_jsonl(PersonaFilesConfig(path="bad.jsonl"), ctx(tmp_path))
    message = str(info.value)
    assert message.startswith(f"{path}{problem}")
    assert "\n" not in message


def test_jsonl_missing_file_and_missing_path(tmp_path):
    with pytest.raises(UsageError, match=r"nope\.jsonl: no such persona file"):
        build_jsonl(PersonaFilesConfig(path="nope.jsonl"), ctx(tmp_path))
    with pytest.raises(UsageError, match="jsonl source needs path"):
        build_jsonl(PersonaFilesConfig(), ctx(tmp_path))


def limited(tmp_path, **limits):
    """A build context whose scenario sets ``[limits]``."""
    from townsquare.scenario import LimitsConfig

    class Scenario:
        pass

    scenario = Scenario()
    scenario.limits = LimitsConfig(**limits)
    return BuildContext(services=None, seed=0, base_dir=str(tmp_path), scenario=scenario)


def test_a_persona_name_may_hold_slashes(tmp_path):
    """A persona's name is a display name ("AC/DC fan"), never part of a path: agent ids come
    from the population's name, which must be path-safe."""
    personas = build_inline(PersonaFilesConfig(items=[{"name": "AC/DC fan"}, {"name": "a\\b"}]), ctx(tmp_path)).load(2, None)
    assert [p.name for p in personas] == ["AC/DC fan", "a\\b"]


@pytest.mark.parametrize("name,problem", [
    ("Ada\n", "contains control characters"),
    ("N" * 201, "201 characters long, above limits.max_name_length = 200"),
])
def test_persona_names_that_cannot_be_names(tmp_path, name, problem):
    (tmp_path / "p.jsonl").write_text(json.dumps({"name": name}) + "\n")
    with pytest.raises(UsageError, match=r"p\.jsonl:1: \"name\": "):
        build_jsonl(PersonaFilesConfig(path="p.jsonl"), ctx(tmp_path))
    with pytest.raises(UsageError) as info:
        build_inline(PersonaFilesConfig(items=[{"name": "Ok"}, {"name": name}]), ctx(tmp_path))
    assert str(info.value).startswith("personas.items[1]: \"name\": ") and problem in str(info.value)


def test_limits_bound_names_personas_and_files_and_can_be_raised(tmp_path):
    (tmp_path / "p.jsonl").write_text(json.dumps({"name": "N" * 300, "sentences": ["s" * 3000]}) + "\n")
    config = PersonaFilesConfig(path="p.jsonl")
    with pytest.raises(UsageError, match="above limits.max_name_length = 200"):
        build_jsonl(config, ctx(tmp_path))
    with pytest.raises(UsageError, match="above limits.max_persona_chars = 1000"):
        build_jsonl(config, limited(tmp_path, max_name_length=300, max_persona_chars=1000))
    with pytest.raises(UsageError, match=r"persona file is 0\.0 MB, above limits\.max_persona_file_mb = 0\.001 MB"):
        build_jsonl(config, limited(tmp_path, max_name_length=300, max_persona_file_mb=0.001))
    source = build_jsonl(config, limited(tmp_path, max_name_length=300))
    assert source.load(1, None)[0].name == "N" * 300


def test_example_personas_load():
    personas = build_jsonl(PersonaFilesConfig(path="personas.jsonl"), ctx(EXAMPLES)).load(40, None)
    assert len({p.name for p in personas}) == 40
    assert all(4 <= len(p.sentences) <= 5 for p in personas)
    assert all(set(p.fields) == {"age", "occupation", "location"} for p in personas)


def test_registration_and_state():
    specs = {s.name: s for s in persona_files.townsquare_register_persona_sources()}
    assert set(specs) == {"inline", "jsonl"}
    assert specs["inline"].config_model is specs["jsonl"].config_model is PersonaFilesConfig
    source = build_inline(PersonaFilesConfig.model_validate({"items": [{"name": "A"}]}), ctx())
    assert source.get_state() == {}
    source.set_state({})
    with pytest.raises(Exception):
        PersonaFilesConfig.model_validate({"items": [{"name": "A", "age": 3}]})
