"""The ``townsquare`` command line.

Plugins add commands through ``townsquare_register_commands``. Because a disabled plugin must
never be imported, ``-p``/``--strict-plugins`` are read from the command line before the CLI is
built (as pytest does); the subcommands also declare them so ``--help`` shows them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click
import structlog

from townsquare import __version__, logs
from townsquare.errors import RunStopped, UsageError
from townsquare.commands.export import FORMATS, export_run
from townsquare.plugin_manager import COMMAND_LINE_PLUGINS, Plugins, make_plugin_manager, parse_plugin_options
from townsquare.progress import AblateProgress, RunProgress, progress_mode
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
    for model in models:
        module = TEST_MODEL_PLUGINS.get(model.partition(":")[0].strip())
        if module is not None and module not in found["plugins"]:
            found["plugins"].append(module)
    return found


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
    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="townsquare")
    @click.option("--debug", is_flag=True, help="Show tracebacks.")
    @click.option("--log-json", is_flag=True, help="Log JSON lines to stderr.")
    @click.option("-p", "--plugin", "plugin_options", multiple=True, metavar="NAME",
                  help="Load plugin NAME (entry-point name or module path); -p no:NAME disables it.")
    @click.option("--strict-plugins", is_flag=True, help="Fail when any plugin fails to load.")
    def cli(debug: bool, log_json: bool, **_: Any) -> None:
        """Simulate social-media users with LLM persona agents."""

    @cli.command()
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
        from townsquare.runner import llm_overrides, start_run

        played = _play_options(play)
        with _progress(quiet or play is not None) as progress:
            run_dir, summary = start_run(
                scenario, overrides=[*llm_overrides(llm_spec), *backend_overrides(backend, ray_address), *overrides], seed=seed, out=out,
                plugin_options=plugin_options, plugins=plugins, progress=progress.update, on_ready=progress.announce, **played,
            )
        _report(run_dir.path, summary)

    @cli.command()
    @click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Change a scenario key from here on.")
    @click.option("--quiet", is_flag=True, help="No progress bar or progress lines.")
    @backend_options
    @common_options
    def resume(run_dir: str, overrides: tuple[str, ...], quiet: bool, backend: str | None, ray_address: str | None, **_: Any) -> None:
        """Continue RUN_DIR from its newest checkpoint."""
        from townsquare.runner import resume_run

        with _progress(quiet) as progress:
            path, summary = resume_run(run_dir, overrides=[*backend_overrides(backend, ray_address), *overrides], progress=progress.update,
                                       on_ready=progress.announce)
        _report(path.path, summary)

    @cli.command("export")
    @click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
    @click.option("--format", "fmt", type=click.Choice(FORMATS), default="csv", show_default=True)
    @click.option("--out", type=click.Path(file_okay=False), required=True, help="Folder for the table files.")
    @common_options
    def export(run_dir: str, fmt: str, out: str, **_: Any) -> None:
        """Write the tables agents, posts, actions, follows, llm_calls and metrics."""
        from townsquare.rundir import RunDir

        run = RunDir.open(run_dir)
        if not run.events_path.is_file():
            raise UsageError(f"{run_dir}: no events.sqlite yet (the run has not started): nothing to export")
        for path in export_run(run.events_path, fmt, Path(out)):
            click.echo(str(path))

    @cli.command("plugins")
    @click.option("--all", "show_all", is_flag=True, help="Also list disabled and failed plugins.")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @common_options
    def plugins_command(show_all: bool, as_json: bool, **_: Any) -> None:
        """List plugins, their hooks and the components they provide."""
        rows = [vars(info) for info in plugins.infos.values() if show_all or info.status == "loaded"]
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

    for add_command in (_branch_command, _compare_command, _interview_command, _ablate_command):
        add_command(cli)
    return cli


def _play_options(agent: str | None) -> dict[str, Any]:
    """``run --play AGENT``: the simulation that hands AGENT's turns to the terminal."""
    if agent is None:
        return {}
    from townsquare.commands.play import PlaySimulation

    return {"simulation_class": PlaySimulation, "play": agent}


