"""The in-memory platform's checkpoint state, columnar: a million accounts in a few arrays.

Accounts are numbered in registration order and every relation is stored as arrays of those
numbers: likes as (post, account) pairs in the order they were made (kept as arrays while the
run goes, so a checkpoint copies them), follows as (follower, followee) pairs in sorted order,
read marks as one flat array with an offset per account (CSR), posts' authors, rounds and reply
targets as arrays; repeated strings (bios, post texts, timestamps) as a table of distinct values
and an index array. The checkpoint codec (:mod:`townsquare.state`) writes each array as one
base64 block, so a checkpoint costs a few copies of memory, not a JSON object per account.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from typing import Any

import numpy as np

from townsquare.api import UsageError

#: an :class:`~townsquare.platforms.in_memory.InMemoryPlatform`, whose columns this module reads
#: and writes (in_memory imports this module, so this one does not import it back)
InMemoryPlatform = Any

VERSION = 2


def _table(values: Iterable[str]) -> tuple[list[str], np.ndarray]:
    """Distinct values in first-seen order, and each value's position among them."""
    rows: dict[str, int] = {}
    index = [rows.setdefault(value, len(rows)) for value in values]
    return list(rows), np.asarray(index, dtype=np.int32)


def _pairs(groups: Iterable[tuple[int, Iterable[str]]], number: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(key, member number) pairs sorted by key then member, as two int32 arrays; ``groups``
    holds each key's members by id, ``number`` maps an id to its number. One numpy sort, not
    a Python sort per key (ten million likes at a million agents)."""
    keys, sizes, members = [], [], []
    for key, group in groups:
        if group:
            keys.append(key)
            sizes.append(len(group))
            members.extend(group)
    numbers = np.fromiter(map(number.__getitem__, members), dtype=np.int32, count=len(members))
    key_column = np.repeat(np.asarray(keys, dtype=np.int32), sizes)
    order = np.lexsort((numbers, key_column))
    return key_column[order], numbers[order]


def _column(values: array, dtype: Any) -> np.ndarray:
    """An ``array.array`` as a numpy array (a view; empty arrays too)."""
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)


def dump(p: InMemoryPlatform) -> dict[str, Any]:
    ids = list(p._accounts)
    number = p._number  # registration order, as ids
    bios, bio_index = _table(bio for _, bio in p._accounts.values())
    texts, text_index = _table(p._text)
    created, created_index = _table(p._created)
    follower, followee = _pairs(((number[a], f) for a, f in p._following.items()), number)
    reblog_events = _column(p._reblog_positions, np.uint64).astype(np.int64)
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
            "author": _column(p._author_number, np.uint32).astype(np.int32),
            "texts": texts, "text": text_index,
            "round": np.frombuffer(p._round.tobytes(), dtype=np.int32).copy() if len(p._round) else np.zeros(0, np.int32),
            "created_ats": created, "created_at": created_index,
            "reply_to": np.asarray([-1 if r is None else r for r in p._reply_to], dtype=np.int64),
        },
        # in the order they were made (loading makes the same sets from any order)
        "likes": {"post": _column(p._like_posts, np.uint32).astype(np.int32),
                  "account": _column(p._like_accounts, np.uint32).astype(np.int32)},
        # reblogs interleave with posts in the timeline: their event positions say where
        "reblogs": {"event": reblog_events,
                    "account": _column(p._reblog_accounts, np.uint32).astype(np.int32),
                    "post": _column(p._event_post, np.uint32)[reblog_events].astype(np.int64)},
        "following": {"follower": follower, "followee": followee},
        # each account's read marks in reading order: account i's are flat[offsets[i]:offsets[i + 1]]
        "reads": {"offsets": offsets, "posts": flat},
        "rng": p._rng.bit_generator.state,
    }


def load(p: InMemoryPlatform, state: dict[str, Any]) -> None:
    """Restore ``state`` into ``p`` (already reset)."""
    if state.get("version") != VERSION:
        raise UsageError(f"in-memory platform checkpoint: layout version {state.get('version')!r}, "
                         f"this townsquare reads version {VERSION}")
    _load_columns(p, state)
    if "rng" in state:
        p._rng.bit_generator.state = state["rng"]


def _load_columns(p: InMemoryPlatform, state: dict[str, Any]) -> None:
    accounts = state["accounts"]
    ids: list[str] = accounts["id"]
    bios = [sys.intern(bio) for bio in accounts["bios"]]
    for agent, name, bio in zip(ids, accounts["display_name"], np.asarray(accounts["bio"]).tolist()):
        p._set_account(agent, name, bios[bio])
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
        p._add_like(ids[account], post)
    following = state["following"]
    for a, b in zip(np.asarray(following["follower"]).tolist(), np.asarray(following["followee"]).tolist()):
        p._following.setdefault(ids[a], set()).add(ids[b])
        p._followers.setdefault(ids[b], set()).add(ids[a])
    offsets = np.asarray(state["reads"]["offsets"]).tolist()
    flat = np.asarray(state["reads"]["posts"], dtype=np.uint32)
    for i, agent in enumerate(ids):
        if offsets[i + 1] > offsets[i]:
            p._reads[agent] = array("I", flat[offsets[i]:offsets[i + 1]].tobytes())
