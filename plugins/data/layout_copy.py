"""``townsquare data fetch NAME --from PATH`` for a dataset known by its layout only (no checksum
published, downloaded by hand: :mod:`.catalogue`, ``layout`` releases).

PATH may be an archive of the dataset (zip or tar), a folder holding it (under any of the
entry's ``roots``), or a single file that one of the patterns names (one MADOC community's
``.parquet``). The files matching the release's patterns are copied, their relative paths
kept; every pattern must match at least one file. Other files of the copy are left out.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path, PurePosixPath

from .archives import is_archive, unpack
from .catalogue import Dataset, Release
from .checksums import DataError


def import_layout(dataset: Dataset, release: Release, path: Path, folder: Path) -> int:
    """Copy ``dataset``'s files from ``path`` into ``folder``; how many files were left out."""
    if path.is_file() and not is_archive(path):
        if not any(PurePosixPath(path.name).match(pattern) for pattern in release.layout):
            raise DataError(f"wrong layout: {path} is none of {dataset.name}'s files ({', '.join(release.layout)})")
        shutil.copyfile(path, folder / path.name)
        return 0
    if path.is_dir():
        return _from_roots(dataset, release, path, [path / r if r else path for r in dataset.roots], folder)
    holder = Path(tempfile.mkdtemp(prefix="unpacked-", dir=folder.parent))
    try:
        unpacked = unpack(path, holder)
        tops = list(unpacked.iterdir())
        roots = [unpacked / r if r else unpacked for r in dataset.roots]
        if len(tops) == 1 and tops[0].is_dir():
            roots += [tops[0] / r if r else tops[0] for r in dataset.roots]
        return _from_roots(dataset, release, path, roots, folder)
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def _matches(root: Path, release: Release) -> dict[str, list[Path]]:
    return {pattern: sorted(p for p in root.glob(pattern) if p.is_file()) for pattern in release.layout}


def _from_roots(dataset: Dataset, release: Release, shown: Path, roots: list[Path], folder: Path) -> int:
    nearest: tuple[int, Path, str] | None = None
    for root in (r for r in roots if r.is_dir()):
        found = _matches(root, release)
        missing = [pattern for pattern, paths in found.items() if not paths]
        if missing:
            if nearest is None or len(missing) < nearest[0]:
                nearest = (len(missing), root, missing[0])
            continue
        copied = {p for paths in found.values() for p in paths}
        for source in sorted(copied):
            target = folder / source.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        return sum(1 for p in root.rglob("*") if p.is_file() and p not in copied)
    where = f"no {nearest[2]} in {nearest[1]}" if nearest else "no folder of it"
    raise DataError(f"wrong layout: {shown} does not hold {dataset.name} ({where}; it needs {', '.join(release.layout)})")
