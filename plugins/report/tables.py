"""What the report reads from a run directory: the manifest and queries over ``events.sqlite``.

Every function takes an open :class:`sqlite3.Connection` and returns plain Python data (no
plotting here), so tests can check the numbers one by one.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from townsquare.api import Persona, UsageError
from townsquare.lib.follow_graph import follow_edges
from townsquare.lib.llm_calls import NOT_A_CALL
from townsquare.api.commands import open_run as open_run_dir

#: Action kinds in the order the report lists them (the paper's order, then the rest).
KIND_ORDER = ("browse", "like", "reblog", "comment", "post", "follow", "unfollow")


@dataclass
class Run:
    path: Path
    manifest: dict[str, Any]
    db: sqlite3.Connection

    def close(self) -> None:
        self.db.close()


def open_run(path: str | Path) -> Run:
    """A run directory's manifest and trace; a one-line UsageError when it is not one."""
    run_dir = open_run_dir(path)
    if not run_dir.events_path.is_file():
        raise UsageError(f"{path}: not a run directory (no events.sqlite)")
    manifest = run_dir.read_manifest()
    db = sqlite3.connect(f"file:{run_dir.events_path}?mode=ro", uri=True)
    try:
        db.execute("SELECT 1 FROM agents LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        db.close()
        raise UsageError(f"{run_dir.events_path}: not a townsquare trace ({exc})") from None
    return Run(run_dir.path, manifest, db)


# --------------------------------------------------------------------------- agents and posts


@dataclass
class AgentRow:
    agent_id: str
    name: str
    population: str
    persona: Persona


def agents(db: sqlite3.Connection) -> list[AgentRow]:
    rows = db.execute("SELECT agent_id, name, population, persona FROM agents ORDER BY idx").fetchall()
    out = []
    for agent_id, name, population, persona in rows:
        try:
            data = json.loads(persona) if persona else {"name": name}
        except json.JSONDecodeError:
            data = {"name": name}
        out.append(AgentRow(agent_id, name, population, Persona.from_dict({"name": name, **data})))
    return out


def post_texts(db: sqlite3.Connection, comments: bool) -> list[str]:
    """Texts of top-level posts (``comments=False``) or of comments (posts with ``reply_to``)."""
    where = "reply_to IS NOT NULL" if comments else "reply_to IS NULL"
    return [t for (t,) in db.execute(f"SELECT text FROM posts WHERE {where} ORDER BY round, rowid") if t]


def posts_by_id(db: sqlite3.Connection) -> dict[str, tuple[str, str]]:
    """post id -> (author id, text)."""
    return {pid: (author, text or "") for pid, author, text in db.execute("SELECT post_id, author_id, text FROM posts")}


# --------------------------------------------------------------------------- followers


def follower_counts(db: sqlite3.Connection, agent_ids: list[str]) -> dict[str, int]:
    """Followers of each agent at the end of the run: the ``follows`` table replayed in order
    (a follow adds the edge follower -> followee, an unfollow removes it). Agents nobody
    follows count 0."""
    counts = dict.fromkeys(agent_ids, 0)
    for _, followee in follow_edges(db):
        counts[followee] = counts.get(followee, 0) + 1
    return counts


def follow_events(db: sqlite3.Connection) -> Counter:
    return Counter(kind for (kind,) in db.execute("SELECT kind FROM follows"))


# --------------------------------------------------------------------------- actions


def rounds_played(db: sqlite3.Connection) -> list[tuple[int, str]]:
    """(round, simulated time) of every finished round."""
    return [(int(r), t) for r, t in db.execute("SELECT round, sim_time FROM rounds ORDER BY round")]


def actions_per_round(db: sqlite3.Connection) -> dict[str, dict[int, int]]:
    """kind -> round -> number of actions the platform accepted."""
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for kind, r, n in db.execute("SELECT kind, round, COUNT(*) FROM actions WHERE ok = 1 GROUP BY kind, round"):
        out[kind][int(r)] = int(n)
    return dict(out)


def action_totals(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """Per kind: accepted and refused actions, in :data:`KIND_ORDER` (unknown kinds last)."""
    rows = db.execute("SELECT kind, SUM(ok = 1), SUM(ok = 0) FROM actions GROUP BY kind").fetchall()
    found = {kind: (int(ok or 0), int(bad or 0)) for kind, ok, bad in rows}
    order = [k for k in KIND_ORDER if k in found] + sorted(set(found) - set(KIND_ORDER))
    return [{"kind": k, "ok": found[k][0], "refused": found[k][1]} for k in order]


def engagement(db: sqlite3.Connection) -> dict[str, dict[str, set[str]]]:
    """agent -> {"browse": posts it was shown, "like"/"reblog"/"comment": posts it acted on}.

    Only accepted actions count; ``browse`` actions carry their posts as a JSON list in
    ``post_ids``."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: {k: set() for k in ("browse", "like", "reblog", "comment")})
    query = "SELECT agent_id, kind, target_post, post_ids FROM actions WHERE ok = 1 AND kind IN ('browse','like','reblog','comment')"
    for agent, kind, target, post_ids in db.execute(query):
        if kind == "browse":
            try:
                out[agent]["browse"].update(str(p) for p in json.loads(post_ids or "[]"))
            except json.JSONDecodeError:
                continue
        elif target:
            out[agent][kind].add(target)
    return dict(out)


def own_posts(db: sqlite3.Connection) -> dict[str, list[str]]:
    """agent -> texts of its top-level posts."""
    out: dict[str, list[str]] = defaultdict(list)
    for author, text in db.execute("SELECT author_id, text FROM posts WHERE reply_to IS NULL ORDER BY round, rowid"):
        if text:
            out[author].append(text)
    return dict(out)


def last_metrics(db: sqlite3.Connection, metric: str) -> dict[str, float]:
    """One metric's values at the last round it reported, keys without the ``metric.`` prefix."""
    prefix = f"{metric}."
    rows = db.execute("SELECT name, value FROM metrics WHERE substr(name, 1, ?) = ? AND round = "
                      "(SELECT MAX(round) FROM metrics WHERE substr(name, 1, ?) = ?)",
                      (len(prefix), prefix, len(prefix), prefix)).fetchall()
    return {name[len(prefix):]: float(value) for name, value in rows}


def deciders(db: sqlite3.Connection) -> dict[tuple[str, str], int]:
    """(action kind, decided_by) -> accepted actions, for actions whose detail names who decided
    them (the social agent's per-decision routing)."""
    out: dict[tuple[str, str], int] = defaultdict(int)
    for kind, detail in db.execute("SELECT kind, detail FROM actions WHERE ok = 1 AND detail LIKE '%decided_by%' AND kind != 'browse'"):
        try:
            by = json.loads(detail).get("decided_by")
        except (json.JSONDecodeError, AttributeError):
            continue
        if isinstance(by, str):
            out[(kind, by)] += 1
    return dict(out)


# --------------------------------------------------------------------------- LLM calls

def llm_status_counts(db: sqlite3.Connection) -> dict[str, int]:
    return {s: int(n) for s, n in db.execute("SELECT status, COUNT(*) FROM llm_calls GROUP BY status ORDER BY status")}


def cached_prefix(db: sqlite3.Connection) -> tuple[int, int] | None:
    """(prompt tokens, cached prefix tokens) of the answered calls (``llm_calls.cached_prefix_tokens``);
    None for a run recorded before the column."""
    if "cached_prefix_tokens" not in {row[1] for row in db.execute("PRAGMA table_info(llm_calls)")}:
        return None
    prompt, cached, counted = db.execute(
        "SELECT SUM(prompt_tokens), SUM(cached_prefix_tokens), COUNT(cached_prefix_tokens) FROM llm_calls "
        "WHERE status IN ('ok', 'cached')").fetchone()
    return (int(prompt or 0), int(cached or 0)) if counted else None


def llm_per_round(db: sqlite3.Connection) -> dict[str, dict[int, tuple[int, int]]]:
    """purpose -> round -> (calls, prompt + completion tokens). Round -1: calls made while the
    run was built (persona enrichment, say)."""
    out: dict[str, dict[int, tuple[int, int]]] = defaultdict(dict)
    rows = db.execute(
        "SELECT COALESCE(purpose, '-'), round, COUNT(*), SUM(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0)) "
        "FROM llm_calls WHERE status NOT IN (%s) GROUP BY 1, 2" % ",".join("?" * len(NOT_A_CALL)), NOT_A_CALL)
    for purpose, r, n, tokens in rows:
        out[purpose][int(r)] = (int(n), int(tokens or 0))
    return dict(out)
