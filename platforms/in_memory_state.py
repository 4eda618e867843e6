"""The in-memory platform's checkpoint state, columnar: a million accounts in a few arrays.

Accounts are numbered in registration order and every relation is stored as arrays of those
numbers: likes and follows as (post, account) and (follower, followee) pairs in sorted order,
read marks as one flat array with an offset per account (CSR), posts' authors, rounds and reply
targets as arrays; repeated strings (bios, post texts, timestamps) as a table of distinct values
and an index array. The checkpoint codec (:mod:`townsquare.state`) writes each array as one
base64 block, so a checkpoint costs a few copies of memory, not a JSON object per account.

``load`` also reads the earlier layout (``version`` missing: a dict per account), so run
directories written before it still resume.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .in_memory import InMemoryPlatform

VERSION = 2


def _table(values: Iterable[str]) -> tuple[list[str], np.ndarray]:
    """Distinct values in first-seen order, and each value's position among them."""
    rows: dict[str, int] = {}
    index = [rows.setdefault(value, len(rows)) for value in values]
    return list(rows), np.asarray(index, dtype=np.int32)


def _pairs(groups: Iterable[tuple[int, Iterable[int]]]) -> tuple[np.ndarray, np.ndarray]:
    """(key, member) pairs sorted by key then member, as two int32 arrays."""
    keys, members = [], []
    for key, group in sorted(groups):
        ordered = sorted(group)
        keys.extend([key] * len(ordered))
        members.extend(ordered)
    return np.asarray(keys, dtype=np.int32), np.asarray(members, dtype=np.int32)


def dump(p: "InMemoryPlatform") -> dict[str, Any]:
    ids = list(p._accounts)
    number = {agent: i for i, agent in enumerate(ids)}
    bios, bio_index = _table(bio for _, bio in p._accounts.values())
    texts, text_index = _table(p._text)
    created, created_index = _table(p._created)
    like_post, like_account = _pairs((post, (number[a] for a in agents)) for post, agents in p._likes.items() if agents)
    follower, followee = _pairs((number[a], (number[b] for b in f)) for a, f in p._following.items() if f)
    unread = array("I")
    marks = p._reads
    reads = [marks.get(agent, unread) for agent in ids]
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.fromiter(map(len, reads), dtype=np.int64, count=len(reads)))
    flat = np.frombuffer(b"".join(r.tobytes() for r in reads), dtype=np.uint32) if ids else np.zeros(0, np.uint32)
    return {
        "version": VERSION,
        "accounts": {"id": ids, "display_name": [name for name, _ in p._accounts.values()], "bios": bios, "bio": bio_index},
        "posts": {
            "author": np.asarray([number[a] for a in p._author], dtype=np.int32),
            "texts": texts, "text": text_index,
            "round": np.frombuffer(p._round.tobytes(), dtype=np.int32).copy() if len(p._round) else np.zeros(0, np.int32),
            "created_ats": created, "created_at": created_index,
            "reply_to": np.asarray([-1 if r is None else r for r in p._reply_to], dtype=np.int64),
        },
        "likes": {"post": like_post, "account": like_account},
        # reblogs interleave with posts in the timeline: their event positions say where
        "reblogs": {"event": np.asarray([e for e, _ in p._reblog_events], dtype=np.int64),
                    "account": np.asarray([number[a] for _, a in p._reblog_events], dtype=np.int32),
                    "post": np.asarray([p._event_post[e] for e, _ in p._reblog_events], dtype=np.int64)},
        "following": {"follower": follower, "followee": followee},
        # each account's read marks in reading order: account i's are flat[offsets[i]:offsets[i + 1]]
        "reads": {"offsets": offsets, "posts": flat},
        "rng": p._rng.bit_generator.state,
    }


def load(p: "InMemoryPlatform", state: dict[str, Any]) -> None:
    """Restore ``state`` into ``p`` (already reset)."""
    if state.get("version") != VERSION:
        _load_per_account(p, state)
    else:
        _load_columns(p, state)
    if "rng" in state:
        p._rng.bit_generator.state = state["rng"]


def _load_columns(p: "InMemoryPlatform", state: dict[str, Any]) -> None:
    accounts = state["accounts"]
    ids: list[str] = accounts["id"]
    bios = [sys.intern(bio) for bio in accounts["bios"]]
    for agent, name, bio in zip(ids, accounts["display_name"], np.asarray(accounts["bio"]).tolist()):
        p._accounts[agent] = (name, bios[bio])
    posts = state["posts"]
    texts, created = posts["texts"], posts["created_ats"]
    rows = zip(np.asarray(posts["author"]).tolist(), np.asarray(posts["text"]).tolist(), np.asarray(posts["round"]).tolist(),
               np.asarray(posts["created_at"]).tolist(), np.asarray(posts["reply_to"]).tolist())
    reblogs = state["reblogs"]
    events = dict(zip(np.asarray(reblogs["event"]).tolist(), zip(np.asarray(reblogs["account"]).tolist(),
                                                                 np.asarray(reblogs["post"]).tolist())))
    for position in range(len(posts["author"]) + len(events)):
        if position in events:
            account, post = events[position]
            p._add_reblog(ids[account], post)
        else:
            author, text, round, made, reply_to = next(rows)
            p._add_post(ids[author], texts[text], round, created[made], None if reply_to < 0 else reply_to)
    for post, account in zip(np.asarray(state["likes"]["post"]).tolist(), np.asarray(state["likes"]["account"]).tolist()):
        p._likes.setdefault(post, set()).add(ids[account])
    following = state["following"]
    for a, b in zip(np.asarray(following["follower"]).tolist(), np.asarray(following["followee"]).tolist()):
        p._following.setdefault(ids[a], set()).add(ids[b])
        p._followers.setdefault(ids[b], set()).add(ids[a])
    offsets = np.asarray(state["reads"]["offsets"]).tolist()
    flat = np.asarray(state["reads"]["posts"], dtype=np.uint32)
    for i, agent in enumerate(ids):
        if offsets[i + 1] > offsets[i]:
            p._reads[agent] = array("I", flat[offsets[i]:offsets[i + 1]].tobytes())


def _load_per_account(p: "InMemoryPlatform", state: dict[str, Any]) -> None:
    """The layout before version 2: a dict per account, post ids as strings."""
    for agent, account in state.get("accounts", {}).items():
        p._accounts[agent] = (account["display_name"], sys.intern(account["bio"]))
    posts = state.get("posts", {})
    rows = zip(posts.get("author", []), posts.get("text", []), posts.get("round", []),
               posts.get("created_at", []), posts.get("reply_to", []))
    reblogs = {int(e): (agent, post_id) for e, agent, post_id in state.get("reblogs", [])}
    # Replay posts and reblogs in their original order so "following" feeds keep it.
    for position in range(len(posts.get("author", [])) + len(reblogs)):
        if position in reblogs:
            agent, post_id = reblogs[position]
            p._add_reblog(agent, p._lookup(post_id))
        else:
            author, text, round, created, reply_to = next(rows)
            p._add_post(author, text, int(round), created, p._lookup(reply_to))
    for post_id, agents in state.get("likes", {}).items():
        p._likes[p._lookup(post_id)] = set(agents)
    for agent, targets in state.get("following", {}).items():
        p._following[agent] = set(targets)
        for target in targets:
            p._followers.setdefault(target, set()).add(agent)
    for agent, indices in state.get("reads", {}).items():
        p._reads[agent] = array("I", sorted({int(i) for i in indices}))
