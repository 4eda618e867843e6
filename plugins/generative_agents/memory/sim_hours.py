"""Simulated times as float hours, the unit of Park et al.'s recency decay. Not a plugin."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=timezone.utc)
_HOUR = timedelta(hours=1)


def hours(when: datetime) -> float:
    """``when`` as hours since 1970 (a naive time is read as UTC, so no DST gap shifts it)."""
    return (when - (_EPOCH if when.tzinfo is None else _EPOCH_UTC)) / _HOUR
