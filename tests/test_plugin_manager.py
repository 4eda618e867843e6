"""The plugin manager: loading, blocking before import, failures, clashes, misspellings."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from townsquare import hookimpl
from townsquare.errors import PluginError
from townsquare.plugin_manager import DEFAULT_PLUGINS, canonical_name, make_plugin_manager, parse_plugin_options
from townsquare.specs import PolicySpec


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
        "print(p.infos['random_feed'].status, p.infos['chronological'].status, 'townsquare.recommenders.random_feed' in sys.modules)"
    )
    out = _imports_in_fresh_process(code, {"TOWNSQUARE_DISABLE_PLUGINS": "random_feed, chronological"})
    assert out == "disabled disabled False"


def test_enable_overrides_env_disable(monkeypatch):
    monkeypatch.setenv("TOWNSQUARE_DISABLE_PLUGINS", "random_feed")
    assert make_plugin_manager(autoload=False).infos["random_feed"].status == "disabled"
    assert make_plugin_manager(enable=["random_feed"], autoload=False).infos["random_feed"].status == "loaded"


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
