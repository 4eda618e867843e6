"""Reading files a user points a run at (persona files, knowledge files, key files...)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterable

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


def read_user_csv(path: str | Path, required: Iterable[str], what: str = "CSV file") -> list[dict[str, str]]:
    """The rows of the CSV file ``path`` as dicts; a missing file, a missing ``required``
    column or an unreadable file is one :class:`UsageError` line naming the file."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise UsageError(f"{path}: missing column {missing[0]!r}")
            return list(reader)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{path}: cannot read {what}: {exc}") from None
