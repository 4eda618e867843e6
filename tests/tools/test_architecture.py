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
        "plugins/other.py:1: imports townsquare.plugins.thing.good (plugins import townsquare.api, townsquare.lib, townsquare.testing and their own package only)",
        "plugins/thing/bad.py:5: imports townsquare.launch.runner (plugins import townsquare.api, townsquare.lib, townsquare.testing and their own package only)",
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


def test_the_api_only_declares():
    """api/ re-exports and declares protocols; a helper there (a function, a working class, a
    constant) is named with its line."""
    assert import_graph.api_declarations() == []


def test_the_check_finds_a_helper_in_the_api(tmp_path, monkeypatch):
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "__init__.py").write_text(
        '"""The API."""\nfrom typing import Protocol\nfrom ..llm import LLMClient\n__all__ = ["LLMClient"]\n\n'
        "class Clock(Protocol):\n    def now(self) -> int: ...\n\n"
        "def helper():\n    return 1\n\nLIMIT = 3\n")
    (tmp_path / "api" / "stats.py").write_text("def mean(xs):\n    return sum(xs) / len(xs)\n")
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    assert [p.split(" is not")[0] for p in import_graph.api_declarations()] == [
        "api/__init__.py:9: helper", "api/__init__.py:12: Assign", "api/stats.py:1: mean"]


def test_a_shared_helper_with_one_user_is_found(tmp_path, monkeypatch):
    for folder in ("lib", "plugins/a", "plugins/b"):
        (tmp_path / folder).mkdir(parents=True)
    for init in ("plugins/a", "plugins/b"):
        (tmp_path / init / "__init__.py").write_text("")
    (tmp_path / "lib" / "shared.py").write_text("")
    (tmp_path / "lib" / "alone.py").write_text("")
    (tmp_path / "plugins" / "a" / "x.py").write_text("from townsquare.lib.shared import f\nfrom townsquare.lib.alone import g\n")
    (tmp_path / "plugins" / "a" / "y.py").write_text("from townsquare.lib.alone import g\n")
    (tmp_path / "plugins" / "b" / "z.py").write_text("from townsquare.lib.shared import f\n")
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    assert import_graph.single_user_helpers() == [
        "townsquare.lib.alone: used by townsquare.plugins.a only; move it next to its user"]


def test_one_module_name_and_one_import_name_per_thing(tmp_path, monkeypatch):
    """Two ``progress`` modules outside the plugins, or the kernel's ``state`` imported as
    ``state_codec``, are found."""
    for folder in ("core", "cli", "plugins"):
        (tmp_path / folder).mkdir()
    (tmp_path / "core" / "progress.py").write_text("")
    (tmp_path / "core" / "state.py").write_text("")
    (tmp_path / "core" / "rundir.py").write_text("from . import state as state_codec\nfrom .state import dumps as d\n")
    (tmp_path / "cli" / "progress.py").write_text("")
    (tmp_path / "plugins" / "progress.py").write_text("")  # a plugin's own name: not the front ends' business
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    assert import_graph.repeated_names() == ["core/progress.py and cli/progress.py: one module name, two modules"]
    assert [p.split(" (")[0] for p in import_graph.renamed_imports()] == [
        "core/rundir.py:1: imports module townsquare.state as state_codec"]


def test_the_check_finds_a_command_plugin_imported_outside_the_commands(tmp_path, monkeypatch):
    """What plugins can reach (the API, lib/, launch/) importing a built-in command's module
    would load it under ``-p no:NAME`` (api.commands once imported the interview command)."""
    for folder in ("core", "api/commands", "commands", "notebook"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "core" / "plugin_manager.py").write_text('DEFAULT_PLUGINS = ("townsquare.commands.interview",)\n')
    (tmp_path / "commands" / "interview.py").write_text("")
    (tmp_path / "api" / "commands" / "__init__.py").write_text("from townsquare.commands.interview import interview\n")
    (tmp_path / "notebook" / "__init__.py").write_text("from townsquare.commands.interview import interview\n")
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    assert [p.split(" (")[0] for p in import_graph.forbidden_imports()] == [
        "api/commands/__init__.py:1: imports townsquare.commands.interview"]


def test_every_source_folder_is_a_box_of_its_own_in_the_drawing():
    """The Ray backend, the launch glue and the shared helpers are drawn outside the kernel box:
    the page shows the imports the code has."""
    assert import_graph.box("townsquare.scaleout.ray_shard") == "townsquare.scaleout"
    assert import_graph.box("townsquare.launch.runner") == "townsquare.launch"
    assert import_graph.box("townsquare.lib.stats") == "townsquare.lib"
    assert import_graph.box("townsquare.api.commands") == "townsquare.api.commands"
    assert import_graph.box("townsquare.engine") == "kernel"
    kernel = [m for m in import_graph.graph() if import_graph.box(m) == "kernel"]
    assert all(import_graph.modules()[m].parts[-2 if m.count(".") == 1 else -3] == "core" for m in kernel if m != "townsquare")


def test_the_kernel_stays_under_its_size():
    """DESIGN.md: the kernel (core/) stays at or under 6,500 lines."""
    lines = sum(len(path.read_text().splitlines()) for path in (ROOT / "core").rglob("*.py"))
    assert lines <= 6500, f"core/ is {lines} lines"
