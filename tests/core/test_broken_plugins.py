"""A broken third-party plugin never takes the CLI down.

The packages here are really installed: a folder on ``PYTHONPATH`` holding each package and
its ``*.dist-info`` (METADATA + entry_points.txt), the layout pip writes, so the CLI finds them
through ``importlib.metadata`` entry points exactly as it finds a pip-installed plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import read_table, scenario_text

BROKEN = {
    # fails to import
    "noimport": "raise ImportError('needs a library that is not installed')\n",
    # its registration hook raises
    "badreg": """
        from townsquare.api import hookimpl

        @hookimpl
        def townsquare_register_recommenders():
            raise RuntimeError('registration exploded')
    """,
    # a misspelt hook name
    "typo": """
        def townsquare_register_recomenders():
            return []
    """,
    # a component name another plugin already uses
    "dupe": """
        from townsquare.api import RecommenderSpec, hookimpl

        @hookimpl
        def townsquare_register_recommenders():
            return [RecommenderSpec("chronological", lambda config, ctx: None)]
    """,
    # its command registration raises
    "badcmd": """
        from townsquare.api import hookimpl

        @hookimpl
        def townsquare_register_commands(cli):
            raise RuntimeError('command exploded')
    """,
}

#: Components with *different* config models: legal, each reads [plugins.multi.COMPONENT].
MULTI = """
    from pydantic import BaseModel, ConfigDict
    from townsquare.api import MetricSpec, RecommenderSpec, hookimpl


    class NewestConfig(BaseModel):
        model_config = ConfigDict(extra="forbid")
        reverse: bool = False


    class CountConfig(BaseModel):
        model_config = ConfigDict(extra="forbid")
        scale: float = 1.0


    class Newest:
        def __init__(self, config):
            self.reverse = config.reverse

        def rank(self, viewer, candidates, limit, rng):
            ranked = sorted(candidates, key=lambda p: p.round, reverse=not self.reverse)
            return ranked[:limit]

        def get_state(self):
            return {}

        def set_state(self, state):
            pass


    class ScaledPosts:
        def __init__(self, config):
            self.scale = config.scale

        async def measure(self, view):
            return {"posts": self.scale * sum(1 for a in view.actions if a["kind"] == "post")}

        def get_state(self):
            return {}

        def set_state(self, state):
            pass


    @hookimpl
    def townsquare_register_recommenders():
        return [RecommenderSpec("multi_newest", lambda config, ctx: Newest(config), config_model=NewestConfig)]


    @hookimpl
    def townsquare_register_metrics():
        return [MetricSpec("multi_posts", lambda config, ctx: ScaledPosts(config), config_model=CountConfig)]
"""


#: A command written without ``common_options``: ``-p`` still works after its name.
HELLO = """
    import click
    from townsquare.api import hookimpl

    @hookimpl
    def townsquare_register_commands(cli):
        @cli.command("hello")
        @click.option("--loud", is_flag=True)
        def hello(loud):
            click.echo("HELLO" if loud else "hello")
