"""A run directory as a :class:`~townsquare.lib.validation.Trace`.

Read from ``events.sqlite`` (read-only) and the manifest:

- events: every accepted ``watch`` (kind ``rate``: the item, its rating on the platform's 1-10
  scale), ``post``, ``comment``, ``reblog`` (kind ``repost``) and ``like``, at the simulated
  time of its round; ``resolution`` is the round's length, since a round's actions all carry
  its start time;
- the catalogue's genres, from what each watch recorded;
- the follow graph at the end (``follows`` applied in order) and who answered or reshared whom;
- cascades: each post with what spread from it. A comment hangs under the post it answers; a
  reblog under the latest earlier participant of the cascade whom the rebloggger followed at the
  time, else under the post itself (the convention of Goel et al., 2016, for retweet trees,
  which record only the original);
- the population: every agent of the run, active or not.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from townsquare.api import UsageError
from townsquare.lib.follow_graph import follow_edges
from townsquare.lib.validation import Cascade, Trace

KINDS = {"watch": "rate", "post": "post", "comment": "comment", "reblog": "repost", "like": "like"}


def clock_seconds(stamp: str) -> float:
    """A simulated time (ISO, no zone: the simulation's own clock) as seconds on a UTC clock."""
    moment = datetime.fromisoformat(stamp)
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def run_trace(path: str | Path) -> Trace:
    from townsquare.api.commands import open_run

    run = open_run(str(path))
    manifest = run.read_manifest()
    if not run.events_path.is_file():
        raise UsageError(f"{path}: no events.sqlite yet (the run has not started): nothing to validate")
    minutes = float(((manifest.get("scenario") or {}).get("clock") or {}).get("minutes_per_round", 60))
    rounds = int(manifest.get("rounds_completed") or 0)
    db = sqlite3.connect(f"file:{run.events_path}?mode=ro", uri=True)
    try:
        actions = db.execute("SELECT agent_id, created_at, kind, target_post, result_id, detail FROM actions "
                             "WHERE ok = 1 AND kind IN ('watch', 'post', 'comment', 'reblog', 'like') ORDER BY seq").fetchall()
        posts = db.execute("SELECT post_id, author_id, created_at, reply_to FROM posts ORDER BY round, rowid").fetchall()
        follows = db.execute("SELECT follower, followee, kind, created_at FROM follows ORDER BY seq").fetchall()
        graph = sorted(follow_edges(db))
        population = tuple(a for (a,) in db.execute("SELECT agent_id FROM agents ORDER BY idx"))
    finally:
        db.close()
    events, genres = [], {}
    for agent, created, kind, target, _, detail in actions:
        fields = json.loads(detail) if detail else {}
        item = str(target or "") if kind == "watch" else ""
        rating = fields.get("rating") if kind == "watch" else None
        if item and fields.get("genres") is not None:
            genres[item] = tuple(str(g) for g in fields["genres"])
        events.append((agent, clock_seconds(created), KINDS[kind], item, float(rating) if rating is not None else np.nan))
    authors = {post: author for post, author, _, _ in posts}
    interactions = [(agent, authors[target]) for agent, _, kind, target, _, _ in actions
                    if kind in ("comment", "reblog") and target in authors and authors[target] != agent]
    return Trace.from_events(
        run.path.name, events, rating_scale=(1.0, 10.0) if any(k == "watch" for _, _, k, *_ in actions) else None,
        genres=genres, follows=graph, interactions=interactions,
        cascades=_cascades(posts, actions, follows), resolution=minutes * 60, span=rounds * minutes * 60, population=population,
        source=str(run.path))


def _cascades(posts: list[tuple], actions: list[tuple], follows: list[tuple]) -> list[Cascade]:
    """One tree per post that answers none (see the module docstring)."""
    root_of: dict[str, str] = {}
    #: root -> (time, user, own post id or None, ("post" | "reblog", the post it hangs from) or None)
    members: dict[str, list[tuple[float, str, str | None, tuple[str, str] | None]]] = {}
    for post, author, created, reply_to in posts:
        if reply_to is None or reply_to not in root_of:
            root_of[post] = post
            members[post] = [(clock_seconds(created), author, post, None)]
        else:
            root_of[post] = root_of[reply_to]
            members[root_of[post]].append((clock_seconds(created), author, post, ("post", reply_to)))
    for agent, created, kind, target, _, _ in actions:
        if kind == "reblog" and target in root_of:
            members[root_of[target]].append((clock_seconds(created), agent, None, ("reblog", target)))
    following: dict[str, list[tuple[float, str, bool]]] = defaultdict(list)
    for follower, followee, kind, created in follows:
        following[follower].append((clock_seconds(created), followee, kind == "follow"))
    return [_tree(root, sorted(nodes, key=lambda n: n[0]), following) for root, nodes in members.items()]


def _tree(root: str, members: list[tuple[float, str, str | None, tuple[str, str] | None]],
          following: dict[str, list[tuple[float, str, bool]]]) -> Cascade:
    node_of_post: dict[str, int] = {}
    users: list[str] = []
    times: list[float] = []
    parent: list[int] = []
    for when, user, own, link in members:
        if link is None:
            up = -1
        elif link[0] == "post":
            up = node_of_post.get(link[1], 0)
        else:
            up = _reblog_parent(user, when, users, times, following, node_of_post.get(link[1], 0))
        if own is not None:
            node_of_post[own] = len(users)
        users.append(user)
        times.append(when)
        parent.append(up)
    return Cascade(id=root, users=users, times=np.asarray(times, dtype=np.float64), parent=np.asarray(parent, dtype=np.int64))


def _reblog_parent(user: str, when: float, users: list[str], times: list[float],
                   following: dict[str, list[tuple[float, str, bool]]], fallback: int) -> int:
    followed = set()
    for at, followee, added in following.get(user, ()):
        if at > when:
            break
        (followed.add if added else followed.discard)(followee)
    for node in range(len(users) - 1, -1, -1):
        if users[node] in followed and times[node] <= when:
            return node
    return fallback
