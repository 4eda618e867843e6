"""Shared fixtures. The townsquare pytest plugin (townsquare.testing) provides make_plugins,
write_scenario, run_scenario and scripted_llm."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The tests' folders mirror the source tree. The shared helpers (helpers.py, ga_support.py, ...)
# live here; a test may import another test module's data by its (unique) name.
TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS)] + sorted({str(p.parent) for p in TESTS.glob("*/**/test_*.py") if "data" not in p.parts})


@pytest.fixture(scope="session")
def empty_data_home(tmp_path_factory):
    return tmp_path_factory.mktemp("data-home")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, empty_data_home):
    """No plugin env vars leak in from the developer's shell, and no dataset the developer
    installed: ``data:`` paths resolve in an empty data home unless a test installs one."""
    for var in ("TOWNSQUARE_DISABLE_PLUGINS", "TOWNSQUARE_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TOWNSQUARE_DATA", str(empty_data_home))
    return os.environ


@pytest.fixture(autouse=True)
def restore_logging():
    """A test that runs the CLI in-process reconfigures structlog (``--quiet`` logs errors
    only); the next test starts from the suite's configuration again."""
    import structlog

    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    """A data home of this test's own (``$TOWNSQUARE_DATA``), empty, not made yet."""
    folder = tmp_path / "data-home"
    monkeypatch.setenv("TOWNSQUARE_DATA", str(folder))
    return folder