"""


def install(site: Path, name: str, source: str) -> None:
    """Install package ``ts_NAME`` as distribution ``townsquare-NAME`` with entry point NAME."""
    package = site / f"ts_{name}"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(source))
    info = site / f"townsquare_{name}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: townsquare-{name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[townsquare]\n{name} = ts_{name}\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    for name, source in BROKEN.items():
        install(site, name, source)
    install(site, "multi", MULTI)
    install(site, "hello", HELLO)
    return site


def cli(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("TOWNSQUARE_DISABLE_PLUGIN_AUTOLOAD", None)
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True, env=env)


def warning_lines(stderr: str, plugin: str) -> list[str]:
    return [line for line in stderr.splitlines() if "plugin.failed" in line and f"plugin={plugin}" in line]


def test_every_broken_plugin_is_one_warning_and_help_still_works(site):
    out = cli(site, "--help")
    assert out.returncode == 0, out.stderr
    assert "run" in out.stdout and "plugins" in out.stdout
    for name in BROKEN:
        assert len(warning_lines(out.stderr, name)) == 1, (name, out.stderr)
    assert "plugin=multi" not in out.stderr  # different config models per component are legal


def test_plugins_lists_each_failure_with_its_reason(site):
    out = cli(site, "plugins", "--all", "--json")
    assert out.returncode == 0, out.stderr
    rows = {row["name"]: row for row in json.loads(out.stdout)}
    assert rows["noimport"]["status"] == "failed" and "needs a library" in rows["noimport"]["error"]
    assert rows["badreg"]["status"] == "failed" and "registration exploded" in rows["badreg"]["error"]
    assert rows["typo"]["status"] == "failed" and "townsquare_register_recomenders" in rows["typo"]["error"]
    assert rows["dupe"]["status"] == "failed" and "plugin 'chronological' and plugin 'dupe'" in rows["dupe"]["error"]
    assert rows["badcmd"]["status"] == "failed" and "command exploded" in rows["badcmd"]["error"]
    assert rows["dupe"]["components"] == [] and rows["badreg"]["components"] == []
    assert rows["multi"]["status"] == "loaded"
    assert {c["name"] for c in rows["multi"]["components"]} == {"multi_newest", "multi_posts"}


def test_a_run_works_beside_broken_plugins_with_per_component_settings(site, tmp_path):
    scenario = tmp_path / "s.toml"
    extra = ('[recommender]\nname = "multi_newest"\n'
             "[plugins.multi.multi_newest]\nreverse = true\n[plugins.multi.multi_posts]\nscale = 10.0\n")
    scenario.write_text(scenario_text(rounds=2, top='metrics = ["multi_posts"]', extra=extra))
    out = cli(site, "run", str(scenario), "--out", str(tmp_path / "r"), "--quiet")
    assert out.returncode == 0, out.stderr
    posts = [value for _, key, value in read_table(tmp_path / "r", "metrics") if key == "multi_posts.posts"]
    assert posts and all(value % 10 == 0 for value in posts) and sum(posts) > 0
    assert sum(len(warning_lines(out.stderr, name)) for name in BROKEN) == len(BROKEN)


def test_plugin_level_keys_are_refused_for_per_component_settings(site, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=1, extra="[plugins.multi]\nscale = 2.0\n"))
    out = cli(site, "run", str(scenario), "--out", str(tmp_path / "r"))
    assert out.returncode == 2
    assert ("plugins.multi: plugin 'multi' has per-component settings: 'scale' is not one of its components "
            "(write [plugins.multi.COMPONENT] with COMPONENT one of: multi_newest, multi_posts)") in out.stderr
    assert not (tmp_path / "r").exists()


def test_strict_plugins_fails_naming_the_plugin(site):
    out = cli(site, "--strict-plugins", "--help")
    assert out.returncode == 2
    assert out.stderr.startswith("error: plugin 'noimport' failed to load: ImportError: needs a library")
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_broken_plugin_disabled_with_p_no_is_quiet(site):
    out = cli(site, "plugins", *[arg for name in BROKEN for arg in ("-p", f"no:{name}")])
    assert out.returncode == 0, out.stderr
    assert "plugin.failed" not in out.stderr
    assert "multi 0.1.0" in out.stdout


def test_p_works_on_every_command_and_before_the_command(site):
    out = cli(site, "hello", "--loud", "-p", "no:badcmd", "--strict-plugins", "-p", "no:noimport", "-p", "no:badreg",
              "-p", "no:typo", "-p", "no:dupe")
    assert (out.returncode, out.stdout, out.stderr) == (0, "HELLO\n", "")
    out = cli(site, "-p", "no:random", "plugins", "--all")
    assert out.returncode == 0, out.stderr
    assert "random 0.1.0 (builtin: townsquare.recommenders.random) [disabled]" in out.stdout
    out = cli(site, "plugins", "-p", "no:inline")
    assert out.returncode == 2
    assert out.stderr.endswith("error: -p no:inline: 'inline' is a persona_source component of plugin 'persona_files', not a plugin; "
                               "disable the plugin with -p no:persona_files, or choose another persona_source in the scenario\n")


def test_resume_reports_a_broken_plugin_once(site, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=1))
    assert cli(site, "run", str(scenario), "--out", str(tmp_path / "r"), "--quiet").returncode == 0
    out = cli(site, "resume", str(tmp_path / "r"), "--quiet")
    assert out.returncode == 0, out.stderr
    for name in BROKEN:
        assert len(warning_lines(out.stderr, name)) == 1, (name, out.stderr)
