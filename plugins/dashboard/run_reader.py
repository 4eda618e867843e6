"""What the dashboard reads from a run directory, read-only, while the run may still be writing.

``events.sqlite`` is opened with ``mode=ro`` on a fresh connection per request: SQLite's WAL
mode lets a reader see every committed round while the writer goes on, and the reader never
blocks it. The run's writer lock (``.lock``) is never taken; its text only tells whether a
live process holds the run. Memories come from the newest checkpoint (the rows of the
``memories`` table of ``townsquare export``), read again only when a newer checkpoint appears.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from townsquare.lib.follow_graph import follow_edges
from townsquare.lib.llm_calls import NOT_A_CALL, llm_by_purpose, llm_totals
from townsquare.lib.memory_export import memory_rows
from townsquare.api.commands import open_run

#: what the ``.lock`` file is called (townsquare.rundir): its text names the writing process
LOCK_FILE = ".lock"
INTERVIEWS_FILE = "interviews.jsonl"


class NoEvents(Exception):
    """The run has no ``events.sqlite`` yet (it is still being built)."""


@dataclass
class Memory:
    slot: str
    id: Any
    kind: str
    text: str
    created: str
    importance: Any
    evidence: list[Any] = field(default_factory=list)


class RunReader:
    """One run directory, read on demand. Safe to share between request threads."""

    def __init__(self, path: str | Path):
        self.run = open_run(str(path))  # a one-line UsageError when it is not a run directory
        self.path = self.run.path
        self.run.read_manifest()  # a broken manifest is reported now, not on the first page
        self._memories: tuple[Any, dict[str, list[Memory]]] | None = None
        self._planners: tuple[Any, dict[str, Any]] | None = None
        self._kinds: tuple[str, set[str]] | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ run state

    def manifest(self) -> dict[str, Any]:
        return self.run.read_manifest()

    @contextmanager
    def db(self) -> Iterator[sqlite3.Connection]:
        if not self.run.events_path.is_file():
            raise NoEvents(str(self.run.events_path))
        db = sqlite3.connect(f"file:{self.run.events_path}?mode=ro", uri=True, timeout=10)
        try:
            yield db
        finally:
            db.close()

    def writer(self) -> dict[str, Any] | None:
        """The process that holds the run's lock now (pid, host, start), or None: the lock
        file is read, never locked, and a holder whose pid is gone (kill -9) counts as none."""
        try:
            text = (self.path / LOCK_FILE).read_text(encoding="utf-8").strip()
            holder = json.loads(text) if text else None
        except (OSError, ValueError):
            return None
        if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
            return None
        if holder.get("host") == socket.gethostname():
            try:
                os.kill(holder["pid"], 0)
            except ProcessLookupError:
                return None
            except PermissionError:
                pass  # alive, another user's
        return holder

    def status(self) -> dict[str, Any]:
        """The run bar: name, status (live / finished / stopped / not running), rounds, counts."""
        manifest = self.manifest()
        out: dict[str, Any] = {
            "name": manifest.get("name") or self.path.name, "rounds": manifest.get("rounds"),
            "manifest_status": manifest.get("status"), "stop_reason": manifest.get("stop_reason"),
            "platform": (manifest.get("scenario", {}).get("platform") or {}).get("name", "in_memory"),
            "last_round": None, "sim_time": None, "posts": 0, "actions": 0, "llm_calls": 0, "agents": 0,
        }
        try:
            with self.db() as db:
                last = db.execute("SELECT round, sim_time FROM rounds ORDER BY round DESC LIMIT 1").fetchone()
                if last:
                    out["last_round"], out["sim_time"] = int(last[0]), last[1]
                for table in ("posts", "actions", "agents"):
                    out[table] = int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                # a parse_failure row records an unusable answer, not another request
                out["llm_calls"] = int(db.execute("SELECT COUNT(*) FROM llm_calls WHERE status != 'parse_failure'").fetchone()[0])
        except NoEvents:
            pass
        live = manifest.get("status") == "running" and self.writer() is not None
        out["status"] = "live" if live else {"running": "not running (interrupted; resume it)"}.get(
            str(manifest.get("status")), str(manifest.get("status") or "unknown"))
        out["live"] = live
        return out

    def version(self) -> str:
        """Changes whenever a page could show something new: a round committed, calls written
        while the run is built, the manifest's status, a new checkpoint, a new interview."""
        parts = []
        for path in (self.run.events_path, self.run.events_path.with_name("events.sqlite-wal"), self.run.manifest_path,
                     self.path / INTERVIEWS_FILE):
            try:
                stat = path.stat()
                parts.append(f"{stat.st_mtime_ns}:{stat.st_size}")
            except OSError:
                parts.append("-")
        checkpoints = self.run.checkpoints()
        parts.append(str(checkpoints[-1][0]) if checkpoints else "-")
        return "/".join(parts)

    # ------------------------------------------------------------------ agents

    def agents(self) -> list[dict[str, Any]]:
        with self.db() as db:
            rows = db.execute("SELECT agent_id, name, population, persona, activity, start_round, end_round "
                              "FROM agents ORDER BY idx").fetchall()
            posts = dict(db.execute("SELECT author_id, COUNT(*) FROM posts GROUP BY author_id").fetchall())
            acts = dict(db.execute("SELECT agent_id, COUNT(*) FROM actions WHERE ok = 1 GROUP BY agent_id").fetchall())
            edges = self._edges(db)
        followers = Counter(b for _, b in edges)
        following = Counter(a for a, _ in edges)
        return [{"id": a, "name": name or a, "population": pop, "persona": _json(persona, {}), "activity": activity,
                 "start_round": start, "end_round": end, "posts": posts.get(a, 0), "actions": acts.get(a, 0),
                 "followers": followers.get(a, 0), "following": following.get(a, 0)}
                for a, name, pop, persona, activity, start, end in rows]

    def names(self) -> dict[str, str]:
        with self.db() as db:
            return {a: n or a for a, n in db.execute("SELECT agent_id, name FROM agents")}

    def follow_edges(self) -> set[tuple[str, str]]:
        with self.db() as db:
            return self._edges(db)

    @staticmethod
    def _edges(db: sqlite3.Connection) -> set[tuple[str, str]]:
        """follower -> followee edges now: the ``follows`` table replayed in order."""
        return follow_edges(db)

    def agent_actions(self, agent_id: str, limit: int) -> list[dict[str, Any]]:
        with self.db() as db:
            rows = db.execute("SELECT seq, round, created_at, kind, target_post, target_agent, text, ok, error, detail "
                              "FROM actions WHERE agent_id = ? ORDER BY seq DESC LIMIT ?", (agent_id, limit)).fetchall()
        keys = ("seq", "round", "created_at", "kind", "target_post", "target_agent", "text", "ok", "error", "detail")
        return [dict(zip(keys, row[:-1]), detail=_json(row[-1], {})) for row in rows]

    def follow_history(self, agent_id: str) -> list[dict[str, Any]]:
        with self.db() as db:
            rows = db.execute("SELECT round, created_at, follower, followee, kind FROM follows "
                              "WHERE follower = ? OR followee = ? ORDER BY seq", (agent_id, agent_id)).fetchall()
        return [dict(zip(("round", "created_at", "follower", "followee", "kind"), row)) for row in rows]

    def memories(self) -> dict[str, list[Memory]]:
        """agent -> its memory records in the newest checkpoint (every memory slot)."""
        checkpoints = self.run.checkpoints()
        key = checkpoints[-1] if checkpoints else None
        with self._lock:
            if self._memories is not None and self._memories[0] == key:
                return self._memories[1]
        found: dict[str, list[Memory]] = defaultdict(list)
        if key is not None:
            _, rows = memory_rows(self.path)
            for agent, slot, rid, kind, text, created, importance, evidence in rows:
                found[agent].append(Memory(slot, rid, kind or "", text or "", created or "", importance,
                                           _json(evidence, [])))
        with self._lock:
            self._memories = (key, dict(found))
        return dict(found)

    def planner_states(self) -> dict[str, Any]:
        """agent -> the state its ``planner`` slot kept in the newest checkpoint (what the plan
        the agent made says: Zhou's activity plan, Park's day plan...)."""
        checkpoints = self.run.checkpoints()
        key = checkpoints[-1] if checkpoints else None
        with self._lock:
            if self._planners is not None and self._planners[0] == key:
                return self._planners[1]
        found: dict[str, Any] = {}
        checkpoint = self.run.latest_checkpoint() if key is not None else None
        for agent, saved in (checkpoint[1].get("agents", {}) if checkpoint else {}).items():
            state = (saved.get("components") or {}).get("planner")
            if state:
                found[agent] = state
        with self._lock:
            self._planners = (key, found)
        return found

    def reflections(self, agent_id: str) -> list[dict[str, Any]]:
        """The agent's rows of the ``reflections`` table, newest first (every reflector and memory
        design records there: Park's reflections, Zhou's follow reflection, RecAgent's insights)."""
        with self.db() as db:
            if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'reflections'").fetchone():
                return []
            rows = db.execute("SELECT round, source, kind, text, ids FROM reflections WHERE agent_id = ? ORDER BY seq DESC",
                              (agent_id,)).fetchall()
        return [dict(zip(("round", "source", "kind", "text"), row[:-1]), ids=_json(row[-1], [])) for row in rows]

    def checkpoint_round(self) -> int | None:
        checkpoints = self.run.checkpoints()
        return checkpoints[-1][0] if checkpoints else None

    def interviews(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        path = self.path / INTERVIEWS_FILE
        if not path.is_file():
            return []
        out = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            entry = _json(line, None)
            if isinstance(entry, dict) and (agent_id is None or entry.get("agent_id") == agent_id):
                out.append(entry)
        return out

    # ------------------------------------------------------------------ posts

    def timeline(self, limit: int, offset: int = 0, author: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Top-level posts, newest first, each with its likes, reblogs and comments; and how
        many top-level posts there are in all."""
        where, params = "reply_to IS NULL", []
        if author is not None:
            where += " AND author_id = ?"
            params.append(author)
        with self.db() as db:
            total = int(db.execute(f"SELECT COUNT(*) FROM posts WHERE {where}", params).fetchone()[0])
            rows = db.execute(f"SELECT post_id, author_id, round, created_at, text FROM posts WHERE {where} "
                              "ORDER BY round DESC, rowid DESC LIMIT ? OFFSET ?", (*params, limit, offset)).fetchall()
            posts = [{"id": p, "author": a, "round": r, "created_at": c, "text": t or "", "like": [], "reblog": [],
                      "comments": []} for p, a, r, c, t in rows]
            by_id = {p["id"]: p for p in posts}
            if by_id:
                marks = ",".join("?" * len(by_id))
                for agent, kind, target in db.execute(
                        f"SELECT agent_id, kind, target_post FROM actions WHERE ok = 1 AND kind IN ('like', 'reblog') "
                        f"AND target_post IN ({marks}) ORDER BY seq", list(by_id)):
                    by_id[target][kind].append(agent)
                for pid, author_id, r, created, text, reply_to in db.execute(
                        f"SELECT post_id, author_id, round, created_at, text, reply_to FROM posts WHERE reply_to IN ({marks}) "
                        "ORDER BY round, rowid", list(by_id)):
                    by_id[reply_to]["comments"].append({"id": pid, "author": author_id, "round": r, "created_at": created,
                                                        "text": text or ""})
        return posts, total

    def post_texts(self, post_ids: list[str]) -> dict[str, str]:
        """post id -> text, for the posts an agent acted on."""
        if not post_ids:
            return {}
        with self.db() as db:
            rows = db.execute(f"SELECT post_id, text FROM posts WHERE post_id IN ({','.join('?' * len(post_ids))})", post_ids)
            return {p: t or "" for p, t in rows}

    # ------------------------------------------------------------------ rounds, metrics, LLM calls

    def rounds(self) -> list[dict[str, Any]]:
        with self.db() as db:
            rows = db.execute("SELECT round, sim_time, active, actions, llm_calls, wall_seconds FROM rounds ORDER BY round").fetchall()
        return [dict(zip(("round", "sim_time", "active", "actions", "llm_calls", "wall_seconds"), row)) for row in rows]

    def actions_per_round(self) -> dict[str, dict[int, float]]:
        """kind -> round -> accepted actions (0 in a played round without any)."""
        with self.db() as db:
            played = [int(r) for (r,) in db.execute("SELECT round FROM rounds ORDER BY round")]
            rows = db.execute("SELECT kind, round, COUNT(*) FROM actions WHERE ok = 1 GROUP BY kind, round").fetchall()
        out: dict[str, dict[int, float]] = {}
        for kind, r, n in rows:
            out.setdefault(kind, dict.fromkeys(played, 0.0))[int(r)] = float(n)
        return out

    def metrics(self) -> dict[str, dict[int, float]]:
        """metric key -> round -> value."""
        out: dict[str, dict[int, float]] = defaultdict(dict)
        with self.db() as db:
            for r, name, value in db.execute("SELECT round, name, value FROM metrics ORDER BY round, name"):
                if value is not None:
                    out[name][int(r)] = float(value)
        return dict(out)

    def llm_summary(self) -> dict[str, Any]:
        """Totals, per purpose and per round, computed as the report computes them
        (:func:`townsquare.lib.llm_calls.llm_totals`, :func:`townsquare.lib.llm_calls.llm_by_purpose`): ``parse_failure``
        rows are unusable answers, not requests, and the mean latency is over every call."""
        with self.db() as db:
            totals = llm_totals(db)
            purposes = llm_by_purpose(db)
            per_round = db.execute(
                "SELECT round, COUNT(*), SUM(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0)), AVG(latency_ms) "
                "FROM llm_calls WHERE status NOT IN (%s) GROUP BY round ORDER BY round" % ",".join("?" * len(NOT_A_CALL)),
                NOT_A_CALL).fetchall()
        for row in purposes:
            statuses = row["statuses"]
            row.update(ok=statuses.get("ok", 0) + statuses.get("cached", 0), errors=statuses.get("error", 0),
                       parse_failures=statuses.get("parse_failure", 0))
        totals.update({key: sum(r[key] for r in purposes) for key in ("ok", "errors", "parse_failures")})
        zeros = dict.fromkeys((r["round"] for r in self.rounds()), 0.0)
        return {"totals": totals, "purposes": purposes,
                "per_round": {"calls": {**zeros, **{int(r): float(n) for r, n, _, _ in per_round}},
                              "tokens": {**zeros, **{int(r): float(t or 0) for r, _, t, _ in per_round}},
                              "latency": {int(r): float(lat) for r, _, _, lat in per_round if lat is not None}}}

    def llm_calls(self, limit: int, offset: int = 0, agent: str | None = None) -> tuple[list[dict[str, Any]], int]:
        where, params = ("WHERE agent_id = ?", [agent]) if agent else ("", [])
        with self.db() as db:
            total = int(db.execute(f"SELECT COUNT(*) FROM llm_calls {where}", params).fetchone()[0])
            rows = db.execute(f"SELECT seq, round, agent_id, purpose, provider, model, status, prompt_tokens, completion_tokens, "
                              f"latency_ms, cost, error, error_kind FROM llm_calls {where} ORDER BY seq DESC LIMIT ? OFFSET ?",
                              (*params, limit, offset)).fetchall()
        keys = ("seq", "round", "agent", "purpose", "provider", "model", "status", "prompt_tokens", "completion_tokens",
                "latency_ms", "cost", "error", "error_kind")
        return [dict(zip(keys, row)) for row in rows], total

    # ------------------------------------------------------------------ recsys and town

    def kinds(self) -> set[str]:
        """The action kinds in the run (which pages the navigation offers), read again only
        when the run has changed: every page asks, and it scans the actions table."""
        version = self.version()
        with self._lock:
            if self._kinds is not None and self._kinds[0] == version:
                return self._kinds[1]
        try:
            with self.db() as db:
                found = {k for (k,) in db.execute("SELECT DISTINCT kind FROM actions")}
        except NoEvents:
            found = set()
        with self._lock:
            self._kinds = (version, found)
        return found

    def item_actions(self, kinds: tuple[str, ...], limit: int) -> list[dict[str, Any]]:
        """The newest accepted actions of ``kinds`` (watches, chats, broadcasts), newest first."""
        marks = ",".join("?" * len(kinds))
        with self.db() as db:
            rows = db.execute(f"SELECT seq, round, created_at, agent_id, kind, target_post, target_agent, text, detail "
                              f"FROM actions WHERE ok = 1 AND kind IN ({marks}) ORDER BY seq DESC LIMIT ?", (*kinds, limit)).fetchall()
            counts = dict(db.execute(f"SELECT kind, COUNT(*) FROM actions WHERE ok = 1 AND kind IN ({marks}) GROUP BY kind",
                                     kinds).fetchall())
        keys = ("seq", "round", "created_at", "agent", "kind", "target_post", "target_agent", "text")
        return [dict(zip(keys, row[:-1]), detail=_json(row[-1], {}), total=counts.get(row[4], 0)) for row in rows]

    def places(self) -> dict[str, list[tuple[int, str, str]]]:
        """agent -> [(round, simulated time, arena address)] at each change of place: a town
        action stores the agent's address after it in ``detail["at"]``."""
        out: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
        with self.db() as db:
            for r, created, agent, detail in db.execute(
                    "SELECT round, created_at, agent_id, detail FROM actions WHERE ok = 1 AND detail LIKE '%\"at\"%' ORDER BY seq"):
                at = _json(detail, {}).get("at")
                if isinstance(at, str) and at and (not out[agent] or out[agent][-1][2] != at):
                    out[agent].append((int(r), created or "", at))
        return dict(out)


def _json(text: Any, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default
