"""The run directory ``runs/<name>/``.

::

    manifest.json          scenario (after overrides), overrides, seed, slot table, plugins and
                           versions, townsquare version, status
    events.sqlite          the trace (see townsquare.store)
    checkpoints/round-000011.json.gz
                           every component's state after round 11

Crash safety: a round's rows are committed in one transaction, then its checkpoint is written
atomically. ``resume`` loads the newest checkpoint and deletes rows of later rounds, so a run
killed at any point (kill -9 mid-round included) continues with no event lost or duplicated.
"""

from __future__ import annotations

import json
import platform as _platform
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import state as state_codec
from .errors import UsageError

CHECKPOINT_RE = re.compile(r"^round-(\d{6})\.json\.gz$")


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    # ------------------------------------------------------------------ creation

    @classmethod
    def create(cls, out: str | Path | None, name: str) -> "RunDir":
        """A new, empty run directory: ``out`` if given, else ``runs/<name>`` (``-2``, ``-3``...
        appended when that exists), so an earlier run is never overwritten."""
        if out is not None:
            path = Path(out)
            if path.exists() and any(path.iterdir()):
                raise UsageError(f"--out {path}: directory exists and is not empty")
        else:
            base = Path("runs") / _slug(name)
            path, n = base, 1
            while path.exists():
                n += 1
                path = base.with_name(f"{base.name}-{n}")
        (path / "checkpoints").mkdir(parents=True, exist_ok=True)
        return cls(path)

    @classmethod
    def open(cls, path: str | Path) -> "RunDir":
        run = cls(path)
        if not (run.path / "manifest.json").is_file():
            raise UsageError(f"{path}: not a run directory (no manifest.json)")
        return run

    # ------------------------------------------------------------------ files

    @property
    def events_path(self) -> Path:
        return self.path / "events.sqlite"

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def read_manifest(self) -> dict[str, Any]:
        try:
            return json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UsageError(f"{self.manifest_path}: not valid JSON ({exc})") from None

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        data = json.dumps(manifest, indent=2, sort_keys=False, default=str).encode()
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

    def latest_checkpoint(self) -> tuple[int, dict[str, Any]] | None:
        for round, path in reversed(self.checkpoints()):
            try:
                return round, state_codec.loads(state_codec.read_maybe_gzip(path))
            except (OSError, ValueError, EOFError):
                continue  # a damaged newest checkpoint: fall back to the one before
        return None

    def write_checkpoint(self, round: int, state: dict[str, Any], keep: int) -> Path:
        path = self.path / "checkpoints" / f"round-{round:06d}.json.gz"
        state_codec.write_atomic(path, state_codec.dumps(state), compress=True)
        for _, old in self.checkpoints()[:-keep]:
            old.unlink(missing_ok=True)
        return path


def environment() -> dict[str, str]:
    return {
        "python": _platform.python_version(),
        "platform": _platform.platform(),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
