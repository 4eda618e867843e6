"""Simulated times as float hours, the unit of Park et al.'s recency decay. Not a plugin."""

from __future__ import annotations

from datetime import datetime, timezone

_HOUR = 3600.0


def hours(when: datetime) -> float:
    """``when`` as hours on one axis (a naive time is read as UTC, so no DST gap shifts it)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp() / _HOUR
