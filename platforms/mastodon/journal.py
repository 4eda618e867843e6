"""The exactly-once journal: ``<run_dir>/mastodon_journal.sqlite``.

Every write the adapter sends is keyed by ``(round, position)``: the action's place in the
round's apply order, which a resumed run reproduces exactly (the engine replays a crashed
round from the last checkpoint with the same actions in the same order). Before a request
goes out, an *intent* row is committed; when the answer comes, the row becomes *done* with
the Mastodon id, committed before the adapter moves on. On replay:

- a done row whose fingerprint matches is answered from the journal: nothing is sent;
- an intent without an answer (the process died while the request was in flight) is sent
  again, safely: a post carries the same Idempotency-Key, and favourite, reblog, follow and
  unfollow are idempotent on the server.

Accounts are journaled too (agent id -> remote id, username): never a token; so are *orphans*,
accounts a sign-up made on the server that the run could not use (the answer was lost and the
server allows no password login: :func:`.accounts.sign_up`), for ``townsquare mastodon cleanup``
to remove. Done rows also
serve the per-account caps (statuses per 3 hours, follows per day, counted in wall time) and
let reads hide writes that a replayed round has not re-reached yet (see ``future``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JOURNAL_NAME = "mastodon_journal.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS accounts (
    agent_id TEXT PRIMARY KEY, remote_id TEXT NOT NULL, username TEXT NOT NULL, acct TEXT NOT NULL,
    source TEXT NOT NULL, profile TEXT, idx INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS writes (
    round INTEGER NOT NULL, position INTEGER NOT NULL, agent_id TEXT NOT NULL, kind TEXT NOT NULL,
    fingerprint TEXT NOT NULL, family TEXT, target_remote TEXT, state TEXT NOT NULL,
    ok INTEGER, created_id TEXT, remote_id TEXT, error TEXT, wall REAL NOT NULL, action TEXT,
    PRIMARY KEY (round, position)
);
CREATE INDEX IF NOT EXISTS writes_caps ON writes (agent_id, family, wall);
CREATE TABLE IF NOT EXISTS orphans (
    username TEXT PRIMARY KEY, agent_id TEXT NOT NULL, reason TEXT NOT NULL, wall REAL NOT NULL, removed INTEGER NOT NULL DEFAULT 0
);
"""


@dataclass(frozen=True)
class JournalRow:
    round: int
    position: int
    agent_id: str
    kind: str
    fingerprint: str
    family: str | None
    target_remote: str | None
    state: str  # "intent" | "done"
    ok: bool | None
    created_id: str | None
    remote_id: str | None
    error: str | None
    wall: float
    action: dict[str, Any] | None = None  # the action itself (intents only: to reconcile them)


