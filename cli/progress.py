"""A run's progress on the terminal: how the CLI shows the engine's running totals
(:func:`townsquare.llm_journal.new_totals`, handed to its ``progress(round, totals)`` callback before the first
round it plays and after every round). :class:`RunProgress` shows them in one of four modes
(:func:`progress_mode`):

- ``bar``: a rich progress bar on stderr, with rounds, elapsed time, ETA, LLM calls per
  second, tokens and spend so far, parse failures and retries, and how the structured answers
  came out (constrained, parsed, repaired, fallback; :mod:`townsquare.llm_modes`). Log lines
  and other stderr output print above it (the engine warns at every fallback, with the count).
- ``plain``: one line per round, ``round N/M`` then ``key=value`` fields, when stderr is not a
  terminal (CI, a log file).
- ``json``: the same fields as one JSON object a line (``event: run.progress``) with
  ``--log-json``, so the log stream stays machine-readable.
- ``quiet``: nothing.
- ``notebook``: the plain line, updated in place in a Jupyter cell (:func:`notebook_display`;
  :mod:`townsquare.notebook` chooses it).

Rates and the ETA count only the rounds played since this process started (a resumed or
branched run does not credit the rounds it inherited). The ETA reads ``unsure`` until two
rounds have been played: it is then the mean time of the rounds after the first one played
(which carries one-off work: plans, a model's first answers) times the rounds left.

Between round ends the engine's ``live(event)`` callback (:meth:`RunProgress.live`, the events of
:class:`townsquare.engine.Simulation`) keeps the display current from the first second: while the run is
built the bar (a ``run.phase`` line in ``json`` mode, the cell's line in a notebook) says what is
being built (loading the model, a population's personas), and every LLM call updates the bar's
counts as it lands, round 0's included. ``plain`` lines stay one per round.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable, TextIO

from townsquare.llm_modes import OUTCOMES, TOTAL_KEYS

MODES = ("bar", "plain", "json", "quiet", "notebook")
#: what the ETA reads before two rounds have been played
UNSURE = "unsure"


def progress_mode(*, quiet: bool = False, log_json: bool = False, stream: TextIO | None = None) -> str:
    """``quiet`` wins, then ``json`` (``--log-json``), then ``bar`` on a terminal, else ``plain``."""
    if quiet:
        return "quiet"
    if log_json:
        return "json"
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return "bar" if isatty is not None and isatty() else "plain"


def answer_counts(totals: dict[str, float]) -> str:
    """``212 constrained, 0 parsed, 1 repaired, 0 fallback``, with a ``!`` after a non-zero fallback."""
    counts = {outcome: int(totals.get(key, 0)) for outcome, key in TOTAL_KEYS.items()}
    text = ", ".join(f"{counts[o]:,} {o}" for o in OUTCOMES)
    return text + (" (!)" if counts["fallback"] else "")


class Snapshot:
    """The numbers one progress update shows, derived from the engine's totals."""

    def __init__(self, round: int, rounds: int, totals: dict[str, float], elapsed: float | None, done: int,
                 calls: float, per_round: float | None = None):
        self.round, self.rounds, self.totals = round, rounds, totals
        self.elapsed = elapsed  # seconds since the first update of this process
        self.done = done  # rounds played since then
        self.calls = calls  # LLM calls since then
        self.per_round = per_round  # seconds a round takes, from the rounds after the first played (None: unsure)

    @property
    def tokens(self) -> int:
        return int(self.totals.get("prompt_tokens", 0) + self.totals.get("completion_tokens", 0))

    @property
    def calls_per_s(self) -> float | None:
        return self.calls / self.elapsed if self.elapsed and self.done else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left (None: unsure, too few rounds played to tell)."""
        left = self.rounds - self.round - 1
        if left <= 0:
            return 0.0
        return None if self.per_round is None else self.per_round * left

    def fields(self) -> dict[str, Any]:
        """Every number, in the order the plain line prints them."""
        t = self.totals
        return {
            "eta": _duration(self.eta_s) or UNSURE, "elapsed": _duration(self.elapsed),
            "llm_calls": int(t.get("llm_calls", 0)),
            "calls_per_s": None if self.calls_per_s is None else round(self.calls_per_s, 2),
            "tokens": self.tokens, "cost": round(float(t.get("cost", 0.0)), 6),
            "parse_failures": int(t.get("parse_failures", 0)), "llm_errors": int(t.get("llm_errors", 0)),
            "repairs": int(t.get("repairs", 0)), "cached": int(t.get("cached", 0)),
            "actions": int(t.get("actions", 0)), "posts": int(t.get("posts", 0)), "comments": int(t.get("comments", 0)),
            **{key: int(t.get(key, 0)) for key in TOTAL_KEYS.values()},
        }

    def plain(self) -> str:
        """``round N/M`` then ``key=value`` fields (``-`` where a number is not known yet)."""
        fields = self.fields()
        fields["cost"] = f"${fields['cost']:.4f}"
        return f"round {self.round + 1}/{self.rounds}  " + " ".join(f"{k}={'-' if v is None else v}" for k, v in fields.items())

    def json(self, now: datetime | None = None) -> str:
        stamp = (now or datetime.now(timezone.utc)).isoformat()
        return json.dumps({"event": "run.progress", "level": "info", "timestamp": stamp, "round": self.round + 1,
                           "rounds": self.rounds, **self.fields()})

    def stats(self) -> str:
        """The bar's second line."""
        t = self.totals
        rate = "" if self.calls_per_s is None else f" ({self.calls_per_s:.1f}/s)"
        cached = int(t.get("cached", 0))
        errors, repairs = int(t.get("llm_errors", 0)), int(t.get("repairs", 0))
        return (f"LLM {int(t.get('llm_calls', 0)):,} calls{rate}{f', {cached:,} cached' if cached else ''}"
                f" · {_count(self.tokens)} tokens · ${float(t.get('cost', 0.0)):.4f}"
                f" · parse failures {int(t.get('parse_failures', 0)):,}"
                f" · retries {errors + repairs:,} ({errors:,} errors, {repairs:,} repairs)"
                f" · actions {int(t.get('actions', 0)):,} · posts {int(t.get('posts', 0)):,}"
                f" · comments {int(t.get('comments', 0)):,}"
                f" · answers {answer_counts(t)}")


