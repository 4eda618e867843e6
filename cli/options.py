"""Options and checks the built-in commands share (third-party commands get them through
:mod:`townsquare.api.commands`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from townsquare.errors import UsageError


def common_options(func):
    """Options every command accepts (already applied by the time the command runs)."""
    func = click.option("-p", "--plugin", "plugin_options", multiple=True, metavar="NAME",
                        help="Load plugin NAME (entry-point name or module path); -p no:NAME disables it.")(func)
    func = click.option("--strict-plugins", is_flag=True, help="Fail when any plugin fails to load.")(func)
    func = click.option("--debug", is_flag=True, help="Show tracebacks.")(func)
    func = click.option("--log-json", is_flag=True, help="Log JSON lines to stderr.")(func)
    return func


def backend_options(func):
    """``--backend`` and ``--ray-address`` of run, resume and branch: ``[engine]`` settings."""
    func = click.option("--ray-address", default=None, metavar="ADDR",
                        help="With --backend ray: the cluster to join (ray://HOST:10001, auto); default: a local one.")(func)
    func = click.option("--backend", type=click.Choice(["local", "ray"]), default=None,
                        help="Where agents take their turns (engine.backend): this process, or Ray actors.")(func)
    return func


def backend_overrides(backend: str | None, ray_address: str | None) -> list[str]:
    """``--backend ray --ray-address A`` -> ``engine.backend="ray"``, ``engine.ray_address="A"``."""
    sets = [f'engine.backend="{backend}"'] if backend else []
    return sets + ([f"engine.ray_address={json.dumps(ray_address)}"] if ray_address else [])


def llm_overrides(spec: str | None) -> list[str]:
    """``--llm openai:gpt-4o-mini`` -> ``llm.name=openai``, ``llm.model=gpt-4o-mini``."""
    if spec is None:
        return []
    if not spec.strip() or not spec.partition(":")[0].strip():
        raise UsageError(f"--llm: {'empty' if not spec.strip() else f'no provider in {spec!r}'}; give PROVIDER[:MODEL], e.g. openai:gpt-4o-mini")
    name, _, model = spec.strip().partition(":")
    return [f"llm.name={name}"] + ([f'llm.model="{model}"'] if model else [])


def writable_file(path: str | Path, option: str) -> Path:
    """``path`` if a file can be written there (its folder made if missing); else a one-line
    error naming ``option``, before any work is done."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot make its folder {path.parent}: {exc.strerror}") from None
    existed = path.exists()
    try:  # opened, not judged by its mode bits: root passes os.access() where nothing can be made (/proc)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there: {exc.strerror}") from None
    if not existed:
        path.unlink(missing_ok=True)
    return path


def log_json() -> bool:
    """Whether ``--log-json`` was given (to the group or the command)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.params.get("log_json"):
            return True
        ctx = ctx.parent
    return False


def loaded_plugins():
    """The plugin set the command line loaded (:class:`townsquare.plugin_manager.Plugins`, the
    click context's object), or None when a command is invoked without one."""
    from townsquare.plugin_manager import Plugins

    ctx = click.get_current_context(silent=True)
    return ctx.obj if ctx is not None and isinstance(ctx.obj, Plugins) else None


def eval_group(cli: click.Group) -> click.Group:
    """The ``townsquare eval`` group that evaluation plugins add their subcommands to
    (``eval park``, ``eval discrimination``...), made by whichever plugin asks first."""
    group = cli.commands.get("eval")
    if not isinstance(group, click.Group):
        @cli.group("eval")
        def group() -> None:
            """Evaluate agents: PersonaGym, SoMe, Zhou et al.'s metrics, Park et al.'s interviews, RecAgent's discrimination test."""
    return group
