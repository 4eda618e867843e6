"""SHA-256 of files, and the one error every data command raises."""

from __future__ import annotations

import hashlib
from pathlib import Path

from townsquare.api import UsageError

CHUNK = 1 << 20


class DataError(UsageError):
    """A fetch that could not finish (no network, a checksum mismatch, a wrong layout): one line,
    exit status 1; nothing is installed."""

    exit_code = 1


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_file(path: Path, sha256: str, size: int | None, what: str) -> None:
    """``path`` has ``size`` bytes and SHA-256 ``sha256``, else a :class:`DataError` naming ``what``."""
    have_size = path.stat().st_size
    if size is not None and have_size != size:
        raise DataError(f"checksum mismatch: {what} has {have_size:,} bytes, the recorded release {size:,}")
    have = sha256_of(path)
    if have != sha256:
        raise DataError(f"checksum mismatch: {what} has SHA-256 {have}, the recorded release {sha256}")


def copy_checked(source: Path, target: Path, sha256: str, size: int | None, what: str) -> None:
    """Copy ``source`` to ``target``, hashing on the way; a mismatch leaves no ``target``."""
    if size is not None and source.stat().st_size != size:
        raise DataError(f"checksum mismatch: {what} has {source.stat().st_size:,} bytes, the recorded release {size:,}")
    digest = hashlib.sha256()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            dst.write(chunk)
    if digest.hexdigest() != sha256:
        target.unlink()
        raise DataError(f"checksum mismatch: {what} has SHA-256 {digest.hexdigest()}, the recorded release {sha256}")