class RunProgress:
    """The progress of one run. Use as a context manager; hand :meth:`ready` to the runner's
    ``on_ready`` (after the caller's own start-up lines) and :meth:`update` to its ``progress``.

    ``console`` (a ``rich.console.Console``) replaces the stderr console in ``bar`` mode (tests
    pass a recording one); ``stream`` receives ``plain`` and ``json`` lines (default: the
    current ``sys.stderr``); ``clock`` gives monotonic seconds."""

    def __init__(self, mode: str, *, label: str = "rounds", console: Any = None, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if mode not in MODES:
            raise ValueError(f"progress mode {mode!r}: choose one of {', '.join(MODES)}")
        if mode == "notebook" and stream is None:
            stream = _DisplayLine(notebook_display())
        self.mode, self.label, self.console, self.stream, self.clock = mode, label, console, stream, clock
        self.rounds = 0
        self._start: tuple[float, float, int] | None = None  # (time, llm calls, round) at the first update
        self._ends: list[float] = []  # when each round played by this process ended
        self._bar: Any = None
        self._playing: int | None = None  # the round being played (a ``round_start`` event)
        self.last: Snapshot | None = None

    def __enter__(self) -> "RunProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def ready(self, rounds: int) -> None:
        """The run is built and will play up to ``rounds`` rounds: show the bar."""
        self.rounds = rounds
        if self.mode == "bar" and self._bar is None:
            self._bar = _Bar(self.console, self.label, rounds, self.clock)

    def update(self, round: int, totals: dict[str, float]) -> None:
        """The engine's callback: ``round`` is the last round done (see the module's doc)."""
        if self.mode == "quiet":
            return
        now = self.clock()
        if self._start is None:
            # the first update: the run's starting point (-1 for a new run, the checkpoint's
            # round for a resume); a callback that skips it starts from its first round instead
            self._start = (now, float(totals.get("llm_calls", 0)), round)
        elif round > self._start[2]:
            self._ends.append(now)
        snap = self.snapshot(round, totals, now)
        self.last = snap
        if self._bar is not None:
            self._bar.show(snap, now)
        elif snap.done > 0:  # a line per round played, none for the starting point
            line = snap.json() if self.mode == "json" else snap.plain()
            _write(self.stream, line)

    @property
    def shown(self) -> str | None:
        """The bar's stats line as it reads now (None: no bar)."""
        return None if self._bar is None else self._bar.stats

    def snapshot(self, round: int, totals: dict[str, float], now: float) -> Snapshot:
        """The numbers to show after ``round`` (the last done) with ``totals``."""
        t0, calls0, round0 = self._start if self._start is not None else (now, 0.0, round)
        done = round - round0
        # the rounds after the first one played: the first carries one-off work (plans, a model's first answers)
        per_round = (self._ends[-1] - self._ends[0]) / (len(self._ends) - 1) if len(self._ends) >= 2 else None
        return Snapshot(round, self.rounds, totals, now - t0 if done else None, done, totals.get("llm_calls", 0) - calls0,
                        per_round)

    def live(self, event: dict[str, Any]) -> None:
        """The engine's ``live`` callback (:class:`townsquare.engine.Simulation`): build phases, every LLM
        call and each round's start, shown as they happen."""
        if self.mode == "quiet":
            return
        kind = event.get("event")
        if kind == "phase":
            if self.mode == "bar":
                if self._bar is None:
                    self.rounds = int(event.get("rounds") or self.rounds)
                    self._bar = _Bar(self.console, self.label, self.rounds, self.clock)
                self._bar.note(f"building: {event['text']}", refresh=True)
            elif self.mode == "json":
                _write(self.stream, json.dumps({"event": "run.phase", "level": "info",
                                                "timestamp": datetime.now(timezone.utc).isoformat(), "text": event["text"]}))
            elif self.mode == "notebook":  # the cell's one line; plain lines stay one per round
                _write(self.stream, f"building: {event['text']}")
        elif kind == "round_start":
            self._playing = int(event["round"])
        elif kind == "llm_call" and self._bar is not None:
            now = self.clock()
            done = self.last.round if self.last is not None else -1
            snap = self.snapshot(done, event["totals"], now)
            playing = f"round {self._playing + 1} playing · " if self._playing is not None else "building · "
            self._bar.note(playing + snap.stats())

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class _Bar:
    """rich's progress display: the bar line and a stats line under it. rich swaps
    ``sys.stderr``/``sys.stdout`` while it shows, so structlog lines (written to whatever
    ``sys.stderr`` is) and ``click.echo(err=True)`` print above the bar."""

    def __init__(self, console: Any, label: str, rounds: int, clock: Callable[[], float]):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
        from rich.text import Text

        class Eta(ProgressColumn):
            """The ETA of the last update, counting down between rounds."""

            def render(self, task: Any) -> Text:
                eta, at = task.fields.get("eta"), task.fields.get("at")
                left = None if eta is None else max(0.0, eta - (clock() - at))
                return Text(f"ETA {_duration(left) or UNSURE}", style="progress.remaining")

        class TwoLines(Progress):
            def get_renderables(self):
                yield self.make_tasks_table(self.tasks)
                for task in self.tasks:
                    yield Text(f"  {task.fields.get('stats', '')}", style="dim", overflow="fold")

        self.progress = TwoLines(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), Eta(), console=console or Console(stderr=True),
                                 redirect_stdout=True, redirect_stderr=True)
        #: the stats line as it reads now
        self.stats = "waiting for the first round"
        self.task = self.progress.add_task(label, total=rounds, eta=None, at=0.0, stats=self.stats)
        self.progress.start()

    def show(self, snap: Snapshot, now: float) -> None:
        self.stats = snap.stats()
        self.progress.update(self.task, completed=snap.round + 1, eta=snap.eta_s, at=now, stats=self.stats, refresh=True)

    def note(self, stats: str, refresh: bool = False) -> None:
        """Replace the stats line between rounds (drawn now with ``refresh``, else at rich's own pace)."""
        self.stats = stats
        self.progress.update(self.task, stats=stats, refresh=refresh)

    def stop(self) -> None:
        self.progress.stop()


