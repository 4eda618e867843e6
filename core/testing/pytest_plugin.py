"""pytest fixtures for townsquare and its plugins (installed as the ``townsquare`` pytest plugin).

* ``make_plugins(*objects, enable=(), disable=(), autoload=False)``: a plugin set with the
  built-ins plus inline plugin objects (modules, classes or instances with hook functions).
* ``write_scenario(text, name="scenario.toml")``: write a scenario file into a temp folder.
* ``run_scenario(path, **options)``: run it into a temporary run directory; returns
  ``(run_dir, summary)``.
* ``scripted_llm``: a :class:`~townsquare.testing.scripted.ScriptedLLM` (tests only).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

SCRIPTED_MODULE = "townsquare.testing.scripted"


def pytest_configure(config):
    """Keep component debug logs out of test output (warnings still show)."""
    from townsquare import logs

    logs.configure(level="warning")


@pytest.fixture
def make_plugins():
    from townsquare.plugin_manager import make_plugin_manager

    counter = itertools.count(1)

    def factory(*objects: Any, enable=(), disable=(), autoload: bool = False, strict: bool = True):
        extra = [(getattr(obj, "plugin_name", f"inline{next(counter)}"), obj) for obj in objects]
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
    from townsquare.runner import start_run

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