def _branch_command(cli: click.Group) -> None:
    @cli.command("branch")
    @click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
    @click.option("--at", "at", type=int, required=True, help="First round that plays differently (the branch starts from the checkpoint after AT-1).")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Branch directory (with --recommenders: a folder of branches).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Change a scenario key from round AT on.")
    @click.option("--persona", "personas", multiple=True, metavar="AGENT=FILE", help="Replace an agent's persona (JSON or one sentence a line).")
    @click.option("--post", "posts", multiple=True, metavar="AUTHOR=TEXT", help="Post TEXT as an agent or an outside account.")
    @click.option("--memory", "memories", multiple=True, metavar="AGENT=TEXT", help="Hand an observation to an agent's memory.")
    @click.option("--follow", "follows", multiple=True, metavar="A=B", help="Make agent A follow agent B.")
    @click.option("--unfollow", "unfollows", multiple=True, metavar="A=B", help="Make agent A unfollow agent B.")
    @click.option("--recommenders", default=None, metavar="A,B,...", help="One branch per recommender, from the same state.")
    @click.option("--quiet", is_flag=True, help="No progress bar or progress lines.")
    @backend_options
    @common_options
    def branch(run_dir: str, at: int, out: str | None, overrides, personas, posts, memories, follows, unfollows,
               recommenders: str | None, quiet: bool, plugin_options, backend: str | None, ray_address: str | None, **_: Any) -> None:
        """Continue RUN_DIR from round AT with interventions, into a new run directory."""
        from townsquare.commands.branch import branch_run, parse_interventions

        changes = parse_interventions([*(("persona", v) for v in personas), *(("memory", v) for v in memories),
                                       *(("follow", v) for v in follows), *(("unfollow", v) for v in unfollows),
                                       *(("post", v) for v in posts)])
        overrides = [*backend_overrides(backend, ray_address), *overrides]
        variants: list[tuple[str | None, list[str], str | None]] = [(None, list(overrides), out)]
        if recommenders:
            names = [n.strip() for n in recommenders.split(",") if n.strip()]
            variants = [(n, [*overrides, f'recommender={{ name = "{n}" }}'], str(Path(out) / n) if out else None) for n in names]
        for label, sets, target in variants:
            with _progress(quiet, label or "rounds") as progress:
                path, summary = branch_run(run_dir, at, target, overrides=sets, plugin_options=plugin_options,
                                           interventions=changes, progress=progress.update, on_ready=progress.announce, label=label)
            _report(path.path, summary)
            click.echo(str(path.path))


def _compare_command(cli: click.Group) -> None:
    @cli.command("compare")
    @click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True))
    @click.option("--metric", "metrics", multiple=True, metavar="NAME", help="Only these metrics (default: all).")
    @click.option("--out", type=click.Path(file_okay=False), default=".", show_default=True,
                  help="Folder for compare.csv and compare.png.")
    @common_options
    def compare(run_dirs: tuple[str, ...], metrics: tuple[str, ...], out: str, **_: Any) -> None:
        """Metric means after the branch point, side by side, with deltas against the first run."""
        from townsquare.commands.compare import compare_runs, format_table, plot, write_csv

        comparison = compare_runs(run_dirs, metrics)
        click.echo(format_table(comparison))
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        click.echo(f"table: {write_csv(comparison, folder / 'compare.csv')}", err=True)
        click.echo(f"plot: {plot(comparison, folder / 'compare.png')}", err=True)


def _interview_command(cli: click.Group) -> None:
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
        from datetime import datetime

        from townsquare.commands.interview import interview, write_csv

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
        answers = interview(run_dir, question, agents=agents, population=population, all_agents=all_agents, round=round,
                            memories=memories)
        for answer in answers:
            click.echo(f"{answer.agent_id} (round {answer.round}): {answer.answer}")
        if all_agents or csv_path:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            click.echo(f"answers: {write_csv(answers, csv_path or Path(run_dir) / f'interviews-{stamp}.csv')}", err=True)


def _ablate_command(cli: click.Group) -> None:
    @cli.command("ablate")
    @click.argument("scenario", type=click.Path(dir_okay=False, exists=True))
    @click.option("--variant", "variant_specs", multiple=True, required=True, metavar='NAME="-p no:X --set k=v"',
                  help="A variant of the scenario (repeat; an empty right side runs the scenario as it is).")
    @click.option("--seeds", type=int, default=5, show_default=True, help="Runs per variant (seeds from the scenario's seed on).")
    @click.option("--first-seed", type=int, default=None, help="First seed (default: the scenario's seed).")
    @click.option("--baseline", default=None, help="The variant the others are tested against (default: the first).")
    @click.option("--summary", type=click.Choice(["mean", "last"]), default="mean", show_default=True,
                  help="A run's value of a metric: its mean over rounds, or its last round's value.")
    @click.option("--test", "test", type=click.Choice(["paired", "welch"]), default="paired", show_default=True,
                  help="Against the baseline: a paired t-test of same-seed runs (common random numbers), or Welch's (independent samples).")
    @click.option("--metric", "metrics", multiple=True, metavar="NAME", help="Only these metrics in the table (default: all).")
    @click.option("--jobs", type=click.IntRange(min=1), default=None, help="Runs at once (default: the CPU count).")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Folder of the runs and tables (default runs/ablate-<scenario>).")
    @common_options
    def ablate(scenario: str, variant_specs, seeds: int, first_seed: int | None, baseline: str | None, summary: str, test: str,
               metrics, jobs: int | None, out: str | None, plugin_options, **_: Any) -> None:
        """Run every variant x seed (resumable), then tabulate mean, 95 % CI and a t-test vs the baseline."""
        from townsquare.commands import ablate as ab

        variants = [ab.parse_variant(spec) for spec in variant_specs]
        names = [variant.name for variant in variants]
        if baseline is not None and baseline not in names:
            raise UsageError(f"--baseline {baseline}: no such variant (variants: {', '.join(names)})")
        folder = Path(out) if out else Path("runs") / f"ablate-{Path(scenario).stem}"
        planned = ab.plan(scenario, variants, seeds, folder, first_seed)
        common = [a for p in plugin_options for a in ("-p", p)]
        ab.check_variants(scenario, variants, plugin_options)
        runs = {variant.name: sum(1 for job in planned if job.variant.name == variant.name) for variant in variants}
        with AblateProgress(progress_mode(log_json=_log_json()), runs) as progress:
            ab.run_jobs(scenario, planned, workers=jobs or os.cpu_count() or 1, common=common,
                        on_done=lambda job, outcome: progress.done(job.variant.name, job.seed, outcome))
        rows = ab.summarise(planned, baseline or variants[0].name, summary, test)
        if metrics:
            rows = [r for r in rows if r.metric in metrics]
        text = ab.markdown(rows, baseline or variants[0].name, summary, test)
        click.echo(text)
        (folder / "ablation.md").write_text(text, encoding="utf-8")
        click.echo(f"tables: {folder / 'ablation.md'}, {ab.write_csv(rows, folder / 'ablation.csv', baseline or variants[0].name, test)}", err=True)
        click.echo(f"plot: {ab.plot(rows, folder / 'ablation.png')}", err=True)
        failed = [job for job in planned if job.status() != "finished"]
        if failed:
            raise UsageError(f"{len(failed)} of {len(planned)} runs did not finish (first: {failed[0].path}); run the same command again to resume them")


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
    if not os.access(path.parent, os.W_OK):
        raise UsageError(f"{option} {path}: cannot write in {path.parent}")
    return path


