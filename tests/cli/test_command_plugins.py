"""Every built-in command is a plugin: ``-p no:NAME`` removes its command from ``townsquare
--help`` (and leaves its module unregistered), and every other command still works."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from townsquare.cli import build_cli, main
from townsquare.plugin_manager import make_plugin_manager

#: built-in plugin -> the top-level commands it adds
COMMAND_PLUGINS = {
    "run": {"run"}, "resume": {"resume"}, "branch": {"branch"}, "interview": {"interview"}, "compare": {"compare"},
    "ablate": {"ablate"}, "sweep": {"sweep"}, "export": {"export"}, "plugins": {"plugins"},
    "llm_commands": {"estimate", "replay"}, "run_report": {"report"}, "data": {"data"},
    "mastodon": {"mastodon"}, "recsys": {"recbole"},
}


def listed_commands(capsys, *args: str) -> set[str]:
    """The command names ``townsquare ARGS --help`` lists."""
    main([*args, "--help"])
    text = capsys.readouterr().out
    section = text.split("Commands:\n", 1)[1]
    return {line.split()[0] for line in section.splitlines() if line.startswith("  ") and not line.startswith("   ")}


@pytest.fixture(scope="module")
def every_command() -> set[str]:
    return set(build_cli(make_plugin_manager(autoload=False)).commands)


def test_the_table_names_every_built_in_command(every_command):
    assert set().union(*COMMAND_PLUGINS.values()) <= every_command
    assert {"run", "resume", "branch", "interview", "compare", "ablate", "export", "plugins"} <= every_command


@pytest.mark.parametrize("name", sorted(COMMAND_PLUGINS))
def test_disabling_a_command_plugin_removes_its_commands_and_keeps_the_others(name, every_command):
    plugins = make_plugin_manager(disable=[name], autoload=False)
    assert plugins.infos[name].status == "disabled" and plugins.pm.get_plugin(name) is None
    cli = build_cli(plugins)
    assert set(cli.commands) == every_command - COMMAND_PLUGINS[name]
    for other in sorted(set(cli.commands)):
        result = CliRunner().invoke(cli, [other, "--help"], obj=plugins)
        assert result.exit_code == 0, (other, result.output)


def test_no_ablate_on_the_command_line(capsys):
    """The command line the docs show: ``townsquare -p no:ablate --help`` lists no ``ablate``."""
    listed = listed_commands(capsys, "-p", "no:ablate")
    assert "ablate" not in listed and {"run", "branch", "compare"} <= listed
    assert "ablate" in listed_commands(capsys)


def test_a_disabled_command_is_never_imported():
    """``-p no:ablate`` leaves ``townsquare.commands.ablate`` unimported (a fresh interpreter:
    this one has imported it already)."""
    code = ("import sys\nfrom townsquare.cli import main\nmain(['-p', 'no:ablate', '--help'])\n"
            "print('imported' if 'townsquare.commands.ablate' in sys.modules else 'not imported', file=sys.stderr)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "not imported"
