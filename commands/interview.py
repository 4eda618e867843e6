"""``townsquare interview RUN AGENT "question"``: ask an agent (or ``--all``) a question at a
round; the interview itself is :mod:`townsquare.launch.interviews`, which the notebook and the
dashboard use too. ``-p no:interview`` removes the command."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import click

from townsquare.api import hookimpl
from townsquare.cli.options import common_options, writable_file
from townsquare.errors import UsageError


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.command("interview")
    @click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
    @click.argument("words", nargs=-1, required=True, metavar="[AGENT] QUESTION")
    @click.option("--round", "round", type=int, default=None, help="Ask about the state after this round (default: the newest checkpoint).")
    @click.option("--population", default=None, help="With --all: only this population.")
    @click.option("--all", "all_agents", is_flag=True, help="Interview every agent (of --population).")
    @click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None,
                  help="Write the answers as CSV (default with --all: RUN_DIR/interviews-<time>.csv).")
    @click.option("--memories", type=click.IntRange(min=0), default=8, show_default=True, help="Memories recalled for the question.")
    @common_options
    def interview_command(run_dir: str, words: tuple[str, ...], round: int | None, population: str | None, all_agents: bool,
                          csv_path: str | None, memories: int, **_: Any) -> None:
        """Ask an agent (or --all) QUESTION; it answers from its persona and memory at a round."""
        if all_agents:
            if len(words) != 1:
                raise UsageError("with --all give only the question")
            agents, question = [], words[0]
        else:
            if len(words) != 2:
                raise UsageError('give AGENT and "QUESTION" (quote the question)')
            agents, question = [words[0]], words[1]
        if csv_path:
            writable_file(csv_path, "--csv")  # before any question is asked (and paid for)
        from townsquare.launch.interviews import interview, write_csv

        answers = interview(run_dir, question, agents=agents, population=population, all_agents=all_agents, round=round,
                            memories=memories)
        for answer in answers:
            click.echo(f"{answer.agent_id} (round {answer.round}): {answer.answer}")
        if all_agents or csv_path:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            click.echo(f"answers: {write_csv(answers, csv_path or Path(run_dir) / f'interviews-{stamp}.csv')}", err=True)
