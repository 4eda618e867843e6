"""``townsquare data fetch NAME --from PATH``: a local copy, verified like a download.

PATH may be the release's own archive (its SHA-256 must match), the input a release is
derived from, any zip or tar of the dataset's files, or a folder that holds them. In a folder
the files are looked for under each of the entry's ``roots`` in turn (so both a copy of the
dataset's folder and a clone of its source repository work), at their installed path or
their ``upstream`` path; a derived file may be made from its input found there instead. Only
the manifest's files are copied, each checked against its SHA-256 on the way; other files in
the copy are left out. An entry known only by its archive checksum cannot vouch for an
unpacked folder: import the archive instead.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .archives import is_archive, unpack
from .catalogue import Dataset, FileEntry, Release
from .checksums import DataError, copy_checked, sha256_of
from .layout_copy import import_layout
from .release_files import input_of, install_archive, write_derived


def check_source(path: Path) -> None:
    """``path`` is a folder or a regular file, else one line: a device (``/dev/zero``), a pipe or
    a socket is never read, it may not end."""
    if not path.exists():
        raise DataError(f"--from {path}: no such file or folder")
    if not (path.is_dir() or path.is_file()):
        raise DataError(f"--from {path}: not a regular file or a folder (a device, pipe or socket is not read)")


def import_copy(dataset: Dataset, path: Path, folder: Path) -> tuple[Release, int]:
    """Lay out ``dataset`` from the local ``path`` in ``folder``; the release it matched and
    how many files of the copy were left out."""
    check_source(path)
    known_by_layout = [r for r in dataset.releases if r.layout]
    if known_by_layout and len(known_by_layout) == len(dataset.releases):
        return known_by_layout[0], import_layout(dataset, known_by_layout[0], path, folder)
    if path.is_dir():
        return _from_folder(dataset, path, folder, [path / r if r else path for r in dataset.roots])
    digest = sha256_of(path)
    for release in dataset.releases:
        if release.archive is not None and release.archive.sha256 == digest:
            install_archive(dataset.name, release, path, folder)
            return release, 0
        if len(release.files) == 1 and release.files[0].derive is None and release.files[0].sha256 == digest:
            copy_checked(path, folder / release.files[0].path, digest, release.files[0].size, str(path))
            return release, 0
        derived = [f for f in release.files if f.derive is not None]
        if derived and len(derived) == len(release.files) and all(input_of(release, f).sha256 == digest for f in derived):
            for entry in derived:
                write_derived(entry, path, folder, str(path))
            return release, 0
    if is_archive(path):
        holder = Path(tempfile.mkdtemp(prefix="unpacked-", dir=folder.parent))
        try:
            unpacked = unpack(path, holder)
            tops = [p for p in unpacked.iterdir()]
            top = tops[0] if len(tops) == 1 and tops[0].is_dir() else None
            roots = [unpacked / r if r else unpacked for r in dataset.roots]
            if top is not None:
                roots += [top / r if r else top for r in dataset.roots]
            return _from_folder(dataset, path, folder, roots, shown=path)
        finally:
            shutil.rmtree(holder, ignore_errors=True)
    expected = "; ".join(f"{r.archive.url.rsplit('/', 1)[-1]} has SHA-256 {r.archive.sha256}" for r in dataset.releases if r.archive)
    raise DataError(f"checksum mismatch: {path} has SHA-256 {digest}, which is no recorded release of {dataset.name}"
                    f"{' (' + expected + ')' if expected else ''}, and it is not an archive of its files")


def _locate(entry: FileEntry, root: Path) -> Path | None:
    for rel in (entry.path, entry.upstream):
        if rel and (root / rel).is_file():
            return root / rel
    return None


def _plan(release: Release, root: Path) -> dict[str, tuple[FileEntry, Path, bool]] | None:
    """Where each of ``release``'s files is under ``root`` (``(entry, path, is_input)``), or None."""
    found = {}
    for entry in release.files:
        at = _locate(entry, root)
        if at is not None:
            found[entry.path] = (entry, at, False)
            continue
        if entry.derive is not None:
            source = input_of(release, entry)
            at = _locate(source, root)
            if at is not None:
                found[entry.path] = (source, at, True)
                continue
        return None
    return found


def _from_folder(dataset: Dataset, path: Path, folder: Path, roots: list[Path], shown: Path | None = None) -> tuple[Release, int]:
    shown = shown or path
    mismatch: DataError | None = None
    for release in (r for r in dataset.releases if r.files):
        for root in roots:
            plan = _plan(release, root) if root.is_dir() else None
            if plan is None:
                continue
            try:
                _copy(release, plan, folder)
            except DataError as exc:  # perhaps another release's copy, or another root
                mismatch = mismatch or exc
                _clear(folder)
                continue
            used = {p for _, p, _ in plan.values()}
            return release, sum(1 for p in root.rglob("*") if p.is_file() and p not in used)
    for release in (r for r in dataset.releases if r.archive is not None):
        name = release.archive.url.rsplit("/", 1)[-1]
        for root in [path, *roots]:
            if (root / name).is_file():
                return import_copy(dataset, root / name, folder)[0], 0
        if any(root.is_dir() and all((root / f).is_file() for f in release.required) for root in roots):
            which = "matches no recorded per-file manifest" if mismatch else "has only its archive's checksum recorded"
            raise DataError(f"{shown} holds an unpacked {dataset.name} that {which}: import the archive itself "
                            f"(--from .../{name}), whose SHA-256 is checked")
    if mismatch is not None:
        raise mismatch
    raise DataError(f"wrong layout: {shown} does not hold {dataset.name}'s files ({_first_missing(dataset, roots)})")


def _copy(release: Release, plan: dict[str, tuple[FileEntry, Path, bool]], folder: Path) -> None:
    for path, (entry, at, is_input) in plan.items():
        if is_input:
            wanted = next(f for f in release.files if f.path == path)
            if sha256_of(at) != entry.sha256:
                raise DataError(f"checksum mismatch: {at} is not the recorded {entry.path} (SHA-256 {entry.sha256})")
            write_derived(wanted, at, folder, str(at))
        else:
            copy_checked(at, folder / entry.path, entry.sha256, entry.size, str(at))


def _clear(folder: Path) -> None:
    for item in folder.iterdir():
        shutil.rmtree(item) if item.is_dir() else item.unlink()


def _first_missing(dataset: Dataset, roots: list[Path]) -> str:
    """What the nearest root lacks, for the error line."""
    best: tuple[int, str] | None = None
    for release in dataset.releases:
        wanted = [f.path for f in release.files] or list(release.required)
        for root in roots:
            missing = [w for w in wanted if not (root / w).is_file()]
            if missing and (best is None or len(missing) < best[0]):
                best = (len(missing), f"no {root / missing[0]}" + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
    return best[1] if best else "nothing found"
