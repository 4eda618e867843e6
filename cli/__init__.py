"""The ``townsquare`` command line: the entry point, the group and its options.

Every command is a plugin that adds itself through ``townsquare_register_commands``, the
built-in ones (:mod:`townsquare.commands`: run, resume, branch, ...) as well as third-party
ones, so ``-p no:NAME`` removes a command. Because a disabled plugin must never be imported,
``-p``/``--strict-plugins`` are read from the command line before the CLI is built (as pytest
does); the subcommands also declare them so ``--help`` shows them. Options the commands share
are in :mod:`townsquare.cli.options`, what a run prints in :mod:`townsquare.cli.run_output`.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable

import click
import structlog

from townsquare import __version__
from townsquare.lib import logs
from townsquare.errors import RunStopped, UsageError
from townsquare.plugin_manager import COMMAND_LINE_PLUGINS, Plugins, make_plugin_manager, parse_plugin_options
from townsquare.cli.options import common_options
from townsquare.secrets import redact_text

log = structlog.get_logger("townsquare.cli")


#: ``--llm NAME`` / ``--judge NAME`` naming a test model loads the testing kit's plugin for it:
#: the run is announced as a TEST run (:func:`llm_banner`), and the option is recorded in the
#: manifest like any ``-p``, so a resume finds the model again. Never chosen automatically.
TEST_MODEL_PLUGINS = {"scripted": "townsquare.testing.scripted", "oracle": "townsquare.testing.oracle"}
_MODEL_OPTIONS = ("--llm", "--judge")


def _early_options(argv: list[str]) -> dict[str, Any]:
    """``-p``, ``--strict-plugins``, ``--debug``, ``--log-json`` from anywhere in argv, and the
    test models' plugins for ``--llm scripted`` / ``--llm oracle`` (:data:`TEST_MODEL_PLUGINS`)."""
    found: dict[str, Any] = {"plugins": [], "strict": False, "debug": False, "log_json": False}
    models: list[str] = []
    it = iter(range(len(argv)))
    for i in it:
        arg = argv[i]
        if arg == "--":
            break
        if arg in ("-p", "--plugin") and i + 1 < len(argv):
            found["plugins"].append(argv[i + 1])
            next(it, None)
        elif arg.startswith("-p") and len(arg) > 2 and not arg.startswith("--"):
            found["plugins"].append(arg[2:])
        elif arg.startswith("--plugin="):
            found["plugins"].append(arg.split("=", 1)[1])
        elif arg in _MODEL_OPTIONS and i + 1 < len(argv):
            models.append(argv[i + 1])
        elif arg.startswith(tuple(f"{option}=" for option in _MODEL_OPTIONS)):
            models.append(arg.split("=", 1)[1])
        elif arg == "--strict-plugins":
            found["strict"] = True
        elif arg == "--debug":
            found["debug"] = True
        elif arg == "--log-json":
            found["log_json"] = True
    found["plugins"] += test_model_plugins(models, found["plugins"])
    return found


def test_model_plugins(models: Iterable[str | None], plugins: Iterable[str] = ()) -> list[str]:
    """The testing kit's plugins for the test models named in ``models`` (``--llm`` /
    ``--judge`` values, :data:`TEST_MODEL_PLUGINS`) that ``plugins`` does not name yet."""
    found: list[str] = []
    named = tuple(plugins)
    for model in models:
        module = TEST_MODEL_PLUGINS.get((model or "").partition(":")[0].strip())
        if module is not None and module not in (*named, *found):
            found.append(module)
    return found


