"""pytest fixtures for townsquare and its plugins (installed as the ``townsquare`` pytest plugin).

* ``make_plugins(*objects, enable=(), disable=(), autoload=False, strict=True)``: a plugin set
  with the built-ins plus inline plugin objects (modules, classes or instances with hook
  functions). A module is registered under its own name (``mytool.recency`` -> ``recency``),
  anything else under its ``plugin_name`` attribute or ``inlineN``; ``[plugins.NAME]`` in a
  scenario uses that name.
* ``write_scenario(text, name="scenario.toml")``: write a scenario file into a temp folder.
* ``run_scenario(path, *, plugins=None, out=None, **options)``: run it into a temporary run
  directory (with the scripted test LLM enabled unless ``plugins`` is given); returns
  ``(run_dir, summary)`` where ``run_dir`` is a :class:`townsquare.rundir.RunDir` (``.path`` is
  the folder, ``.events_path`` the SQLite file) and ``summary`` a
  :class:`townsquare.lifecycle.RunSummary`.
* ``scripted_llm``: a :class:`~townsquare.testing.scripted.ScriptedLLM` (tests only).
"""

from __future__ import annotations

import itertools
import types
from pathlib import Path
from typing import Any

import pytest

SCRIPTED_MODULE = "townsquare.testing.scripted"


def pytest_configure(config):
    """Keep component debug logs out of test output (warnings still show)."""
    from townsquare.lib import logs

    logs.configure(level="warning")


def inline_plugin_name(obj: Any) -> str | None:
    """The name an inline plugin is registered under: its ``plugin_name`` attribute, or for a
    module the last part of its dotted name (what ``DEFAULT_PLUGINS`` and ``-p`` would call
    it), so ``[plugins.NAME]`` settings and ``-p no:NAME`` work in tests as in real runs."""
    name = getattr(obj, "plugin_name", None)
    if name is None and isinstance(obj, types.ModuleType):
        name = obj.__name__.rsplit(".", 1)[-1]
    return name


@pytest.fixture
def make_plugins():
    from townsquare.plugin_manager import make_plugin_manager

    counter = itertools.count(1)

    def factory(*objects: Any, enable=(), disable=(), autoload: bool = False, strict: bool = True):
        extra, taken = [], set()
        for obj in objects:
            name = inline_plugin_name(obj) or f"inline{next(counter)}"
            while name in taken:
                name = f"{name}_{next(counter)}"
            taken.add(name)
            extra.append((name, obj))
        return make_plugin_manager(enable=enable, disable=disable, autoload=autoload, strict=strict, extra_plugins=extra)

    return factory


@pytest.fixture
def write_scenario(tmp_path: Path):
    def write(text: str, name: str = "scenario.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def run_scenario(tmp_path: Path, make_plugins):
    from townsquare.launch.runner import start_run

    counter = itertools.count(1)

    def run(path: Path, *, plugins=None, out: Path | None = None, **options: Any):
        plugins = plugins or make_plugins(enable=[SCRIPTED_MODULE])
        out = out or tmp_path / f"run{next(counter)}"
        return start_run(path, plugins=plugins, out=out, **options)

    return run


@pytest.fixture
def scripted_llm():
    from townsquare.testing.scripted import ScriptedLLM

    return ScriptedLLM()