class _progress(RunProgress):
    """A run's start-up lines (its directory, slot table and LLM) then its progress
    (:mod:`townsquare.progress`: a bar on a terminal, a line per round otherwise, nothing with
    ``--quiet``)."""

    def __init__(self, quiet: bool, label: str = "rounds"):
        super().__init__(progress_mode(quiet=quiet, log_json=_log_json()), label=label)

    def announce(self, scenario, run_dir) -> None:
        click.echo(run_banner(scenario, run_dir), err=True)
        self.ready(scenario.model.rounds)


def _log_json() -> bool:
    """Whether ``--log-json`` was given (to the group or the command)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.params.get("log_json"):
            return True
        ctx = ctx.parent
    return False


def run_banner(scenario, run_dir) -> str:
    """What a run shows when it starts: its directory, its slot table and its LLM."""
    lines = [f"run directory: {run_dir.path}", format_slot_table(scenario.slot_table())]
    return "\n".join(lines + ([llm_banner(scenario)] if scenario.llm is not None else []))


def llm_banner(scenario) -> str:
    spec = scenario.llm.spec
    if spec.name == "scripted":
        return "LLM: scripted TEST model (canned answers, not a language model)"
    if spec.name == "oracle":
        return "LLM: oracle TEST model (rules that answer from the prompt alone, not a language model)"
    model = getattr(scenario.llm.config, "model", "") or ""
    line = f"LLM: {spec.name}{' ' + model if model else ''}"
    if scenario.llm_auto:
        line += ("  (chosen automatically: the scenario has no [llm] table; point the run at a real model with"
                 " --llm openai:MODEL and OPENAI_BASE_URL / OPENAI_API_KEY)")
    return line


def format_slot_table(rows: list[dict[str, str]]) -> str:
    headers = ("scope", "slot", "component", "plugin")
    widths = [max(len(h), *(len(r[h]) for r in rows)) for h in headers]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(r[h].ljust(w) for h, w in zip(headers, widths)) for r in rows]
    return "\n".join(lines)


def _report(path: Path, summary) -> None:
    counts = ", ".join(f"{kind} {n}" for kind, n in sorted(summary.counts.items()))
    state = f"stopped: {redact_text(summary.stopped)}" if summary.stopped else "finished"
    click.echo(f"{state}: {path} — {summary.rounds_completed} rounds, {summary.actions} actions ({counts}), {summary.llm_calls} LLM calls", err=True)
    if summary.stopped:
        click.echo(f"continue with: townsquare resume {path}", err=True)
        stop = RunStopped(summary.stopped)
        stop.reported = True  # type: ignore[attr-defined]
        raise stop
    click.echo(f"tables for notebooks: townsquare export {path} --format csv --out {path}/export", err=True)
    ctx = click.get_current_context(silent=True)
    plugins = ctx.obj if ctx is not None and isinstance(ctx.obj, Plugins) else None
    if plugins is not None:  # the plugins' own lines (``townsquare_report_run``): groundedness, say
        for line in plugins.call_each("townsquare_report_run", run_dir=Path(path)):
            click.echo(redact_text(str(line)), err=True)


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
        plugins.call_each("townsquare_register_commands", cli=cli)  # a command plugin that raises is skipped
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
