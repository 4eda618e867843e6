"""The plugin manager: loading, blocking before import, failures, clashes, misspellings."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
from pydantic import BaseModel

from townsquare import hookimpl
from townsquare.errors import PluginError
from townsquare.plugin_manager import DEFAULT_PLUGINS, canonical_name, make_plugin_manager, parse_plugin_options
from townsquare.specs import MetricSpec, PolicySpec, RecommenderSpec


def test_builtins_load_with_one_canonical_name_each():
    plugins = make_plugin_manager(autoload=False)
    assert [n for n in plugins.infos] == [canonical_name(m) for m in DEFAULT_PLUGINS]
    assert all(info.status == "loaded" for info in plugins.infos.values()), {n: i.error for n, i in plugins.infos.items()}
    assert plugins.registry.get("platform", "in_memory").plugin == "in_memory"


def test_parse_plugin_options():
    assert parse_plugin_options(["a", "no:b", " no:c ", ""]) == (["a"], ["b", "c"])


def _imports_in_fresh_process(code: str, env_extra: dict[str, str] | None = None) -> str:
    import os

    env = {**os.environ, **(env_extra or {})}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip()


def test_disabled_plugin_is_never_imported():
    code = (
        "import sys; from townsquare.plugin_manager import make_plugin_manager;"
        "p = make_plugin_manager(disable=['in_memory'], autoload=False);"
        "print(p.infos['in_memory'].status, 'townsquare.platforms.in_memory' in sys.modules)"
    )
    assert _imports_in_fresh_process(code) == "disabled False"


def test_env_var_disables_before_import():
    code = (
        "import sys; from townsquare.plugin_manager import make_plugin_manager;"
        "p = make_plugin_manager(autoload=False);"
        "print(p.infos['random'].status, p.infos['chronological'].status, 'townsquare.recommenders.random' in sys.modules)"
    )
    out = _imports_in_fresh_process(code, {"TOWNSQUARE_DISABLE_PLUGINS": "random, chronological"})
    assert out == "disabled disabled False"


def test_enable_overrides_env_disable(monkeypatch):
    monkeypatch.setenv("TOWNSQUARE_DISABLE_PLUGINS", "random")
    assert make_plugin_manager(autoload=False).infos["random"].status == "disabled"
    assert make_plugin_manager(enable=["random"], autoload=False).infos["random"].status == "loaded"


def test_autoload_env_var(monkeypatch):
    monkeypatch.setenv("TOWNSQUARE_DISABLE_PLUGIN_AUTOLOAD", "1")
    plugins = make_plugin_manager()
    assert all(info.source == "builtin" for info in plugins.infos.values())


def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def test_broken_plugin_is_reported_and_skipped(monkeypatch, tmp_path):
    (tmp_path / "broken_plugin_mod.py").write_text("raise RuntimeError('kaboom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = make_plugin_manager(enable=["broken_plugin_mod"], autoload=False)
    info = plugins.infos["broken_plugin_mod"]
    assert info.status == "failed" and "kaboom" in info.error
    assert plugins.infos["in_memory"].status == "loaded"


def test_strict_plugins_makes_a_failure_fatal(monkeypatch, tmp_path):
    (tmp_path / "broken_plugin_mod2.py").write_text("raise RuntimeError('kaboom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match="plugin 'broken_plugin_mod2' failed to load: RuntimeError: kaboom"):
        make_plugin_manager(enable=["broken_plugin_mod2"], autoload=False, strict=True)


def test_registration_that_raises_is_skipped(make_plugins):
    def bad():
        raise ValueError("no records today")

    plugin = _module("badreg", townsquare_register_policies=hookimpl(bad))
    plugins = make_plugins(plugin, strict=False)
    info = next(i for i in plugins.infos.values() if i.module == "badreg")
    assert info.status == "failed" and "no records today" in info.error


def test_wrong_record_type_is_a_failure(make_plugins):
    plugin = _module("wrongtype", townsquare_register_policies=hookimpl(lambda: ["not a spec"]))
    with pytest.raises(PluginError, match="expected PolicySpec"):
        make_plugins(plugin, strict=True)


def test_misspelt_hook_fails_loudly(make_plugins):
    plugin = _module("typo", townsquare_register_polices=lambda: [])
    with pytest.raises(PluginError, match="townsquare_register_polices"):
        make_plugins(plugin)


def test_misspelt_argument_fails_loudly(make_plugins):
    plugin = _module("argtypo", townsquare_on_round_start=hookimpl(lambda rund: None))
    with pytest.raises(Exception, match="rund"):
        make_plugins(plugin)


def test_duplicate_component_names_name_both_plugins(make_plugins):
    first = _module("first", townsquare_register_policies=hookimpl(lambda: [PolicySpec("same", object)]))
    second = _module("second", townsquare_register_policies=hookimpl(lambda: [PolicySpec("same", object)]))
    first.plugin_name, second.plugin_name = "first_plugin", "second_plugin"
    with pytest.raises(PluginError, match="'same' .policy. is registered by both plugin 'first_plugin' and plugin 'second_plugin'"):
        make_plugins(first, second)


def test_unknown_plugin_option_is_an_error():
    with pytest.raises(PluginError, match="-p nosuchplugin_xyz: no plugin or module"):
        make_plugin_manager(enable=["nosuchplugin_xyz"], autoload=False)


def test_auto_picks_highest_priority(make_plugins):
    low = _module("low", townsquare_register_policies=hookimpl(lambda: [PolicySpec("zz_low", object, priority=-5)]))
    high = _module("high", townsquare_register_policies=hookimpl(lambda: [PolicySpec("aa_high", object, priority=500)]))
    assert make_plugins(low, high).registry.auto("policy").name == "aa_high"


# --------------------------------------------------------------------------- -p and settings


def test_p_no_component_name_is_an_error_naming_its_plugin():
    with pytest.raises(PluginError, match=r"^-p no:jsonl: 'jsonl' is a persona_source component of plugin 'persona_files', "
                                          r"not a plugin; disable the plugin with -p no:persona_files"):
        make_plugin_manager(disable=["jsonl"], autoload=False)


def test_an_old_plugin_name_is_an_unknown_name(make_plugins, write_scenario):
    """Plugins have one name each: a name from before a rename means nothing (``-p no:OLD``
    warns like any unknown name; ``[plugins.OLD]`` is an error naming the section)."""
    from structlog.testing import capture_logs

    from townsquare.errors import ScenarioError
    from townsquare.launch.scenario_files import load_scenario

    from helpers import scenario_text

    with capture_logs() as logs:
        assert make_plugin_manager(disable=["random_feed"], autoload=False).infos["random"].status == "loaded"
    assert [e["plugin"] for e in logs if e["event"] == "plugin.unknown_disabled"] == ["random_feed"]
    path = write_scenario(scenario_text(rounds=1, extra='[plugins.hash_embedder]\ndim = 16\n'))
    with pytest.raises(ScenarioError, match=r"plugins.hash_embedder: no plugin named 'hash_embedder' is installed"):
        load_scenario(path, [], make_plugins())


def test_p_no_unknown_name_is_only_a_warning():
    plugins = make_plugin_manager(disable=["no_such_thing_xyz"], autoload=False)
    assert plugins.infos["random"].status == "loaded"


def test_a_disabled_run_wide_component_names_the_disabled_plugin(make_plugins, write_scenario):
    from townsquare.errors import ScenarioError
    from townsquare.launch.scenario_files import load_scenario

    from helpers import scenario_text

    path = write_scenario(scenario_text(rounds=1, extra='[recommender]\nname = "mastodon_digest"\n'))
    with pytest.raises(ScenarioError, match=r"recommender.name: unknown recommender 'mastodon_digest' .*; plugin 'mastodon_digest' is disabled$"):
        load_scenario(path, [], make_plugins(disable=["mastodon_digest"]))
    path = write_scenario(scenario_text(rounds=1))
    with pytest.raises(ScenarioError, match=r"unknown persona_source 'inline' .*; disabled or failed plugins: persona_files$"):
        load_scenario(path, [], make_plugins(disable=["persona_files"]))


def test_make_plugins_registers_a_module_under_its_own_name(make_plugins):
    module = _module("mytool.recency", townsquare_register_policies=hookimpl(lambda: [PolicySpec("recency_policy", object)]))
    plugins = make_plugins(module)
    assert plugins.registry.get("policy", "recency_policy").plugin == "recency"
    assert plugins.infos["recency"].source == "inline"


def test_a_failing_command_registration_is_skipped(make_plugins):
    def boom(cli):
        raise RuntimeError("no commands today")

    plugins = make_plugins(_module("cmdboom", townsquare_register_commands=hookimpl(boom),
                                   townsquare_register_policies=hookimpl(lambda: [PolicySpec("cmdboom_policy", object)])), strict=False)
    seen = []
    plugins.call_each("townsquare_register_commands", cli=seen)
    assert plugins.infos["cmdboom"].status == "failed" and "no commands today" in plugins.infos["cmdboom"].error
    assert "cmdboom_policy" not in plugins.registry.names("policy")
    strict = make_plugins(_module("cmdboom2", townsquare_register_commands=hookimpl(boom)))
    with pytest.raises(PluginError, match="plugin 'cmdboom2' failed to load: RuntimeError: no commands today"):
        strict.call_each("townsquare_register_commands", cli=seen)


def _build(config, ctx):
    return config


class _A(BaseModel):
    a: int = 1


class _B(BaseModel):
    b: int = 2


def _policy_and_metric(make_plugins, plugin: str, policy_model: type, metric_model: type, **options):
    """A plugin ``plugin`` with a policy ``{plugin}_p`` and a metric ``{plugin}_m``."""
    module = _module(plugin, townsquare_register_policies=hookimpl(lambda: [PolicySpec(f"{plugin}_p", _build, config_model=policy_model)]),
                     townsquare_register_metrics=hookimpl(lambda: [MetricSpec(f"{plugin}_m", _build, config_model=metric_model)]))
    return make_plugins(module, **options)


def test_components_with_one_model_share_the_plugin_section(make_plugins):
    registry = _policy_and_metric(make_plugins, "shared", _A, _A).registry
    spec = registry.get("metric", "shared_m")
    assert registry.section_key(spec) == "plugins.shared"
    assert registry.settings_for(spec, {"shared": {"a": 5}}) == {"a": 5}
    assert registry.check_section("shared", {"a": 5}) is None


def test_components_with_different_models_get_a_section_each(make_plugins):
    registry = _policy_and_metric(make_plugins, "two", _A, _B).registry
    spec = registry.get("metric", "two_m")
    assert registry.section_key(spec) == "plugins.two.two_m"
    assert registry.settings_for(spec, {"two": {"two_p": {"a": 5}, "two_m": {"b": 7}}}) == {"b": 7}
    assert registry.check_section("two", {"two_p": {"a": 5}}) is None
    assert "'a' is not one of its components" in registry.check_section("two", {"a": 5})
    assert registry.check_section("chronological", {"x": 1}) == "plugin 'chronological' takes no configuration"


def test_same_name_in_two_slots_with_different_models_fails_the_plugin(make_plugins):
    module = _module("samename", townsquare_register_policies=hookimpl(lambda: [PolicySpec("x9", _build, config_model=_A)]),
                     townsquare_register_metrics=hookimpl(lambda: [MetricSpec("x9", _build, config_model=_B)]))
    plugins = make_plugins(module, strict=False)
    assert plugins.infos["samename"].status == "failed"
    assert "two components named 'x9' with different config models" in plugins.infos["samename"].error
    assert "x9" not in plugins.registry.names("policy") and "x9" not in plugins.registry.names("metric")


def test_per_component_settings_reach_each_component(make_plugins, write_scenario):
    from townsquare.launch.scenario_files import load_scenario

    from helpers import scenario_text

    module = _module("two2", townsquare_register_recommenders=hookimpl(lambda: [RecommenderSpec("r2", _build, config_model=_A)]),
                     townsquare_register_metrics=hookimpl(lambda: [MetricSpec("m2", _build, config_model=_B)]))
    text = scenario_text(rounds=1, top='metrics = ["m2"]', extra='[recommender]\nname = "r2"\n[plugins.two2.r2]\na = 3\n[plugins.two2.m2]\nb = 4\n')
    scenario = load_scenario(write_scenario(text), [], make_plugins(module))
    assert scenario.recommender.config.a == 3 and scenario.metrics[0].config.b == 4
    # the [recommender] table's own keys are merged over [plugins.NAME.COMPONENT]
    scenario = load_scenario(write_scenario(text), ["recommender.a=8"], make_plugins(module))
    assert scenario.recommender.config.a == 8
