"""Memories shown in a prompt, bounded. Not a plugin.

Every prompt built from memory shows at most ``k`` records and at most ``max_chars``
characters of them, however long the run: a record that would pass what is left of the budget is
skipped and the next ones are still tried (one long record never hides the shorter ones ranked
below it); only when not even one record fits is the first one shown, cut (with an ellipsis). So
a prompt's size is bounded by its template plus ``max_chars``.
"""

from __future__ import annotations

import re
from typing import Sequence

from townsquare.api import MemoryRecord

ELLIPSIS = "…"
#: the words of an answer that says there is nothing ("Nothing to plan for.", "None.", "No plans in
#: particular."): a note made only of these says nothing
NOTHING_WORDS = frozenset("nothing none no not n a na applicable there is are was were s to for of in particular "
                          "specific anything special new noted note notes plan plans planning remember worth the "
                          "this that conversation coming days day today from here it i we have has do need needs be "
                          "learned found took away heard got interesting much really important".split())


def says_nothing(text: str) -> bool:
    """Whether ``text`` is empty of content: blank, or only the words of "there is nothing" (see
    :data:`NOTHING_WORDS`). A note that names anything (a person, a time, a place, an act) says
    something."""
    words = re.findall(r"[a-z]+", text.lower())
    return not words or all(w in NOTHING_WORDS for w in words)


def cut(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)].rstrip() + ELLIPSIS


def bounded(records: Sequence[MemoryRecord], k: int, max_chars: int) -> list[MemoryRecord]:
    """At most ``k`` records, in order, whose lines fit in ``max_chars`` together: a record that
    does not fit what is left is skipped and the rest still tried; the first record (to be cut)
    when none fits."""
    kept: list[MemoryRecord] = []
    used = 0
    for record in records:
        if len(kept) == k:
            break
        cost = len(record.text) + 4  # the list marker and the newline
        if used + cost > max_chars:
            continue
        kept.append(record)
        used += cost
    return kept or list(records[:1])[:k]


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
