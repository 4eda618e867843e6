"""One writer per run directory: making, claiming, locking and opening run directories.

``run``, ``resume``, ``replay`` and ``branch`` hold an exclusive lock on ``<run>/.lock`` while
they write (:func:`locked`, :func:`claim`); a second process stops with one line naming the
holder. The operating system releases a ``flock`` when its process dies, even by ``kill -9``,
so a stale lock is simply taken over (and logged with the dead holder's pid). A run killed in
its first moments (a ``.lock``, perhaps an empty ``checkpoints/`` and the manifest it was
writing, nothing else) is taken back by the next ``run --out`` into it, and ``resume`` says so
in one line (:func:`open_run`).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import sys
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import structlog

from townsquare.errors import RunStopped, UsageError
from townsquare.rundir import RunDir

log = structlog.get_logger("townsquare.launch.run_lock")

LOCK_NAME = ".lock"


class RunDirBusy(UsageError):
    """Another live process holds the run directory's lock."""


class RunLock:
    """An exclusive, non-blocking ``flock`` on ``<run>/.lock``. The file is never deleted (an
    unlink would let a third process lock a fresh inode while the second still holds the old);
    its text says who holds it, for the error message and the stale-lock log line."""

    def __init__(self, run_path: Path):
        self.run_path = run_path
        self.path = run_path / LOCK_NAME
        self._file: Any = None

    def acquire(self) -> None:
        try:
            handle = open(self.path, "a+", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{self.run_path}: cannot lock the run directory: {exc.strerror}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = _holder(handle.read())
            handle.close()
            raise self._busy(holder) from None
        handle.seek(0)
        previous = handle.read().strip()
        if previous:
            # the holder died without releasing (kill -9, power loss): the kernel freed its flock
            log.warning("run_dir.stale_lock_taken_over", run=str(self.run_path), previous=_holder(previous))
        handle.truncate(0)
        handle.write(json.dumps({
            "pid": os.getpid(), "host": socket.gethostname(),
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:3]]) if sys.argv else "",
        }) + "\n")
        handle.flush()
        self._file = handle

    def _busy(self, holder: str) -> RunDirBusy:
        return RunDirBusy(f"{self.run_path}: in use by {holder}; wait for it to end (or stop it) and try again")

    def check_free(self) -> None:
        """:class:`RunDirBusy` when a live process holds the lock; nothing is taken or written."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except OSError:
                    raise self._busy(_holder(handle.read())) from None
        except OSError:
            return

    def release(self) -> None:
        handle, self._file = self._file, None
        if handle is None:
            return
        try:
            handle.truncate(0)  # empty text: released cleanly, nothing stale to report
            fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            handle.close()


def _holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"process {info['pid']} on host {info['host']} (started {info['started_at']}: {info.get('command', '')})"
    except (ValueError, TypeError, KeyError):
        return "another process"


@contextmanager
def locked(run: RunDir | str | Path) -> Iterator[RunDir]:
    """Hold the run directory's lock for the ``with`` body (``resume``, ``replay``, ``branch``'s
    parent, an interview); :class:`RunDirBusy` when a live process holds it."""
    run = run if isinstance(run, RunDir) else RunDir(run)
    lock = RunLock(run.path)
    lock.acquire()
    try:
        yield run
    finally:
        lock.release()


@contextmanager
def claim(out: str | Path | None, name: str) -> Iterator[RunDir]:
    """A new, empty run directory, locked for the ``with`` body: ``out`` if given, else
    ``runs/<name>`` (``-2``, ``-3``... appended when that exists), so an earlier run is never
    overwritten. When the body fails before it sets ``started`` (a persona file found broken
    while building, say), what was made is removed again: no half-made directory is left
    behind. A clean stop (:class:`RunStopped`) or Ctrl-C keeps it, resumable."""
    path, made = _make_run_path(out, name)
    run = RunDir(path)
    with locked(run):
        if never_began(run):  # a run killed before it wrote anything: start it again here
            for child in path.iterdir():
                if child.name != LOCK_NAME:
                    child.rmdir() if child.is_dir() else child.unlink()
        if (path / "manifest.json").is_file():
            raise UsageError(f"--out {path}: holds a run (manifest.json); continue it with townsquare resume {path}, "
                             "or choose an empty directory")
        if any(p.name != LOCK_NAME for p in path.iterdir()):
            raise UsageError(f"--out {path}: directory exists and is not empty")
        try:
            (path / "checkpoints").mkdir()
            yield run
        except RunStopped:
            raise  # a clean stop while building (an LLM outage, a budget): kept for resume
        except Exception:
            if not run.started:
                _discard(run, made)
            raise


def create(out: str | Path | None, name: str) -> RunDir:
    """A new, empty run directory (see :func:`claim`), not kept locked: for tests and tools that
    write a run directory themselves."""
    with claim(out, name) as run:
        run.started = True
    return run


def open_run(path: str | Path) -> RunDir:
    """An existing run directory (its manifest, event store and checkpoints); a clear error if
    it is none, or if its run was stopped before it wrote anything."""
    run = RunDir(path)
    if not (run.path / "manifest.json").is_file():
        if never_began(run):
            RunLock(run.path).check_free()  # a run starting right now holds it: RunDirBusy names it
            raise UsageError(f"{path}: the run was stopped before it wrote anything (no manifest.json, no checkpoint): "
                             f"there is nothing to continue; start it again with townsquare run SCENARIO --out {path}")
        raise UsageError(f"{path}: not a run directory (no manifest.json)")
    return run


def never_began(run: RunDir) -> bool:
    """Whether ``run`` is what a run killed in its first moments leaves: ``.lock``, perhaps an
    empty ``checkpoints/`` and the manifest it was writing (``manifest.json.tmp``), nothing else."""
    try:
        children = {child.name: child for child in run.path.iterdir()}
        checkpoints = children.get("checkpoints")
        return (LOCK_NAME in children and set(children) <= {LOCK_NAME, "checkpoints", "manifest.json.tmp"}
                and (checkpoints is None or (checkpoints.is_dir() and not any(checkpoints.iterdir()))))
    except OSError:
        return False


def _discard(run: RunDir, made: bool) -> None:
    if made:
        shutil.rmtree(run.path, ignore_errors=True)
        return
    for child in run.path.iterdir():  # the user's own empty --out folder: empty it again
        shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)


def _make_run_path(out: str | Path | None, name: str) -> tuple[Path, bool]:
    """The run directory's path, made if missing, and whether this call made it."""
    try:
        if out is not None:
            path = Path(out)
            if path.exists() and not path.is_dir():
                raise UsageError(f"--out {path}: not a directory")
            made = not path.exists()
            path.mkdir(parents=True, exist_ok=True)
            return path, made
        base = Path("runs") / _slug(name)
        base.parent.mkdir(parents=True, exist_ok=True)
        path, n = base, 1
        while True:
            try:
                path.mkdir()  # atomic: two runs of one scenario never pick the same folder
                return path, True
            except FileExistsError:
                n += 1
                path = base.with_name(f"{base.name}-{n}")
    except UsageError:
        raise
    except OSError as exc:
        raise UsageError(f"{out if out is not None else 'runs'}: cannot create the run directory: {exc.strerror}") from None


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
