"""Reading files a user points a run at (persona files, knowledge files, key files...)."""

from __future__ import annotations

from pathlib import Path

from .errors import UsageError


def read_user_text(path: str | Path, what: str) -> str:
    """The text of ``path``; a missing or unreadable file is one :class:`UsageError` line that
    names the file and says what it should have been (``what``: "persona file", ...)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read {what}: {exc}") from None
