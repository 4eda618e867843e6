"""One row per interaction in Parquet, as MADOC lays out its communities (Multi-platform
Aggregated Dataset of Online Communities, Zenodo 10.5281/zenodo.14637314: one file per platform
and community, ``reddit_technology_madoc.parquet``, ``voat_technology_madoc.parquet``...).

The columns read: ``post_id``, ``user_id``, ``publish_date`` (Unix seconds, or a timestamp),
``interaction_type`` (``post``, ``comment``, ``repost``; any case) and ``parent_id`` (the post
or comment answered or reshared, empty for a post); ``parent_user_id`` when present. Every
row is an event; comments and reposts are the trace's interactions (actor, the parent's
author); each post is the root of a cascade of everything whose chain of ``parent_id`` leads
to it (a parent missing from the file makes its child a root). Reading needs pyarrow
(``pip install 'townsquare[parquet]'``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from townsquare.api import UsageError
from townsquare.lib.validation import Cascade, Trace

REQUIRED = ("post_id", "user_id", "publish_date", "interaction_type", "parent_id")
KINDS = {"post": "post", "submission": "post", "comment": "comment", "reply": "comment", "repost": "repost",
         "reshare": "repost", "share": "repost"}


def parquet_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.parquet")) if path.is_dir() else [path] if path.suffix == ".parquet" else []


def madoc_trace(path: Path, name: str) -> Trace:
    rows = _read(path)
    order = np.argsort(rows["publish_date"], kind="stable")
    rows = {k: v[order] for k, v in rows.items()}
    kinds = []
    for n, value in enumerate(rows["interaction_type"]):
        kind = KINDS.get(str(value).strip().lower())
        if kind is None:
            raise UsageError(f"{path}: row {n}: interaction_type {value!r} is none of {', '.join(sorted(set(KINDS)))}")
        kinds.append(kind)
    posts = [str(p) for p in rows["post_id"]]
    users = [str(u) for u in rows["user_id"]]
    parents = [None if p is None or (isinstance(p, float) and np.isnan(p)) or str(p) == "" else str(p) for p in rows["parent_id"]]
    index = {post: n for n, post in enumerate(posts)}
    author_of = {post: users[n] for post, n in index.items()}
    parent_users = rows.get("parent_user_id")
    interactions = []
    for n, up in enumerate(parents):
        if up is None:
            continue
        answered = author_of.get(up) or (str(parent_users[n]) if parent_users is not None and parent_users[n] is not None else None)
        if answered and answered != users[n]:
            interactions.append((users[n], answered))
    times = rows["publish_date"]
    events = [(users[n], float(times[n]), kinds[n], "", np.nan) for n in range(len(posts))]
    return Trace.from_events(name, events, interactions=interactions, cascades=_cascades(posts, users, times, parents, index),
                             source=str(path))


def _read(path: Path) -> dict[str, np.ndarray]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("reading MADOC's Parquet files needs pyarrow: pip install 'townsquare[parquet]'") from None
    files = parquet_files(path)
    if not files:
        raise UsageError(f"{path}: no .parquet file")
    columns: dict[str, list[np.ndarray]] = {}
    for file in files:
        try:
            schema = pq.read_schema(file)
            missing = [c for c in REQUIRED if c not in schema.names]
            if missing:
                raise UsageError(f"{file}: no {missing[0]!r} column (it has {', '.join(schema.names[:12])}); "
                                 f"a MADOC file has {', '.join(REQUIRED)}")
            wanted = [*REQUIRED, *(["parent_user_id"] if "parent_user_id" in schema.names else [])]
            table = pq.read_table(file, columns=wanted)
        except UsageError:
            raise
        except Exception as exc:  # pyarrow raises its own kinds for a damaged or foreign file
            raise UsageError(f"{file}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        for column in wanted:
            values = table.column(column)
            if column == "publish_date" and str(values.type).startswith("timestamp"):
                values = values.cast("timestamp[s]").cast("int64")
            columns.setdefault(column, []).append(np.asarray(values.to_pylist(), dtype=object))
    out = {k: np.concatenate(v) for k, v in columns.items() if len(v) == len(files)}
    try:
        out["publish_date"] = out["publish_date"].astype(np.float64)
    except (TypeError, ValueError):
        raise UsageError(f"{path}: publish_date must be Unix seconds or a timestamp") from None
    return out


def _cascades(posts: list[str], users: list[str], times: np.ndarray, parents: list[str | None], index: dict[str, int]) -> list[Cascade]:
    root_of: dict[int, int] = {}
    for n in range(len(posts)):  # rows are in time order: a parent comes before its children
        up = parents[n]
        root_of[n] = root_of.get(index[up], n) if up is not None and up in index and index[up] < n else n
    members: dict[int, list[int]] = {}
    for n, root in root_of.items():
        members.setdefault(root, []).append(n)
    cascades = []
    for root, rows in members.items():
        local = {row: k for k, row in enumerate(rows)}
        parent = [-1 if row == root else local.get(index.get(parents[row] or "", -1), 0) for row in rows]
        cascades.append(Cascade(id=posts[root], users=[users[r] for r in rows], times=np.asarray([times[r] for r in rows], dtype=np.float64),
                                parent=np.asarray(parent, dtype=np.int64)))
    return cascades
