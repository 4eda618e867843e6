"""What the Mastodon adapter remembers about the simulation, checkpointed with ``get_state``.

Posts the simulation created keep the kernel's deterministic local ids (``p1``, ``p2``, ...
in apply order, as on the in-memory platform) mapped to their Mastodon ids; a post by anyone
else (a human on the server) is ``m<Mastodon id>``, and an account outside the simulation is
``@acct``. Likes, reblogs and follows made by agents are remembered so that the adapter
answers "already liked" exactly as the in-memory platform does; read marks keep feeds unread.
Tokens are not state and never enter a checkpoint.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_EMPTY: frozenset = frozenset()


def pid(index: int) -> str:
    return f"p{index + 1}"


class LocalState:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        # Posts are columnar; post ``p{i+1}`` lives at index i. ``remote[i]`` is None while the
        # post is in flight; a post the server refused stays as a gap in the local ids.
        self.author: list[str] = []
        self.text: list[str] = []
        self.round: list[int] = []
        self.created: list[str] = []
        self.reply_to: list[str | None] = []  # local id (p.. or m..) of the parent
        self.remote: list[str | None] = []
        self.wall: list[float] = []
        self.remote_index: dict[str, int] = {}
        self.refused: set[int] = set()
        self.likes: dict[int, set[str]] = {}
        self.reblogs: dict[int, dict[str, str | None]] = {}  # who reblogged -> the reblog's remote id
        self.foreign_likes: dict[str, set[str]] = {}  # m-id -> agents
        self.foreign_reblogs: dict[str, set[str]] = {}
        self.following: dict[str, set[str]] = {}
        self.reads: dict[str, set[str]] = {}
        self.foreign_seen: dict[str, int] = {}  # remote status id -> round it was first shown
        self.foreign_accounts: dict[str, str] = {}  # @acct -> remote account id
        self.applied_round = -1

    # ------------------------------------------------------------------ posts

    def add_post(self, author: str, text: str, round: int, now: str, reply_to: str | None) -> int:
        index = len(self.author)
        self.author.append(author)
        self.text.append(text)
        self.round.append(round)
        self.created.append(now)
        self.reply_to.append(reply_to)
        self.remote.append(None)
        self.wall.append(0.0)
        return index

    def settle_post(self, index: int, remote_id: str | None, wall: float) -> None:
        """Record the server's answer: its id, or None when it refused the post."""
        self.remote[index] = remote_id
        self.wall[index] = wall
        if remote_id is None:
            self.refused.add(index)
        else:
            self.remote_index[remote_id] = index

    def index_of(self, post_id: str | None) -> int | None:
        """The local index of a live post ``p..`` (None for unknown or refused posts)."""
        if not post_id or post_id[0] != "p" or not post_id[1:].isdigit():
            return None
        index = int(post_id[1:]) - 1
        if 0 <= index < len(self.author) and pid(index) == post_id and index not in self.refused:
            return index
        return None

    def live(self, index: int) -> bool:
        return self.remote[index] is not None

    def local_id_of(self, remote_id: str) -> str:
        index = self.remote_index.get(remote_id)
        return pid(index) if index is not None else f"m{remote_id}"

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {
            "posts": {
                "author": list(self.author), "text": list(self.text), "round": list(self.round),
                "created_at": list(self.created), "reply_to": list(self.reply_to),
                "remote_id": list(self.remote), "wall": list(self.wall),
            },
            "likes": {pid(i): sorted(a) for i, a in sorted(self.likes.items()) if a},
            "reblogs": {pid(i): dict(sorted(a.items())) for i, a in sorted(self.reblogs.items()) if a},
            "foreign_likes": {k: sorted(v) for k, v in sorted(self.foreign_likes.items()) if v},
            "foreign_reblogs": {k: sorted(v) for k, v in sorted(self.foreign_reblogs.items()) if v},
            "following": {a: sorted(f) for a, f in sorted(self.following.items()) if f},
            "reads": {a: sorted(r) for a, r in sorted(self.reads.items())},
            "foreign_seen": dict(self.foreign_seen),
            "foreign_accounts": dict(self.foreign_accounts),
            "applied_round": self.applied_round,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.reset()
        posts = state.get("posts", {})
        for values in zip(posts.get("author", []), posts.get("text", []), posts.get("round", []), posts.get("created_at", []),
                          posts.get("reply_to", []), posts.get("remote_id", []), posts.get("wall", [])):
            author, text, round, created, reply_to, remote, wall = values
            index = self.add_post(author, text, int(round), created, reply_to)
            self.settle_post(index, remote, float(wall))
        for post_id, agents in state.get("likes", {}).items():
            self.likes[int(post_id[1:]) - 1] = set(agents)
        for post_id, agents in state.get("reblogs", {}).items():
            self.reblogs[int(post_id[1:]) - 1] = dict(agents)
        self.foreign_likes = {k: set(v) for k, v in state.get("foreign_likes", {}).items()}
        self.foreign_reblogs = {k: set(v) for k, v in state.get("foreign_reblogs", {}).items()}
        self.following = {a: set(f) for a, f in state.get("following", {}).items()}
        self.reads = {a: set(np.asarray(r).tolist()) for a, r in state.get("reads", {}).items()}
        self.foreign_seen = {str(k): int(v) for k, v in state.get("foreign_seen", {}).items()}
        self.foreign_accounts = dict(state.get("foreign_accounts", {}))
        self.applied_round = int(state.get("applied_round", -1))