def fingerprint(action: Any) -> str:
    """What identifies an action across a replay: who does what to which target."""
    key = json.dumps([action.agent_id, action.kind, action.target_post, action.target_agent, action.text], ensure_ascii=False)
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class Journal:
    """The journal file (or an in-memory one when a platform is built without a run dir)."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self.db = sqlite3.connect(":memory:" if path is None else str(path), check_same_thread=False, isolation_level=None)
        if path is not None:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        if self.meta("run_key") is None:
            # A random key per run: idempotency keys and sign-up usernames of two runs never meet.
            self.set_meta("run_key", uuid.uuid4().hex[:12])

    @property
    def run_key(self) -> str:
        return self.meta("run_key") or ""

    def close(self) -> None:
        with self._lock:
            self.db.close()

    # ------------------------------------------------------------------ meta

    def meta(self, key: str) -> str | None:
        with self._lock:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------------ accounts

    def account(self, agent_id: str) -> dict[str, Any] | None:
        return self.accounts().get(agent_id)

    def accounts(self) -> dict[str, dict[str, Any]]:
        """Agent id -> remote_id, username, acct, source, profile (a hash) and index (the
        agent's place in the build order, which picks its line of a tokens file)."""
        with self._lock:
            rows = self.db.execute("SELECT agent_id, remote_id, username, acct, source, profile, idx FROM accounts ORDER BY idx").fetchall()
        return {r[0]: {"remote_id": r[1], "username": r[2], "acct": r[3], "source": r[4], "profile": r[5], "index": r[6]} for r in rows}

    def put_account(self, agent_id: str, remote_id: str, username: str, acct: str, source: str, profile: str | None,
                    index: int = 0) -> None:
        with self._lock:
            self.db.execute(
                "INSERT OR REPLACE INTO accounts (agent_id, remote_id, username, acct, source, profile, idx) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (agent_id, remote_id, username, acct, source, profile, index),
            )

    def put_orphan(self, username: str, agent_id: str, reason: str) -> None:
        """An account the server made for ``agent_id`` that the run could not use."""
        with self._lock:
            self.db.execute("INSERT OR IGNORE INTO orphans (username, agent_id, reason, wall) VALUES (?, ?, ?, ?)",
                            (username, agent_id, reason, time.time()))

    def orphans(self, removed: bool | None = False) -> list[dict[str, Any]]:
        """The orphaned accounts (``removed``: those cleanup removed, None: all), oldest first."""
        where = "" if removed is None else f" WHERE removed = {int(removed)}"
        with self._lock:
            rows = self.db.execute(f"SELECT username, agent_id, reason, removed FROM orphans{where} ORDER BY wall").fetchall()
        return [{"username": r[0], "agent_id": r[1], "reason": r[2], "removed": bool(r[3])} for r in rows]

    def orphan_removed(self, username: str) -> None:
        with self._lock:
            self.db.execute("UPDATE orphans SET removed = 1 WHERE username = ?", (username,))

    # ------------------------------------------------------------------ writes

    def get(self, round: int, position: int) -> JournalRow | None:
        with self._lock:
            row = self.db.execute("SELECT * FROM writes WHERE round = ? AND position = ?", (round, position)).fetchone()
        return None if row is None else _row(row)

    def intend(self, round: int, position: int, action: Any, fp: str, family: str | None, target_remote: str | None) -> None:
        data = json.dumps({"text": action.text, "target_post": action.target_post, "target_agent": action.target_agent}, ensure_ascii=False)
        with self._lock:
            self.db.execute(
                "INSERT OR REPLACE INTO writes (round, position, agent_id, kind, fingerprint, family, target_remote, state, wall, action)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'intent', ?, ?)",
                (round, position, action.agent_id, action.kind, fp, family, target_remote, time.time(), data),
            )

    def intents(self) -> list[JournalRow]:
        """Requests that went out and whose answer was never recorded (a crash in flight)."""
        with self._lock:
            rows = self.db.execute("SELECT * FROM writes WHERE state = 'intent' ORDER BY round, position").fetchall()
        return [_row(r) for r in rows]

    def forget(self, round: int, position: int) -> None:
        with self._lock:
            self.db.execute("DELETE FROM writes WHERE round = ? AND position = ?", (round, position))

    def done(self, round: int, position: int, agent_id: str, kind: str, fp: str, family: str | None,
             target_remote: str | None, ok: bool, created_id: str | None, remote_id: str | None, error: str | None) -> None:
        with self._lock:
            self.db.execute(
                "INSERT OR REPLACE INTO writes (round, position, agent_id, kind, fingerprint, family, target_remote, state,"
                " ok, created_id, remote_id, error, wall, action) VALUES (?, ?, ?, ?, ?, ?, ?, 'done', ?, ?, ?, ?, ?, NULL)",
                (round, position, agent_id, kind, fp, family, target_remote, int(ok), created_id, remote_id, error, time.time()),
            )

    def count_recent(self, agent_id: str, family: str, since_wall: float) -> int:
        """Successful writes of a cap family by one account since a wall-clock time."""
        with self._lock:
            row = self.db.execute(
                "SELECT COUNT(*) FROM writes WHERE agent_id = ? AND family = ? AND wall >= ? AND state = 'done' AND ok = 1",
                (agent_id, family, since_wall),
            ).fetchone()
        return int(row[0])

    def future(self, after_round: int) -> list[JournalRow]:
        """Successful writes of rounds after ``after_round``: on a replay, what the server
        already has but the restored simulation has not reached yet."""
        with self._lock:
            rows = self.db.execute(
                "SELECT * FROM writes WHERE round > ? AND state = 'done' AND ok = 1 ORDER BY round, position", (after_round,)
            ).fetchall()
        return [_row(r) for r in rows]

    def successful(self) -> list[JournalRow]:
        """Every write the server accepted, in order (what ``townsquare mastodon cleanup`` undoes)."""
        with self._lock:
            rows = self.db.execute("SELECT * FROM writes WHERE state = 'done' AND ok = 1 ORDER BY round, position").fetchall()
        return [_row(r) for r in rows]


def _row(row: tuple) -> JournalRow:
    r, p, agent, kind, fp, family, target, state, ok, created, remote, error, wall, action = row
    return JournalRow(r, p, agent, kind, fp, family, target, state, None if ok is None else bool(ok), created, remote, error, wall,
                      json.loads(action) if action else None)
