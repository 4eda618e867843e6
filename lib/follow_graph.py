"""The follow graph a finished run ends with, read from its ``follows`` table (metrics and
reports that need who follows whom)."""

from __future__ import annotations

import sqlite3


def follow_edges(db: sqlite3.Connection) -> set[tuple[str, str]]:
    """The follower -> followee edges at the end of the recorded rounds: the ``follows`` table
    replayed in order (a follow adds the edge, an unfollow removes it)."""
    edges: set[tuple[str, str]] = set()
    for follower, followee, kind in db.execute("SELECT follower, followee, kind FROM follows ORDER BY seq"):
        if kind == "follow":
            edges.add((follower, followee))
        elif kind == "unfollow":
            edges.discard((follower, followee))
    return edges
