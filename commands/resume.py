"""``townsquare resume RUN_DIR``: continue a run from its newest checkpoint."""

from __future__ import annotations

from typing import Any

import click

from townsquare.api import hookimpl
from townsquare.cli.options import backend_options, backend_overrides, common_options
from townsquare.cli.run_output import RunLines, report_run


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.command("resume")
    @click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                  help="Change a setting that steers the machinery (budget, endpoint, concurrency...) or extend rounds.")
    @click.option("--accept-changed-inputs", is_flag=True,
                  help="Go on with input files changed since the run recorded them (the manifest records it).")
    @click.option("--quiet", is_flag=True, help="No progress bar or progress lines.")
    @backend_options
    @common_options
    def resume(run_dir: str, overrides: tuple[str, ...], accept_changed_inputs: bool, quiet: bool, backend: str | None,
               ray_address: str | None, **_: Any) -> None:
        """Continue RUN_DIR from its newest checkpoint, as it was recorded."""
        from townsquare.launch.runner import resume_run

        with RunLines(quiet) as progress:
            path, summary = resume_run(run_dir, overrides=[*backend_overrides(backend, ray_address), *overrides], progress=progress.update,
                                       on_ready=progress.announce, accept_changed_inputs=accept_changed_inputs, live=progress.live)
        report_run(path.path, summary)
