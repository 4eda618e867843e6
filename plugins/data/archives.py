"""Unpacking a downloaded or imported archive (zip, tar, tar.gz, tar.bz2, tar.xz) into a folder.

Only plain files and folders come out: a member whose path is absolute or climbs out with
``..``, and links and devices, are refused (an archive cannot write outside the folder).
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from .checksums import CHUNK, DataError



def is_archive(path: Path) -> bool:
    return path.is_file() and (zipfile.is_zipfile(path) or tarfile.is_tarfile(path))


def _safe(name: str, archive: Path) -> PurePosixPath:
    member = PurePosixPath(name.replace("\\", "/"))
    if member.is_absolute() or ".." in member.parts:
        raise DataError(f"{archive}: refuses member {name!r} (it would land outside the dataset's folder)")
    return member


def unpack(archive: Path, into: Path) -> Path:
    """Unpack ``archive`` into the folder ``into`` (made here); returns ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zipped:
                for info in zipped.infolist():
                    member = _safe(info.filename, archive)
                    target = into.joinpath(*member.parts)
                    if info.is_dir():
                        target.mkdir(parents=True, exist_ok=True)
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zipped.open(info) as src, open(target, "wb") as dst:
                        shutil.copyfileobj(src, dst, CHUNK)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tarred:
                for info in tarred:
                    member = _safe(info.name, archive)
                    target = into.joinpath(*member.parts)
                    if info.isdir():
                        target.mkdir(parents=True, exist_ok=True)
                    elif info.isfile():
                        target.parent.mkdir(parents=True, exist_ok=True)
                        with tarred.extractfile(info) as src, open(target, "wb") as dst:  # type: ignore[union-attr]
                            shutil.copyfileobj(src, dst, CHUNK)
                    else:
                        raise DataError(f"{archive}: refuses member {info.name!r} (links and devices are not unpacked)")
        else:
            raise DataError(f"{archive}: not a zip or tar archive")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise DataError(f"{archive}: cannot unpack ({exc})") from None
    return into
