"""``townsquare plugins``: the plugins, their hooks and the components they provide."""

from __future__ import annotations

import json
from typing import Any

import click

from townsquare.api import hookimpl
from townsquare.cli.options import common_options, loaded_plugins


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.command("plugins")
    @click.option("--all", "show_all", is_flag=True, help="Also list disabled and failed plugins.")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @common_options
    def plugins_command(show_all: bool, as_json: bool, **_: Any) -> None:
        """List plugins, their hooks and the components they provide."""
        plugins = loaded_plugins()
        infos = plugins.infos.values() if plugins is not None else ()
        rows = [vars(info) for info in infos if show_all or info.status == "loaded"]
        if as_json:
            click.echo(json.dumps(rows, indent=2))
            return
        for row in rows:
            status = "" if row["status"] == "loaded" else f" [{row['status']}{': ' + row['error'] if row['error'] else ''}]"
            click.echo(f"{row['name']} {row['version']} ({row['source']}: {row['module']}){status}")
            for comp in row["components"]:
                click.echo(f"    {comp['slot']}: {comp['name']}")
            if row["hooks"]:
                click.echo(f"    hooks: {', '.join(row['hooks'])}")