class AblateProgress:
    """``townsquare ablate``: a bar per variant counting its finished runs (``bar`` mode), else
    a line per run as it ends (``[k/N] VARIANT seed S: OUTCOME``; a JSON object with
    ``--log-json``). :meth:`done` may be called from worker threads."""

    def __init__(self, mode: str, variants: dict[str, int], *, console: Any = None, stream: TextIO | None = None):
        self.mode, self.stream, self.total, self.count = mode, stream, sum(variants.values()), 0
        self.progress: Any = None
        if mode == "bar":
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("runs  {task.fields[failed]}"), TimeElapsedColumn(),
                                     console=console or Console(stderr=True), redirect_stdout=True, redirect_stderr=True)
            self.tasks = {name: self.progress.add_task(name, total=n, failed="") for name, n in variants.items()}
            self.failed = dict.fromkeys(variants, 0)
            self.progress.start()

    def __enter__(self) -> "AblateProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.stop()

    def done(self, variant: str, seed: int, outcome: str, label: str | None = None) -> None:
        """A run of ``variant`` (a bar's name) ended; ``label`` names it in the lines (default: the variant)."""
        self.count += 1
        label = label or variant
        if self.progress is not None:
            failed = not (outcome == "finished" or outcome.startswith("skipped"))
            self.failed[variant] += failed
            self.progress.update(self.tasks[variant], advance=1,
                                 failed=f"{self.failed[variant]} failed" if self.failed[variant] else "")
            if failed:
                self.progress.console.print(f"{label} seed {seed}: {outcome}")
            return
        if self.mode == "json":
            line = json.dumps({"event": "ablate.run_done", "level": "info", "done": self.count, "runs": self.total,
                               "variant": label, "seed": seed, "outcome": outcome})
        else:
            line = f"[{self.count}/{self.total}] {label} seed {seed}: {outcome}"
        _write(self.stream, line)


def notebook_display() -> Any:
    """IPython's ``display`` inside a Jupyter kernel, else None."""
    ipython = sys.modules.get("IPython")
    if ipython is None or type(ipython.get_ipython()).__name__ != "ZMQInteractiveShell":
        return None
    from IPython.display import display

    return display


class _DisplayLine:
    """A stream that shows only the newest line written to it, in place (a display handle)."""

    def __init__(self, display: Any):
        self.display, self.handle = display, None

    def write(self, text: str) -> None:
        if not text.strip():
            return
        if self.handle is None:
            self.handle = self.display({"text/plain": text.strip()}, raw=True, display_id=True)
        else:
            self.handle.update({"text/plain": text.strip()}, raw=True)

    def flush(self) -> None:
        pass


def _write(stream: TextIO | None, line: str) -> None:
    stream = stream or sys.stderr  # the current one: a test runner may have swapped it
    stream.write(line + "\n")
    stream.flush()


def _duration(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _count(n: int) -> str:
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)
