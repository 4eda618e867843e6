"""The house rules, checked over the source: who imports whom, no import cycle, one name per
plugin, every package installed. The drawing in docs/architecture.md comes from the same code
(tools/import_graph.py) and must be current."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import import_graph  # noqa: E402


def test_plugins_import_only_the_declared_api_the_testing_kit_and_their_own_package():
    assert import_graph.forbidden_imports() == []


def test_the_check_finds_a_forbidden_import(tmp_path, monkeypatch):
    (tmp_path / "plugins" / "thing").mkdir(parents=True)
    (tmp_path / "core").mkdir()
    (tmp_path / "plugins" / "thing" / "__init__.py").write_text("")
    (tmp_path / "plugins" / "thing" / "bad.py").write_text(
        "from townsquare.api import hookimpl\nfrom . import good\n\ndef f():\n    from townsquare.launch.runner import start_run\n")
    (tmp_path / "plugins" / "thing" / "good.py").write_text("from townsquare.testing import scripted\n")
    (tmp_path / "plugins" / "other.py").write_text("from townsquare.plugins.thing import good\n")
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    assert import_graph.forbidden_imports() == [
        "plugins/other.py:1: imports townsquare.plugins.thing.good (plugins import townsquare.api, townsquare.testing and their own package only)",
        "plugins/thing/bad.py:5: imports townsquare.launch.runner (plugins import townsquare.api, townsquare.testing and their own package only)",
    ]


def test_the_check_finds_a_kernel_module_that_imports_a_plugin(tmp_path, monkeypatch):
    (tmp_path / "core").mkdir()
    (tmp_path / "plugins" / "report").mkdir(parents=True)
    (tmp_path / "plugins" / "report" / "__init__.py").write_text("")
    (tmp_path / "plugins" / "report" / "summary.py").write_text("")
    (tmp_path / "core" / "runner.py").write_text("def report():\n    from townsquare.plugins.report.summary import line\n")
    (tmp_path / "core" / "ok.py").write_text("PLUGINS = ('townsquare.plugins.report.summary',)\n")  # a name, not an import
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    assert import_graph.forbidden_imports() == [
        "core/runner.py:2: imports townsquare.plugins.report.summary (only plugins import plugins; add a hook and implement it in the plugin)",
    ]


def test_the_check_finds_the_kernel_or_the_cli_reaching_past_its_wall(tmp_path, monkeypatch):
    """The kernel imports no command, no front end, not the testing kit (a type-only import
    too); the CLI imports no command: commands are plugins."""
    for folder in ("core", "cli", "commands", "testing"):
        (tmp_path / folder).mkdir()
    (tmp_path / "commands" / "ablate.py").write_text("")
    (tmp_path / "cli" / "__init__.py").write_text("from townsquare.commands import ablate\n")
    (tmp_path / "core" / "engine.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from townsquare.cli import main\n")
    (tmp_path / "core" / "runner.py").write_text("def f():\n    from townsquare.testing import scripted\n")
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    problems = import_graph.forbidden_imports()
    assert sorted(p.split(" (")[0] for p in problems) == [
        "cli/__init__.py:1: imports townsquare.commands.ablate",
        "core/engine.py:3: imports townsquare.cli",
        "core/runner.py:2: imports townsquare.testing",
    ]


def test_no_import_cycle_anywhere_but_the_commented_known_ones():
    assert import_graph.unknown_cycles() == []
    # every allowed cycle still exists: fold it out of the list once it is gone
    assert set(import_graph.KNOWN_CYCLES) <= {tuple(c) for c in import_graph.cycles()}


def test_a_type_only_import_counts(tmp_path, monkeypatch):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "a.py").write_text("from . import b\n")
    (tmp_path / "core" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:  # pragma: no cover\n    from .a import A\n")
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    assert import_graph.unknown_cycles() == [["townsquare.a", "townsquare.b"]]


def test_the_cycle_check_finds_a_cycle():
    assert import_graph.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_architecture_page_shows_the_current_imports():
    assert (ROOT / "docs" / "architecture.md").read_text() == import_graph.current_doc(), \
        "docs/architecture.md is stale: run python tools/import_graph.py --write"


def test_every_package_is_installed_with_its_prompt_files():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {import_graph.module_name(init) for folder in import_graph.PACKAGE_DIRS
               for init in (ROOT / folder).rglob("__init__.py")}
    assert sorted(on_disk - listed) == [] and sorted(listed - on_disk) == []
    data = config["package-data"]
    for toml in [p for folder in import_graph.PLUGIN_DIRS for p in (ROOT / folder).rglob("*.toml")]:
        package_dir = next(d for d in [toml.parent, *toml.parents] if (d / "__init__.py").exists())
        package = import_graph.module_name(package_dir / "__init__.py")
        pattern = toml.relative_to(package_dir).as_posix()
        globbed = [g for g in data.get(package, []) if Path(pattern).match(g)]
        assert globbed, f"{toml.relative_to(ROOT)} is not in package-data of {package}"


#: single-component plugins whose module cannot carry the component's name: the embedder
#: ``openai`` shares its name with the LLM provider ``openai`` (another slot), and plugin names are unique
NAMED_APART = {"openai_embedder": "openai"}


def test_one_name_per_thing_for_every_builtin_plugin():
    from townsquare.plugin_manager import DEFAULT_PLUGINS, canonical_name, make_plugin_manager

    names = [canonical_name(m) for m in DEFAULT_PLUGINS]
    assert len(names) == len(set(names)), "two built-in plugins share a name"
    plugins = make_plugin_manager(autoload=False)
    wrong = []
    for name in names:
        info = plugins.infos[name]
        assert info.status == "loaded", (name, info.error)
        if len(info.components) == 1:
            component = info.components[0]["name"]
            if component != NAMED_APART.get(name, name):
                wrong.append(f"plugin {name} registers {component!r}")
    assert wrong == []


def test_the_tests_mirror_the_source_tree():
    """Every test sits in tests/<folder> where <folder> is a source folder (core/, cli/,
    plugins/recagent/, ...) or tools/; no test file is left at the top of tests/."""
    tests = ROOT / "tests"
    assert not sorted(p.name for p in tests.glob("test_*.py")), "tests at the top of tests/: move each beside its source folder"
    for path in tests.glob("*/**/test_*.py"):
        folder = path.parent.relative_to(tests)
        assert (ROOT / folder).is_dir(), f"{path.relative_to(ROOT)}: no source folder {folder}/ to mirror"
