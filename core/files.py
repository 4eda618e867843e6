"""Reading files a user points a run at (persona files, knowledge files, key files...)."""

from __future__ import annotations

from pathlib import Path

from .errors import UsageError


def read_user_text(path: str | Path, what: str, max_mb: float | None = None, limit_name: str = "") -> str:
    """The text of ``path``; a missing, unreadable or (with ``max_mb``) oversized file is one
    :class:`UsageError` line that names the file and says what it should have been (``what``:
    "persona file", ...; ``limit_name``: the setting that raises ``max_mb``)."""
    try:
        if max_mb is not None:
            size = Path(path).stat().st_size
            if size > max_mb * 2**20:
                raise UsageError(f"{path}: {what} is {size / 2**20:.1f} MB, above {limit_name or 'the limit'} = {max_mb:g} MB")
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read {what}: {exc}") from None
