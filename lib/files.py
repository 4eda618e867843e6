"""Reading files a user points a run at (persona files, knowledge files, key files...)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Iterable

from townsquare.errors import UsageError


def read_user_text(path: str | Path, what: str, max_mb: float | None = None, limit_name: str = "") -> str:
    """The text of ``path``; a missing, unreadable or (with ``max_mb``) oversized file is one
    :class:`UsageError` line that names the file and says what it should have been (``what``:
    "persona file", ...; ``limit_name``: the setting that raises ``max_mb``). The size is
    checked by reading at most ``max_mb`` and one byte more, not by trusting ``stat()``: a
    device (``/dev/zero``), a pipe or a file still growing has no size to trust."""
    try:
        with open(path, "rb") as fh:
            if max_mb is None:
                data = fh.read()
            else:
                limit = int(max_mb * 2**20)
                data = fh.read(limit + 1)
                if len(data) > limit:
                    size = os.fstat(fh.fileno()).st_size
                    how_big = f"{size / 2**20:.1f} MB" if size > limit else f"more than {max_mb:g} MB"
                    raise UsageError(f"{path}: {what} is {how_big}, above {limit_name or 'the limit'} = {max_mb:g} MB")
        return data.decode("utf-8")
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


def parse_json_list(text: str, path: str | Path, items: str) -> list[Any]:
    """``text`` (the content of ``path``) as a JSON list; invalid JSON or another JSON value is
    one :class:`UsageError` line naming the file (``items``: what the list holds, for the message)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, list):
        raise UsageError(f"{path}: expected a JSON list of {items}")
    return data


def read_json_lines(path: str | Path, what: str, max_mb: float | None = None, limit_name: str = "") -> list[tuple[str, Any]]:
    """``(where, value)`` for every non-blank line of the JSON Lines file ``path`` (``where``:
    ``path:line``, for the reader's own one-line errors about a value); the file as
    :func:`read_user_text` reads it, a line that is not JSON one :class:`UsageError` naming it."""
    out = []
    for number, line in enumerate(read_user_text(path, what, max_mb, limit_name).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            out.append((where, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    return out
