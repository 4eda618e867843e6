"""Memories shown in a prompt, bounded (issue 10, "bounded prompts"). Not a plugin.

Every prompt built from memory shows at most ``k`` records and at most ``max_chars``
characters of them, however long the run: a record that would pass the budget is cut (with an
ellipsis) if it is the first, or left out with everything after it. So a prompt's size is
bounded by its template plus ``max_chars``.
"""

from __future__ import annotations

from typing import Sequence

from townsquare.api import MemoryRecord

ELLIPSIS = "…"


def cut(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)].rstrip() + ELLIPSIS


def bounded(records: Sequence[MemoryRecord], k: int, max_chars: int) -> list[MemoryRecord]:
    """The first records (at most ``k``) whose lines fit in ``max_chars`` together."""
    kept: list[MemoryRecord] = []
    used = 0
    for record in records[:k]:
        cost = len(record.text) + 4  # the list marker and the newline
        if used + cost > max_chars and kept:
            break
        kept.append(record)
        used += cost
    return kept


def newest_bounded(records: Sequence[MemoryRecord], k: int, max_chars: int) -> list[MemoryRecord]:
    """Like :func:`bounded` for records oldest first: the newest ones are kept, order kept."""
    return bounded(list(records)[::-1], k, max_chars)[::-1]


def memory_lines(records: Sequence[MemoryRecord], k: int, max_chars: int, numbered: bool = False,
                 empty: str = "(nothing)") -> str:
    """The records as lines (``- text`` or ``1. text``) within the budget."""
    lines = []
    used = 0
    for i, record in enumerate(bounded(records, k, max_chars), 1):
        marker = f"{i}. " if numbered else "- "
        text = cut(record.text, max(1, max_chars - used - len(marker) - 1))
        lines.append(marker + text)
        used += len(lines[-1]) + 1
    return "\n".join(lines) if lines else empty
