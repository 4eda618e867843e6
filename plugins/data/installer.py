"""Putting a dataset in place, all at once, or not at all.

A dataset is assembled in ``<data home>/.staging/<name>-<token>/<name>/``, verified there,
given its marker (:data:`townsquare.api.DATASET_MARKER`: what, which release, from where,
every file's SHA-256) and then moved to ``<data home>/<name>`` in one rename. Whatever fails
before the rename removes the staging folder, so ``<data home>/<name>`` is either the whole
verified dataset or absent. Downloads in progress wait in ``<data home>/.partial/<name>/`` for
the next fetch to resume them; a finished install removes them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from townsquare.api import UsageError
from townsquare.lib.data_paths import MARKER as DATASET_MARKER, data_home, dataset_folder

from .catalogue import Dataset, Release, manifest_digest
from .checksums import DataError, sha256_of

STAGING = ".staging"
PARTIAL = ".partial"


def partial_dir(name: str) -> Path:
    return data_home() / PARTIAL / name


def drop_empty_partial(name: str) -> None:
    """After a failed fetch: no empty ``.partial`` folders (a cut download's part stays)."""
    _drop_if_empty(partial_dir(name))
    _drop_if_empty(partial_dir(name).parent)


@contextmanager
def staging(name: str) -> Iterator[Path]:
    """A fresh folder to assemble dataset ``name`` in; removed when the block fails."""
    root = data_home() / STAGING
    root.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
    folder = holder / name
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(holder, ignore_errors=True)
        _drop_if_empty(root)


def _drop_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty: another fetch is assembling there
        pass


def file_sums(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` but the marker, by path relative to it."""
    return {p.relative_to(folder).as_posix(): sha256_of(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != DATASET_MARKER}


def commit(folder: Path, dataset: Dataset, release: Release, origin: str, *, replace: bool = False,
           terms: str = "") -> dict[str, Any]:
    """Write the marker into the assembled ``folder`` and move it into place (one rename)."""
    files = file_sums(folder)
    marker = {
        "name": dataset.name, "title": dataset.title, "version": release.version, "source": dataset.source,
        "licence": dataset.licence, "terms": dataset.terms or None, "terms_accepted": terms or None,
        "verified": release.verified_by, "fingerprint": manifest_digest(files) if release.layout else release.fingerprint, "from": origin,
        "installed": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "manifest_sha256": manifest_digest(files), "files": files,
    }
    (folder / DATASET_MARKER).write_text(json.dumps(marker, indent=1, ensure_ascii=False), encoding="utf-8")
    target = dataset_folder(dataset.name)
    old = None
    if target.exists():
        if not replace:
            raise UsageError(f"dataset {dataset.name!r} is already at {target}: `townsquare data remove {dataset.name}` first, or add --force")
        old = folder.parent / f"{dataset.name}.old"
        os.rename(target, old)
    try:
        os.rename(folder, target)
    except OSError as exc:
        if old is not None:
            os.rename(old, target)
        raise DataError(f"cannot move {dataset.name} into {target}: {exc}") from None
    shutil.rmtree(partial_dir(dataset.name), ignore_errors=True)
    _drop_if_empty(partial_dir(dataset.name).parent)
    return marker


def remove(name: str) -> list[str]:
    """Remove installed dataset ``name`` and its unfinished downloads; what was removed."""
    removed = []
    target = dataset_folder(name)
    if target.exists():
        root = data_home() / STAGING
        root.mkdir(parents=True, exist_ok=True)
        holder = Path(tempfile.mkdtemp(prefix=f"{name}-removed-", dir=root))
        os.rename(target, holder / name)  # gone from its place at once, then deleted
        shutil.rmtree(holder, ignore_errors=True)
        _drop_if_empty(root)
        removed.append(str(target))
    partial = partial_dir(name)
    if partial.exists():
        shutil.rmtree(partial, ignore_errors=True)
        _drop_if_empty(partial.parent)
        removed.append(f"{partial} (unfinished downloads)")
    return removed
