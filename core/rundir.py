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
``.lock`` while they write (:mod:`townsquare.launch.run_lock`); a second process stops with one
line naming the holder.

Crash safety: a round's rows are committed in one transaction, then its checkpoint is written
atomically. ``resume`` loads the newest checkpoint and deletes rows of later rounds, so a run
killed at any point (kill -9 mid-round included) continues with no event lost or duplicated.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from . import state
from .errors import UsageError
from .secrets import redact_value

CHECKPOINT_RE = re.compile(r"^round-(\d{6})\.json\.gz$")
#: a Ray shard's agents of a checkpoint (:meth:`RunDir.write_agent_part`)
AGENT_PART_RE = re.compile(r"^round-(\d{6})\.agents-(\d+)-of-(\d+)\.jsonl\.gz$")


class RunDir:
    """The files of one run (``path``): its manifest, event store and checkpoints. Making,
    claiming, locking and opening one is the front ends' (:mod:`townsquare.launch.run_lock`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        #: set by the writer once the run is built: from then on a failure keeps the directory
        self.started = False

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
        state.write_atomic(self.manifest_path, data)

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
        content = state.loads(state.read_maybe_gzip(path))
        if not agents:
            content.pop("agents", None)
        elif "agent_parts" in content:
            found = sorted(self._part_entries(content.pop("agent_parts"), lambda index: True))
            content["agents"] = {agent_id: saved for _, agent_id, saved in found}
        return content

    def write_checkpoint(self, round: int, content: dict[str, Any], keep: int, members: dict[str, Iterable[str]] | None = None) -> Path:
        """Write round ``round``'s checkpoint (``members``: top-level objects given as their
        members' JSON text, written as they come: see :func:`townsquare.state.dump_chunks`) and
        drop all but the newest ``keep``, with their agent parts. Written last, after its agent
        parts: a checkpoint that exists is whole."""
        path = self.path / "checkpoints" / f"round-{round:06d}.json.gz"
        state.write_atomic(path, state.dump_chunks(content, members or {}), compress=True)
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
        state.write_atomic(self.path / "checkpoints" / name, (f"{line}\n".encode("utf-8") for line in lines), compress=True)
        return name

    def agent_entries(self, round: int, wanted: Callable[[int], bool]) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """``(index, id, saved)`` of the agents of round ``round``'s checkpoint whose index
        ``wanted`` picks: from its agent parts, decoding only the lines picked (so a shard
        reads its own agents whatever the number of shards that wrote them), or from its
        ``agents`` object (a checkpoint of one process: agents in index order)."""
        path = self.path / "checkpoints" / f"round-{round:06d}.json.gz"
        content = state.loads(state.read_maybe_gzip(path))
        if "agent_parts" in content:
            yield from self._part_entries(content["agent_parts"], wanted)
            return
        for index, (agent_id, saved) in enumerate(content.get("agents", {}).items()):
            if wanted(index):
                yield index, agent_id, saved

    def _part_entries(self, names: list[str], wanted: Callable[[int], bool]) -> Iterator[tuple[int, str, dict[str, Any]]]:
        for name in names:
            with gzip.open(self.path / "checkpoints" / name, "rt", encoding="utf-8") as fh:
                for line in fh:
                    head, _, entry = line.partition("\t")
                    if entry and wanted(int(head)):
                        (agent_id, saved), = state.loads(("{" + entry + "}").encode("utf-8")).items()
                        yield int(head), agent_id, saved
