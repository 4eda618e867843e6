"""The run directory ``runs/<name>/``.

::

    manifest.json          scenario (after overrides), overrides, seed, slot table, plugins and
                           versions, townsquare version, status, each process's memory and
                           CPU time (``processes``, townsquare.process_usage)
    events.sqlite          the trace (see townsquare.store)
    checkpoints/round-000011.json.gz
                           every component's state after round 11 (on Ray, the agents' state
                           is in the shards' files beside it: round-000011.agents-0-of-2.jsonl.gz, ...)

    .lock                  held (``fcntl.flock``) by the one process writing the run; its text
                           names that process (pid, host, start time)

One writer per run directory: ``run``, ``resume`` and ``replay`` hold an exclusive lock on
``.lock`` while they write (:meth:`RunDir.lock`, :meth:`RunDir.claim`); a second process stops
with one line naming the holder. The kernel releases a ``flock`` when its process dies, even by
``kill -9``, so a stale lock is simply taken over (and logged with the dead holder's pid).

Crash safety: a round's rows are committed in one transaction, then its checkpoint is written
atomically. ``resume`` loads the newest checkpoint and deletes rows of later rounds, so a run
killed at any point (kill -9 mid-round included) continues with no event lost or duplicated.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import platform as _platform
import re
import shutil
import socket
import sys
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import structlog

from . import state as state_codec
from .errors import RunStopped, UsageError
from .secrets import redact_value

log = structlog.get_logger("townsquare.rundir")

CHECKPOINT_RE = re.compile(r"^round-(\d{6})\.json\.gz$")
#: a Ray shard's agents of a checkpoint (:meth:`RunDir.write_agent_part`)
AGENT_PART_RE = re.compile(r"^round-(\d{6})\.agents-(\d+)-of-(\d+)\.jsonl\.gz$")
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


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        #: set by the writer once the run is built: from then on a failure keeps the directory
        self.started = False

    # ------------------------------------------------------------------ creation and locking

    @classmethod
    def create(cls, out: str | Path | None, name: str) -> "RunDir":
        """A new, empty run directory (see :meth:`claim`), not kept locked: for tests and
        tools that write a run directory themselves."""
        with cls.claim(out, name) as run:
            run.started = True
        return run

    @classmethod
    @contextmanager
    def claim(cls, out: str | Path | None, name: str) -> Iterator["RunDir"]:
        """A new, empty run directory, locked for the ``with`` body: ``out`` if given, else
        ``runs/<name>`` (``-2``, ``-3``... appended when that exists), so an earlier run is
        never overwritten. When the body fails before it sets ``started`` (a persona file
        found broken while building, say), what was made is removed again: no half-made
        directory is left behind. A clean stop (:class:`RunStopped`) or Ctrl-C keeps it,
        resumable."""
        path, made = _make_run_path(out, name)
        run = cls(path)
        with run.lock():
            if run.never_began():  # a run killed before it wrote anything: start it again here
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
                    run._discard(made)
                raise

    @contextmanager
    def lock(self) -> Iterator["RunDir"]:
        """Hold the run directory's lock for the ``with`` body (``resume``, ``replay``, a
        future ``branch``); :class:`RunDirBusy` when a live process holds it."""
        lock = RunLock(self.path)
        lock.acquire()
        try:
            yield self
        finally:
            lock.release()

    def _discard(self, made: bool) -> None:
        if made:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        for child in self.path.iterdir():  # the user's own empty --out folder: empty it again
            shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)

    @classmethod
    def open(cls, path: str | Path) -> "RunDir":
        run = cls(path)
        if not (run.path / "manifest.json").is_file():
            if run.never_began():
                RunLock(run.path).check_free()  # a run starting right now holds it: RunDirBusy names it
                raise UsageError(f"{path}: the run was stopped before it wrote anything (no manifest.json, no checkpoint): "
                                 f"there is nothing to continue; start it again with townsquare run SCENARIO --out {path}")
            raise UsageError(f"{path}: not a run directory (no manifest.json)")
        return run

    def never_began(self) -> bool:
        """Whether this is what a run killed in its first moments leaves: ``.lock``, perhaps an
        empty ``checkpoints/`` and the manifest it was writing (``manifest.json.tmp``), nothing else."""
        try:
            children = {child.name: child for child in self.path.iterdir()}
            checkpoints = children.get("checkpoints")
            return (LOCK_NAME in children and set(children) <= {LOCK_NAME, "checkpoints", "manifest.json.tmp"}
                    and (checkpoints is None or (checkpoints.is_dir() and not any(checkpoints.iterdir()))))
        except OSError:
            return False

    # ------------------------------------------------------------------ files

    @property
    def events_path(self) -> Path:
        return self.path / "events.sqlite"

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def read_manifest(self) -> dict[str, Any]:
        try:
            manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{self.manifest_path}: cannot read: {exc}") from None
        except json.JSONDecodeError as exc:
            raise UsageError(f"{self.manifest_path}: not valid JSON ({exc})") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("scenario"), dict):
            raise UsageError(f"{self.manifest_path}: not a run manifest (expected a JSON object with a \"scenario\" object)")
        return manifest

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        # error texts (stop_reason) may quote a server that echoed a secret back
        data = json.dumps(redact_value(manifest), indent=2, sort_keys=False, default=str).encode()
        state_codec.write_atomic(self.manifest_path, data)

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        manifest = self.read_manifest()
        manifest.update(fields)
        self.write_manifest(manifest)
        return manifest

    # ------------------------------------------------------------------ checkpoints

    def checkpoints(self) -> list[tuple[int, Path]]:
        found = []
        for path in (self.path / "checkpoints").glob("round-*.json.gz"):
            match = CHECKPOINT_RE.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def checkpoint_at(self, round: int, agents: bool = True) -> dict[str, Any] | None:
        """The state saved after ``round``, or None when that checkpoint is not kept
        (``agents=False``: without the agents, see :meth:`latest_checkpoint`)."""
        for saved, path in self.checkpoints():
            if saved == round:
                return self._read_checkpoint(path, agents)
        return None

    def latest_checkpoint(self, agents: bool = True) -> tuple[int, dict[str, Any]] | None:
        """The newest checkpoint that reads, as ``(round, state)``. Its ``agents`` are merged in
        from the agent parts its shards wrote (``agent_parts``), in index order, so a reader
        sees one process's checkpoint; ``agents=False`` leaves them out (a Ray driver, whose
        shards read their own agents: :meth:`agent_entries`)."""
        for round, path in reversed(self.checkpoints()):
            try:
                return round, self._read_checkpoint(path, agents)
            except (OSError, ValueError, EOFError):
                continue  # a damaged newest checkpoint: fall back to the one before
        return None

    def _read_checkpoint(self, path: Path, agents: bool) -> dict[str, Any]:
        state = state_codec.loads(state_codec.read_maybe_gzip(path))
        if not agents:
            state.pop("agents", None)
        elif "agent_parts" in state:
            found = sorted(self._part_entries(state.pop("agent_parts"), lambda index: True))
            state["agents"] = {agent_id: saved for _, agent_id, saved in found}
        return state

    def write_checkpoint(self, round: int, state: dict[str, Any], keep: int, members: dict[str, Iterable[str]] | None = None) -> Path:
        """Write round ``round``'s checkpoint (``members``: top-level objects given as their
        members' JSON text, written as they come: see :func:`townsquare.state.dump_chunks`) and
        drop all but the newest ``keep``, with their agent parts. Written last, after its agent
        parts: a checkpoint that exists is whole."""
        path = self.path / "checkpoints" / f"round-{round:06d}.json.gz"
        state_codec.write_atomic(path, state_codec.dump_chunks(state, members or {}), compress=True)
        if keep > 0:  # 0: keep every checkpoint (a study that branches at any round)
            for _, old in self.checkpoints()[:-keep]:
                old.unlink(missing_ok=True)
            kept = {saved for saved, _ in self.checkpoints()}
            for part in (self.path / "checkpoints").glob("round-*.agents-*"):
                match = AGENT_PART_RE.match(part.name)
                if match and int(match.group(1)) not in kept:
                    part.unlink(missing_ok=True)
        return path

    # ------------------------------------------------------------------ agent parts (Ray shards)

    def write_agent_part(self, round: int, shard: int, shards: int, lines: Iterable[str]) -> str:
        """Shard ``shard`` of ``shards``' agents for round ``round``'s checkpoint, one line per
        agent (``INDEX<tab>"ID":{"components":{...}}``, :meth:`townsquare.agent_host.AgentHost.entry_lines`),
        gzip-compressed and written atomically; returns the file's name, which the driver's
        checkpoint lists under ``agent_parts``."""
        name = f"round-{round:06d}.agents-{shard}-of-{shards}.jsonl.gz"
        state_codec.write_atomic(self.path / "checkpoints" / name, (f"{line}\n".encode("utf-8") for line in lines), compress=True)
        return name

    def agent_entries(self, round: int, wanted: Callable[[int], bool]) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """``(index, id, saved)`` of the agents of round ``round``'s checkpoint whose index
        ``wanted`` picks: from its agent parts, decoding only the lines picked (so a shard
        reads its own agents whatever the number of shards that wrote them), or from its
        ``agents`` object (a checkpoint of one process: agents in index order)."""
        path = self.path / "checkpoints" / f"round-{round:06d}.json.gz"
        state = state_codec.loads(state_codec.read_maybe_gzip(path))
        if "agent_parts" in state:
            yield from self._part_entries(state["agent_parts"], wanted)
            return
        for index, (agent_id, saved) in enumerate(state.get("agents", {}).items()):
            if wanted(index):
                yield index, agent_id, saved

    def _part_entries(self, names: list[str], wanted: Callable[[int], bool]) -> Iterator[tuple[int, str, dict[str, Any]]]:
        for name in names:
            with gzip.open(self.path / "checkpoints" / name, "rt", encoding="utf-8") as fh:
                for line in fh:
                    head, _, entry = line.partition("\t")
                    if entry and wanted(int(head)):
                        (agent_id, saved), = state_codec.loads(("{" + entry + "}").encode("utf-8")).items()
                        yield int(head), agent_id, saved


def environment() -> dict[str, str]:
    return {
        "python": _platform.python_version(),
        "platform": _platform.platform(),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


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
