"""``townsquare report RUN``: an HTML page with plots about a run.

The page (default ``RUN/report.html``) is self-contained: images are embedded PNGs, there is
no script and nothing is fetched, so it opens offline. It leads with what happened (key
numbers, actions over time, the main metrics, groundedness), then the follower distribution
(Zhou et al. fig. 6), distinct-1/2 of posts and comments, persona similarity of engaged vs
browsed-only posts (Table 1, ΔBS), LLM calls, tokens and cost, and ends with the run's metadata
and slot table. The work lives in :mod:`townsquare.plugins.report.build`.
"""

from __future__ import annotations

from typing import Any

import click

from townsquare.api import hookimpl


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options

    @cli.command("report")
    @click.argument("run_dir", metavar="RUN")
    @click.option("--out", type=click.Path(dir_okay=False), default=None, help="HTML file to write (default RUN/report.html).")
    @click.option("--no-similarity", is_flag=True,
                  help="Skip persona similarity (it embeds every browsed post with the run's embedder; an API embedder costs money).")
    @common_options
    def report(run_dir: str, out: str | None, no_similarity: bool, plugin_options: tuple[str, ...], **_: Any) -> None:
        """Write an HTML report with plots about the run in directory RUN."""
        from .build import build_report

        path, notes = build_report(run_dir, out, with_similarity=not no_similarity, plugin_options=plugin_options)
        for line in notes:
            click.echo(f"note: {line}", err=True)
        click.echo(str(path))
