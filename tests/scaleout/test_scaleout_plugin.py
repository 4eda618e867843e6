"""The Ray backend is a built-in plugin (``scaleout``) the kernel reaches only through
``townsquare_engine_backend``: disabling it leaves Ray unimported and a Ray run refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from townsquare.api import Turns, TurnsBackend
from townsquare.errors import UsageError
from townsquare.plugin_manager import make_plugin_manager
from townsquare.launch.runner import engine_backend


def test_the_scaleout_plugin_offers_ray_and_nothing_else():
    plugins = make_plugin_manager(autoload=False)
    assert plugins.hook.townsquare_engine_backend(name="dask") is None
    backend = engine_backend(plugins, "ray")
    assert backend.__module__ == "townsquare.scaleout.ray_backend"


def test_the_ray_backend_implements_the_declared_turns_contract():
    """What ``townsquare_engine_backend`` returns is a TurnsBackend, and what it starts is Turns
    (the protocols' every method, by name)."""
    from townsquare.scaleout.ray_backend import RayBackend

    assert isinstance(RayBackend, TurnsBackend)
    missing = [name for name in ("take_turns", "applied", "round_applied", "take_reflections", "on_agent", "checkpoint",
                                 "processes", "aclose") if not callable(getattr(RayBackend, name, None))]
    assert missing == [] and issubclass(RayBackend, Turns)


def test_without_the_plugin_a_ray_run_is_refused_in_one_line_naming_it():
    plugins = make_plugin_manager(autoload=False, disable=["scaleout"])
    with pytest.raises(UsageError, match=r"backend = 'ray'.*-p no:scaleout"):
        engine_backend(plugins, "ray")


def test_loading_the_plugins_does_not_import_ray_or_the_backend():
    code = ("import sys\nfrom townsquare.plugin_manager import make_plugin_manager\nmake_plugin_manager(autoload=False)\n"
            "print(sorted(m for m in ('ray', 'townsquare.scaleout.ray_backend', 'townsquare.scaleout.ray_shard') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
