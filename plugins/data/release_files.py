"""Turning a checked archive, or checked inputs, into a release's files in a staging folder
(shared by downloads and local imports)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from .archives import unpack
from .catalogue import FileEntry, Release
from .checksums import DataError
from .derive import derive


def install_archive(name: str, release: Release, archive: Path, folder: Path) -> None:
    """Put the dataset in ``archive`` (already checked against ``release.archive``) into ``folder``."""
    spec = release.archive
    assert spec is not None
    if spec.format == "file":
        shutil.copyfile(archive, folder / spec.root)
        return
    unpacked = unpack(archive, folder.parent / f"{name}.unpacked")
    root = unpacked / spec.root if spec.root else unpacked
    missing = [f for f in release.required if not (root / f).is_file()]
    if missing:
        raise DataError(f"wrong layout: {archive.name} has no {spec.root + '/' if spec.root else ''}{missing[0]}"
                        f"{f' (and {len(missing) - 1} more files)' if len(missing) > 1 else ''}, which {name} needs")
    for item in root.iterdir():
        shutil.move(str(item), folder / item.name)
    shutil.rmtree(unpacked, ignore_errors=True)


def write_derived(entry: FileEntry, source: Path, folder: Path, what: str) -> None:
    """Make ``entry`` from its (checked) input ``source`` and check it against its SHA-256."""
    assert entry.derive is not None
    data = derive(entry.derive, source, entry.options)
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256 or len(data) != entry.size:
        raise DataError(f"checksum mismatch: {entry.path} made from {what} has SHA-256 {digest} ({len(data):,} bytes), "
                        f"the recorded release {entry.sha256} ({entry.size:,} bytes)")
    target = folder / entry.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def input_of(release: Release, entry: FileEntry) -> FileEntry:
    found = next((i for i in release.inputs if i.path == entry.input), None)
    if found is None:
        raise DataError(f"{entry.path}: its input {entry.input!r} is not among the release's inputs")
    return found
