"""The Python API for notebooks and scripts (docs/notebook.md)::

    import townsquare.notebook as ts

    run = ts.start("examples/baseline.toml", overrides={"rounds": 2}, out="runs/nb")
    branch = run.branch(at=1, posts=[("outsider", "Breaking: the bridge is closed")])
    branch.table("actions")                     # a pandas DataFrame

Each call is the command line's own function (:func:`~townsquare.launch.runner.start_run`,
:func:`~townsquare.commands.branch.branch_run`, :func:`~townsquare.launch.runner.resume_run`,
:func:`~townsquare.launch.interviews.interview`, :func:`~townsquare.commands.export.read_tables`), so a run made
here is the run the CLI makes and a reopened run gets the plugins it recorded. Those functions
play a run with ``asyncio.run``; inside a running event loop (Jupyter) the plain forms
(``start``, ``run.branch``...) play it in a worker thread and wait for it, and the ``a`` forms
(``astart``, ``run.abranch``...) are awaitables that play it in a worker thread, leaving the loop
free. An interrupt (the kernel's stop button during a plain form, cancelling the task that
awaits an ``a`` form) stops the run at its last checkpoint, as Ctrl-C does on the command line;
``run.resume()`` continues it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import structlog

from townsquare.lib import logs
from townsquare.errors import UsageError
from townsquare.lib.memory_export import MEMORY_TABLE
from townsquare.cli.progress import RunProgress, notebook_display, progress_mode
from townsquare.launch import run_lock
from townsquare.rundir import RunDir
from townsquare.launch.scenario_files import override_lines
from townsquare.store import ROUND_TABLES

__all__ = ["TABLES", "Run", "astart", "open_run", "start"]

#: every table of a run: the event store's, then the agents' memories (docs/notebook.md)
TABLES = ("agents", *ROUND_TABLES, MEMORY_TABLE)


def _forms(make: Callable[..., tuple[Callable[[], Any], Any]]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The plain and the awaitable form of an operation; ``make(...)`` returns the blocking call
    that does it and the :class:`_Progress` that can stop it (or None)."""
    @functools.wraps(make)
    def plain(*args: Any, **kwargs: Any) -> Any:
        return _wait(*make(*args, **kwargs))

    @functools.wraps(make)
    async def awaitable(*args: Any, **kwargs: Any) -> Any:
        return await _await(*make(*args, **kwargs))
    name = make.__name__.lstrip("_")
    for form, form_name in ((plain, name), (awaitable, "a" + name)):
        form.__name__, form.__qualname__ = form_name, make.__qualname__.replace(make.__name__, form_name)
    return plain, awaitable


def _start(scenario: str | Path | Mapping[str, Any], *, overrides: Mapping[str, Any] | Iterable[str] = (), seed: int | None = None,
           out: str | Path | None = None, llm: str | None = None, plugins: Iterable[str] = (), progress: Any = True):
    """Run a scenario (a TOML file, or its content as a dict whose relative paths name files from
    the current directory) into a new run directory, as ``townsquare run`` does, and return the
    :class:`Run`. ``overrides``: ``{"rounds": 2, "llm.model": "gpt-4o-mini"}`` or ``["rounds=2"]``
    (``--set``); ``llm``: as ``--llm`` (``"openai:gpt-4o-mini"``); ``plugins``: ``-p`` options
    (``["no:reflection"]``); ``progress``: True (shown), False, or your ``callback(round, totals)``."""
    from townsquare.cli import test_model_plugins
    from townsquare.cli.options import llm_overrides
    from townsquare.launch.runner import start_run

    shown = _Progress(progress)
    sets = [*llm_overrides(llm), *_set_lines(overrides)]
    # llm="oracle" / "scripted" loads the testing kit's plugin for it, as --llm does on the command line
    plugins = _listed(plugins)
    options = [*plugins, *test_model_plugins([llm], plugins)]
    return _played(shown, lambda: start_run(scenario, overrides=sets, seed=seed, out=out, plugin_options=options,
                                            progress=shown.update, on_ready=shown.announce, live=shown.live))


start, astart = _forms(_start)


def open_run(path: str | Path) -> "Run":
    """A run directory made before (finished, stopped or still playing)."""
    return Run(run_lock.open_run(path).path)


