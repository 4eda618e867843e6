"""The files a run reads, fingerprinted in its manifest, so a resumed run reads them as recorded.

An input is a setting that changes what agents do (:mod:`townsquare.launch.settings_kinds`) whose
value names an existing file or folder: a ``data:`` path into an installed dataset, an
absolute path, or a path relative to the scenario's folder with a ``/`` or a file suffix
(``personas.jsonl``). The manifest's ``inputs`` maps its key to the path as written and the
SHA-256 of its bytes (of a folder: of its files' relative paths and digests, hidden files left
out). Only regular files are read: a device or a pipe is never an input.

``resume`` and ``replay`` compare each with what is there now: a file edited, replaced or
removed since is one line naming it (exit 2). ``resume --accept-changed-inputs`` goes on with
the new copy; the manifest then records the change and the round it took effect from
(``input_changes``) and fingerprints the new copy.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from townsquare.errors import UsageError
from townsquare.scenario import DATA_PREFIX, ResolvedScenario, resolve_datasets
from .settings_kinds import key_text, leaves, steers_machinery

CHUNK = 1 << 20


def input_fingerprints(scenario: ResolvedScenario, plugins: Any) -> dict[str, dict[str, Any]]:
    """``{key: {"path", "sha256", "file"}}`` for every input of ``scenario`` (``file``: where it is now)."""
    resolved = leaves(resolve_datasets(scenario.data, scenario.source, plugins)[0])
    found = {}
    for path, value in leaves(scenario.data).items():
        if not isinstance(value, str) or steers_machinery(path, scenario, plugins.registry):
            continue
        target = input_path(value, resolved.get(path), scenario.base_dir)
        digest = fingerprint(target) if target is not None else None
        if digest is not None:
            found[key_text(path)] = {"path": value, "sha256": digest, "file": str(target)}
    return found


def recorded_inputs(found: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """What the manifest keeps of :func:`input_fingerprints` (not where the files are on this machine)."""
    return {key: {"path": entry["path"], "sha256": entry["sha256"]} for key, entry in found.items()}


def input_path(value: str, resolved: Any, base_dir: str) -> Path | None:
    """The file or folder a scenario value names, or None when it names none."""
    if value.startswith(DATA_PREFIX):
        path = Path(str(resolved))
    elif "\n" in value or len(value) > 4096 or not ("/" in value or Path(value).suffix):
        return None
    else:
        path = Path(value).expanduser()
        path = path if path.is_absolute() else Path(base_dir) / path
    try:
        return path if path.is_file() or path.is_dir() else None
    except OSError:
        return None


def fingerprint(path: Path) -> str | None:
    """SHA-256 of a regular file's bytes, or of a folder's files (relative path and digest each,
    hidden ones left out); None when it cannot be read."""
    try:
        if path.is_file():
            digest = hashlib.sha256()
            with open(path, "rb") as fh:
                while chunk := fh.read(CHUNK):
                    digest.update(chunk)
            return digest.hexdigest()
        listing = hashlib.sha256()
        for item in sorted(path.rglob("*")):
            relative = item.relative_to(path)
            if item.is_file() and not any(part.startswith(".") for part in relative.parts):
                listing.update(f"{relative.as_posix()}\0{fingerprint(item)}\n".encode())
        return listing.hexdigest()
    except OSError:
        return None


def input_changes(recorded: dict[str, Any], now: dict[str, dict[str, Any]], from_round: int) -> list[dict[str, Any]]:
    """The inputs of ``recorded`` (a manifest's ``inputs``) that differ ``now`` (``sha256`` None:
    gone), each with the round the change takes effect from: the manifest's ``input_changes``."""
    return [{"key": key, "path": was.get("path"), "sha256_before": was.get("sha256"),
             "sha256": now[key]["sha256"] if key in now else None, "from_round": from_round}
            for key, was in recorded.items() if now.get(key, {}).get("sha256") != was.get("sha256")]


def check_inputs(manifest: dict[str, Any], scenario: ResolvedScenario, plugins: Any, done: int,
                 accept: bool | None = False) -> list[dict[str, Any]]:
    """Every input the manifest fingerprinted against the files there now: a difference is one
    :class:`UsageError` naming the file, unless ``accept`` (then the changes are returned, for
    the manifest; None: accepting is not offered, as by ``replay``). A manifest without
    ``inputs`` (made before they were recorded) checks nothing."""
    recorded = manifest.get("inputs") or {}
    now = input_fingerprints(scenario, plugins) if recorded else {}
    changes = input_changes(recorded, now, done)
    for change in changes:
        if change["sha256"] is not None and accept:
            continue
        key = change["key"]
        where = now[key]["file"] if key in now else change["path"]
        what = "is gone or unreadable" if change["sha256"] is None else "has changed"
        how = "restore it" if change["sha256"] is None or accept is None else \
            f"restore it, or give --accept-changed-inputs to read it as it is now from round {done} on"
        raise UsageError(f"{where}: {what} since the run recorded it ({key}, SHA-256 {str(change['sha256_before'])[:12]}...); "
                         f"a run goes on with its inputs as recorded: {how}")
    return changes
