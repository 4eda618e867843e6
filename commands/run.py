"""``townsquare run SCENARIO``: a scenario into a new run directory (``--play AGENT``: take that
agent's turns in the terminal, :mod:`townsquare.commands.play`)."""

from __future__ import annotations

from typing import Any

import click

from townsquare.api import hookimpl
from townsquare.cli.options import backend_options, backend_overrides, common_options, llm_overrides, loaded_plugins
from townsquare.cli.run_output import RunLines, report_run


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.command("run")
    @click.argument("scenario", type=click.Path(dir_okay=False))
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key (dotted path).")
    @click.option("--seed", type=int, default=None, help="Override the scenario's seed.")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Run directory (default runs/<name>).")
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None,
                  help="Point the run at an LLM without editing the scenario, e.g. openai:gpt-4o-mini or local.")
    @click.option("--quiet", is_flag=True, help="No progress bar or progress lines.")
    @click.option("--play", "play", default=None, metavar="AGENT", help="Take AGENT's turns yourself, in the terminal.")
    @backend_options
    @common_options
    def run(scenario: str, overrides: tuple[str, ...], seed: int | None, out: str | None, llm_spec: str | None, quiet: bool,
            play: str | None, plugin_options, backend: str | None, ray_address: str | None, **_: Any) -> None:
        """Run SCENARIO (a TOML file) into a new run directory."""
        from townsquare.launch.runner import start_run

        played = play_options(play)
        with RunLines(quiet or play is not None) as progress:
            run_dir, summary = start_run(
                scenario, overrides=[*llm_overrides(llm_spec), *backend_overrides(backend, ray_address), *overrides], seed=seed, out=out,
                plugin_options=plugin_options, plugins=loaded_plugins(), progress=progress.update, on_ready=progress.announce, live=progress.live,
                **played,
            )
        report_run(run_dir.path, summary)


def play_options(agent: str | None) -> dict[str, Any]:
    """``run --play AGENT``: the seat that hands AGENT's turns to the terminal."""
    if agent is None:
        return {}
    from townsquare.commands.play import PlayerSeat

    return {"seat": PlayerSeat(agent)}