class Run:
    """A run directory: its manifest, its tables, and what can be done with it. ``summary`` is
    the :class:`~townsquare.lifecycle.RunSummary` of the call that played it (None when opened)."""

    def __init__(self, path: Path, summary: Any = None):
        self.path, self.summary = Path(path), summary

    @property
    def manifest(self) -> dict[str, Any]:
        return RunDir(self.path).read_manifest()

    @property
    def slots(self) -> str:
        """The run's slot table as the command line prints it (which component fills each slot)."""
        from townsquare.cli.run_output import format_slot_table

        return format_slot_table(self.manifest.get("slot_table") or [])

    @property
    def status(self) -> str:
        """``finished``, ``stopped`` (why: ``manifest["stop_reason"]``) or ``running``."""
        return str(self.manifest.get("status"))

    def __repr__(self) -> str:
        m = self.manifest
        stop = f" ({m['stop_reason']})" if m.get("stop_reason") else ""
        return f"<Run {m.get('name')}: {m.get('status')}{stop}, {m.get('rounds_completed')}/{m.get('rounds')} rounds, {self.path}>"

    def table(self, name: str) -> Any:
        """One table (:data:`TABLES`) as a pandas DataFrame, read now (a live run's rounds so far)."""
        return self.tables(name)[name]

    def tables(self, *names: str) -> dict[str, Any]:
        """Every table (or those named) as pandas DataFrames, by name."""
        try:
            import pandas
        except ImportError:
            raise UsageError("reading tables as DataFrames needs pandas: pip install 'townsquare[notebook]'") from None
        from townsquare.commands.export import read_tables

        unknown = [name for name in names if name not in TABLES]
        if unknown:
            raise UsageError(f"no table {unknown[0]!r} (tables: {', '.join(TABLES)})")
        events = RunDir(self.path).events_path
        if not events.is_file():
            raise UsageError(f"{self.path}: no events.sqlite yet (the run has not started): no tables")
        return {name: pandas.DataFrame(list(rows), columns=columns) for name, columns, rows in read_tables(events, names or TABLES)}

    def _branch(self, at: int, *, overrides: Mapping[str, Any] | Iterable[str] = (), plugins: Iterable[str] = (),
                personas: Mapping[str, str] | Iterable[tuple[str, str]] = (), posts: Iterable[tuple[str, str]] = (),
                memories: Iterable[tuple[str, str]] = (), follows: Iterable[tuple[str, str]] = (),
                unfollows: Iterable[tuple[str, str]] = (), out: str | Path | None = None, label: str | None = None, progress: Any = True):
        """A new run from this one's state at the start of round ``at``, with interventions, as
        ``townsquare branch`` makes it (docs/notebook.md), returned as a :class:`Run`:
        ``overrides``, ``plugins`` and ``progress`` as :func:`start`; ``personas={agent: file}``,
        ``posts=[(author, text)]``, ``memories=[(agent, text)]``, ``follows=[(follower, followee)]``,
        ``unfollows=[...]`` (each a list of pairs or a dict)."""
        from townsquare.commands.branch import branch_run, parse_interventions

        # applied in the order ``townsquare branch`` applies its options
        kinds = {"persona": personas, "memory": memories, "follow": follows, "unfollow": unfollows, "post": posts}
        pairs = [(kind, a, b) for kind, given in kinds.items() for a, b in (given.items() if isinstance(given, Mapping) else given)]
        changes = parse_interventions([(kind, f"{a}={b}") for kind, a, b in pairs])
        shown = _Progress(progress)
        return _played(shown, lambda: branch_run(self.path, at, out, overrides=_set_lines(overrides), plugin_options=_listed(plugins),
                                                 interventions=changes, progress=shown.update, on_ready=shown.announce, label=label,
                                                 live=shown.live))

    def _resume(self, *, overrides: Mapping[str, Any] | Iterable[str] = (), progress: Any = True, accept_changed_inputs: bool = False):
        """Continue a stopped run from its newest checkpoint, as ``townsquare resume`` does."""
        from townsquare.launch.runner import resume_run

        shown = _Progress(progress)
        return _played(shown, lambda: resume_run(self.path, overrides=_set_lines(overrides), progress=shown.update,
                                                 on_ready=shown.announce, accept_changed_inputs=accept_changed_inputs,
                                                 live=shown.live))

    def _interview(self, question: str, agents: str | Iterable[str] | None = None, *, population: str | None = None,
                   round: int | None = None, memories: int = 8):
        """Ask ``agents`` (an id, several, or None: every agent of ``population``, or every agent)
        ``question`` at ``round`` (default: the newest checkpoint), as ``townsquare interview``
        does; returns :class:`~townsquare.launch.interviews.Answer` records."""
        from townsquare.launch.interviews import interview

        wanted = [agents] if isinstance(agents, str) else list(agents or ())
        return lambda: interview(self.path, question, agents=wanted, population=population, all_agents=agents is None,
                                 round=round, memories=memories), None

    branch, abranch = _forms(_branch)
    resume, aresume = _forms(_resume)
    interview, ainterview = _forms(_interview)