def _accept_plugin_options(group: click.Group, plugin_options: tuple[str, ...]) -> None:
    """Give every command (third-party ones and those of subgroups included) the options
    ``_early_options`` already applied, so ``-p``/``--strict-plugins`` work after any command
    name, and hand each the whole ``-p`` list as ``plugin_options``, wherever on the command
    line the options stood: ``townsquare -p X run ...`` records X in the manifest as
    ``townsquare run ... -p X`` does."""
    wanted = common_options(lambda **_: None).__click_params__
    for command in list(group.commands.values()):
        if isinstance(command, click.Group):
            _accept_plugin_options(command, plugin_options)
        if command.callback is None:
            continue
        have = {param.name for param in command.params}
        missing = [param for param in wanted if param.name not in have]
        command.params.extend(missing)
        callback, dropped = command.callback, {param.name for param in missing}

        def call(*a: Any, _cb=callback, _drop=dropped, **kw: Any) -> Any:
            if "plugin_options" in kw:
                kw["plugin_options"] = plugin_options
            return _cb(*a, **{k: v for k, v in kw.items() if k not in _drop})

        command.callback = call


def build_cli(plugins: Plugins) -> click.Group:
    """The ``townsquare`` group with the commands of every loaded plugin (a command plugin that
    raises is reported and skipped, :meth:`Plugins.call_each`)."""
    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="townsquare")
    @click.option("--debug", is_flag=True, help="Show tracebacks.")
    @click.option("--log-json", is_flag=True, help="Log JSON lines to stderr.")
    @click.option("-p", "--plugin", "plugin_options", multiple=True, metavar="NAME",
                  help="Load plugin NAME (entry-point name or module path); -p no:NAME disables it.")
    @click.option("--strict-plugins", is_flag=True, help="Fail when any plugin fails to load.")
    def cli(debug: bool, log_json: bool, **_: Any) -> None:
        """Simulate social-media users with LLM persona agents."""

    plugins.call_each("townsquare_register_commands", cli=cli)
    return cli


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    early = _early_options(argv)
    logs.configure(json_lines=early["log_json"], level=os.environ.get("TOWNSQUARE_LOG_LEVEL", "warning" if not early["debug"] else "debug"))
    given = COMMAND_LINE_PLUGINS.set(tuple(early["plugins"]))
    try:
        _main(argv, early)
    finally:
        COMMAND_LINE_PLUGINS.reset(given)


def _main(argv: list[str], early: dict[str, Any]) -> None:
    try:
        enable, disable = parse_plugin_options(early["plugins"])
        plugins = make_plugin_manager(enable=enable, disable=disable, strict=early["strict"])
        cli = build_cli(plugins)
        _accept_plugin_options(cli, tuple(early["plugins"]))
        cli.main(args=argv, prog_name="townsquare", standalone_mode=False, obj=plugins)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        # one line like every other input error, with where to look for help
        command = exc.ctx.command_path if exc.ctx is not None else "townsquare"
        click.echo(f"error: {redact_text(exc.format_message())} (see: {command} --help)", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"error: {redact_text(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except RunStopped as exc:
        if not getattr(exc, "reported", False):  # stopped while building: nothing printed it yet
            click.echo(f"stopped: {redact_text(exc.reason)}", err=True)
        sys.exit(exc.exit_code)
    except UsageError as exc:
        if early["debug"]:
            _traceback()
        click.echo(f"error: {redact_text(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        # a file the user named that cannot be written or read (``--out`` in a read-only
        # place): one line naming it; an OSError about no file is a bug, shown as one
        if exc.filename is None:
            _traceback()
            sys.exit(1)
        if early["debug"]:
            _traceback()
        click.echo(f"error: {redact_text(str(exc.filename))}: {exc.strerror or exc}", err=True)
        sys.exit(2)
    except Exception:
        # a bug, not a user error: the traceback is shown, with any known secret scrubbed
        # (an exception may quote a server that echoed the API key)
        _traceback()
        sys.exit(1)


def _traceback() -> None:
    """The exception being handled, as a traceback with every known secret scrubbed (``--debug``
    too: an endpoint URL or an error may carry a key)."""
    import traceback

    click.echo(redact_text(traceback.format_exc()).rstrip(), err=True)


if __name__ == "__main__":  # pragma: no cover
    main()
