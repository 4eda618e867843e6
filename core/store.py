"""``events.sqlite``: the run's append-only trace.

Rows of a round are buffered while the round plays and written in one transaction at the
round's end, followed by the checkpoint. After a crash, ``resume`` deletes rows of rounds
newer than the last checkpoint, so every event is stored exactly once (see
:mod:`townsquare.rundir`). SQLite runs in WAL mode so a notebook can read a live run.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterator

from .errors import UsageError
from .state import json_encoder

SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (
    agent_id TEXT PRIMARY KEY, idx INTEGER, population TEXT, name TEXT, persona TEXT,
    activity REAL, start_round INTEGER, end_round INTEGER);
CREATE TABLE IF NOT EXISTS posts (
    post_id TEXT PRIMARY KEY, author_id TEXT, round INTEGER, created_at TEXT, text TEXT,
    reply_to TEXT, remote_id TEXT);
CREATE TABLE IF NOT EXISTS actions (
    seq INTEGER PRIMARY KEY, round INTEGER, created_at TEXT, agent_id TEXT, kind TEXT,
    target_post TEXT, target_agent TEXT, text TEXT, post_ids TEXT, ok INTEGER,
    result_id TEXT, error TEXT, detail TEXT);
CREATE TABLE IF NOT EXISTS follows (
    seq INTEGER PRIMARY KEY, round INTEGER, created_at TEXT, follower TEXT, followee TEXT, kind TEXT);
CREATE TABLE IF NOT EXISTS llm_calls (
    seq INTEGER PRIMARY KEY, round INTEGER, agent_id TEXT, purpose TEXT, provider TEXT, model TEXT,
    status TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, latency_ms REAL, cost REAL, error TEXT,
    error_kind TEXT, mode TEXT, cached_prefix_tokens INTEGER);
CREATE TABLE IF NOT EXISTS reflections (
    seq INTEGER PRIMARY KEY, round INTEGER, agent_id TEXT, source TEXT, kind TEXT, text TEXT, ids TEXT);
CREATE TABLE IF NOT EXISTS metrics (round INTEGER, name TEXT, value REAL, PRIMARY KEY (round, name));
CREATE TABLE IF NOT EXISTS rounds (
    round INTEGER PRIMARY KEY, sim_time TEXT, active INTEGER, actions INTEGER, llm_calls INTEGER,
    wall_seconds REAL);
CREATE INDEX IF NOT EXISTS actions_round ON actions(round);
CREATE INDEX IF NOT EXISTS llm_calls_round ON llm_calls(round);
"""

#: How buffered rows of each table are written.
INSERTS = {
    "posts": "INSERT INTO posts VALUES (?,?,?,?,?,?,?)",
    "actions": "INSERT INTO actions (round, created_at, agent_id, kind, target_post, target_agent, text, post_ids, ok, result_id, error, detail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
    "follows": "INSERT INTO follows (round, created_at, follower, followee, kind) VALUES (?,?,?,?,?)",
    "llm_calls": "INSERT INTO llm_calls (round, agent_id, purpose, provider, model, status, prompt_tokens, completion_tokens, latency_ms, cost, error, error_kind, mode, cached_prefix_tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "metrics": "INSERT OR REPLACE INTO metrics VALUES (?,?,?)",
    "reflections": "INSERT INTO reflections (round, agent_id, source, kind, text, ids) VALUES (?,?,?,?,?,?)",
}

#: Tables that carry a ``round`` column and are truncated on resume.
ROUND_TABLES = ("posts", "actions", "follows", "llm_calls", "reflections", "metrics", "rounds")

#: Tables ``townsquare export`` writes, with the order of their rows.
EXPORT_TABLES = {
    "agents": "idx",
    "posts": "round, rowid",
    "actions": "seq",
    "follows": "seq",
    "llm_calls": "seq",
    "reflections": "seq",
    "metrics": "round, name",
}


class EventStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, isolation_level=None)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            _add_missing_columns(self.db)
        except sqlite3.DatabaseError as exc:  # not a database, or a damaged one: the run's trace is lost
            self.db.close()
            raise UsageError(f"{self.path}: not a readable event store ({exc}); the run's trace is damaged: "
                             "restore the file from a copy, or start the run again") from None
        self._pending: dict[str, list[tuple]] = {}

    # ------------------------------------------------------------------ writing

    def add_agents(self, rows: list[tuple]) -> None:
        with self.transaction():
            self.db.executemany("INSERT OR REPLACE INTO agents VALUES (?,?,?,?,?,?,?,?)", rows)

    def update_persona(self, agent_id: str, name: str, persona: dict[str, Any]) -> None:
        """An agent's new persona (an intervention's), in its ``agents`` row at once."""
        self.db.execute("UPDATE agents SET name = ?, persona = ? WHERE agent_id = ?",
                        (name, json.dumps(persona, ensure_ascii=False), agent_id))

    def buffer(self, table: str, row: tuple) -> None:
        self._pending.setdefault(table, []).append(row)

    def pending(self, table: str) -> list[tuple]:
        return self._pending.setdefault(table, [])

    def commit_round(self, round_row: tuple) -> None:
        """Write the buffered rows of a round and its ``rounds`` row in one transaction."""
        with self.transaction():
            for table, sql in INSERTS.items():
                rows = self._pending.get(table)
                if rows:
                    self.db.executemany(sql, _complete(table, rows))
            self.db.execute("INSERT OR REPLACE INTO rounds VALUES (?,?,?,?,?,?)", round_row)
        self._pending.clear()

    def write_now(self, table: str, rows: list[tuple]) -> None:
        """Write rows outside a round (LLM calls made while a run is built)."""
        with self.transaction():
            self.db.executemany(INSERTS[table], _complete(table, rows))

    def discard_pending(self) -> None:
        self._pending.clear()

    def truncate_after(self, round: int) -> int:
        """Delete rows of rounds after ``round`` (a crash left them without a checkpoint).

        Failed LLM attempts (``llm_calls`` rows with status ``error``) stay: they happened, and
        the replayed round does not repeat them (its answers come from the response cache)."""
        deleted = 0
        with self.transaction():
            for table in ROUND_TABLES:
                keep = " AND status != 'error'" if table == "llm_calls" else ""
                deleted += self.db.execute(f"DELETE FROM {table} WHERE round > ?{keep}", (round,)).rowcount
        return deleted

    def transaction(self):
        return _Transaction(self.db)

    # ------------------------------------------------------------------ reading

    def count(self, table: str, where: str = "", params: tuple = ()) -> int:
        sql = f"SELECT COUNT(*) FROM {table}" + (f" WHERE {where}" if where else "")
        return int(self.db.execute(sql, params).fetchone()[0])

    def rows(self, table: str) -> tuple[list[str], Iterator[tuple]]:
        order = EXPORT_TABLES.get(table, "rowid")
        cursor = self.db.execute(f"SELECT * FROM {table} ORDER BY {order}")
        return [d[0] for d in cursor.description], iter(cursor)

    def last_round(self) -> int | None:
        value = self.db.execute("SELECT MAX(round) FROM rounds").fetchone()[0]
        return None if value is None else int(value)

    def close(self) -> None:
        self.db.close()


#: Columns added after the first release, with their type: a run directory made before them
#: gets them on open (``resume``, ``export``), empty in its old rows.
ADDED_COLUMNS = {"llm_calls": {"error_kind": "TEXT", "mode": "TEXT", "cached_prefix_tokens": "INTEGER"}}


def _complete(table: str, rows: list[tuple]) -> list[tuple]:
    """``llm_calls`` rows made without the columns added since (a caller's 12-field row has
    no ``mode``) get them empty."""
    width = INSERTS[table].count("?")
    if rows and len(rows[0]) < width:
        return [row + (None,) * (width - len(row)) for row in rows]
    return rows


def _add_missing_columns(db: sqlite3.Connection) -> None:
    for table, columns in ADDED_COLUMNS.items():
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        for name, kind in columns.items():
            if name not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN")
        return self.db

    def __exit__(self, exc_type, exc, tb):
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        return False


#: ``json.dumps(detail, sort_keys=True)`` builds an encoder per call; one kept is the same text
_DETAIL_JSON = json_encoder(sort_keys=True)


def dumps_detail(detail: dict[str, Any]) -> str | None:
    return _DETAIL_JSON(detail) if detail else None