def _played(shown: "_Progress", play: Callable[[], tuple[RunDir, Any]]) -> tuple[Callable[[], Run], "_Progress"]:
    def call() -> Run:
        with shown:
            run_dir, summary = play()
        if summary.stopped and shown.mode != "quiet":
            print(f"stopped: {summary.stopped} (continue with run.resume())", file=sys.stderr)
        return Run(run_dir.path, summary)
    return call, shown


def _wait(call: Callable[[], Any], shown: "_Progress | None") -> Any:
    """``call()`` here; inside a running event loop, in a worker thread, waited for."""
    if not structlog.is_configured():  # as the CLI logs: warnings and up, secrets redacted
        logs.configure(level=os.environ.get("TOWNSQUARE_LOG_LEVEL", "warning"))
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return call()  # asyncio.run stops the run on Ctrl-C, as on the command line
    future: concurrent.futures.Future = concurrent.futures.Future()

    def work() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:  # raised in the waiting thread
            future.set_exception(exc)

    threading.Thread(target=contextvars.copy_context().run, args=(work,), name="townsquare-run", daemon=True).start()
    while True:
        try:
            return future.result()
        except KeyboardInterrupt:
            if shown is None:
                raise
            shown.interrupt()  # the run stops at its last checkpoint and returns


async def _await(call: Callable[[], Any], shown: "_Progress | None") -> Any:
    """``call()`` in a worker thread, awaited; cancelling the awaiting task stops the run."""
    future = asyncio.ensure_future(asyncio.to_thread(_wait, call, None))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if shown is not None:
            shown.interrupt()
            await asyncio.wait([future])
        raise


class _Progress(RunProgress):
    """What a call shows (the CLI's start-up lines and progress; in Jupyter, one line updated in
    place) and the handle that stops its run: the engine calls :meth:`update` in the loop the run
    plays in, so :meth:`interrupt` can cancel that loop's task, as Ctrl-C does."""

    def __init__(self, progress: Any):
        self.callback = progress if callable(progress) else None
        mode = "quiet" if not progress or self.callback else "notebook" if notebook_display() else progress_mode()
        super().__init__(mode)
        self._task: tuple[asyncio.AbstractEventLoop, asyncio.Task] | None = None
        self._stopping = False

    def announce(self, scenario: Any, run_dir: RunDir) -> None:
        if self.mode == "notebook":  # one line in a cell; the slot table is a property away
            from townsquare.cli.run_output import llm_banner

            llm = f" · {llm_banner(scenario)}" if scenario.llm is not None else " · no LLM"
            print(f"run directory: {run_dir.path}{llm} · slot table: print(run.slots)", file=sys.stderr)
        elif self.mode != "quiet":
            from townsquare.cli.run_output import run_banner

            print(run_banner(scenario, run_dir), file=sys.stderr)
        self.ready(scenario.model.rounds)

    def update(self, round: int, totals: dict[str, float]) -> None:
        if self._task is None:
            self._task = (asyncio.get_running_loop(), asyncio.current_task())
        if self._stopping:
            self._task[1].cancel()
        super().update(round, totals)
        if self.callback is not None:
            self.callback(round, totals)

    def interrupt(self) -> None:
        self._stopping = True
        if self._task is not None:
            try:
                self._task[0].call_soon_threadsafe(self._task[1].cancel)
            except RuntimeError:  # the loop has closed: the run is over
                pass


def _set_lines(overrides: Mapping[str, Any] | Iterable[str]) -> list[str]:
    return override_lines(overrides) if isinstance(overrides, Mapping) else _listed(overrides)


def _listed(options: str | Iterable[str]) -> list[str]:
    """Options as a list: one given as a string is one option (``"no:x"``), not its letters."""
    return [options] if isinstance(options, str) else list(options)
