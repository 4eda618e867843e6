"""Zhou et al.'s short-term memory (§3.1.4): slot ``memory.short_term``, component
``action_memory``.

Every action the platform accepted is recorded (post text, action, author id, round), told by
the engine through :meth:`ActionMemory.on_applied`. "Taking likes as an example, the recorded
action information includes the post content, whether to like it, the poster ID" (§3.1.4): we
record the actions taken, not the posts passed over (a browse entry lists the posts seen).
The reflection module reads the liked, reblogged and commented posts from here
(:meth:`ActionMemory.engaged_posts`).

Duplicate posts (§3.1.4): after a post is generated, its TF-IDF cosine with each of the
agent's earlier posts is computed (:func:`.tfidf.max_tfidf_cosine`); when the highest is
greater than T_p (``duplicate_threshold``, 0.80 in §4.1; strictly greater, as the paper says)
the agent regenerates the post. The paper does not bound the retries: we allow
``max_attempts`` generations per topic (default 3) and then skip the topic, recording it in
``skipped`` (see :mod:`.post_writer`).

Entries beyond ``capacity`` are dropped oldest first; the agent's own posts are kept apart and
always compared against.

The memory protocol (:class:`townsquare.api.Memory`, so any policy runs with this memory):
``remember`` keeps nothing of what it is handed (this memory records what the platform
accepted, told by the engine) and passes every record on to the next tier; ``recall`` ranks the
last ``recall_window`` action entries, as ``action`` records, by cosine to the query (through
the ``memory.retrieval`` scorer when that slot is filled); ``since`` lists them by time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import MemorySpec, hookimpl
from townsquare.api import MemoryRecord, retrieval_of

from ..tfidf import max_tfidf_cosine

log = structlog.get_logger("townsquare.plugins.social_agent.memory.action_memory")

#: Actions the reflection looks back on (§3.1.5: likes, reblogs and comments).
ENGAGEMENTS = ("like", "reblog", "comment")


def observation_of(post: Any) -> MemoryRecord:
    """A browsed post (``PostView``) as the observation every memory design receives."""
    return MemoryRecord(f"{post.author_id} posted: {post.text}", kind="observation",
                        meta={"post_id": post.id, "author_id": post.author_id})


def post_of(record: MemoryRecord) -> tuple[str, str, str] | None:
    """``(post id, author, text)`` of an :func:`observation_of` record, else None."""
    meta = record.meta or {}
    post_id, author = meta.get("post_id"), meta.get("author_id")
    prefix = f"{author} posted: "
    if record.kind != "observation" or post_id is None or not record.text.startswith(prefix):
        return None
    return post_id, author, record.text[len(prefix):]


class ActionMemoryConfig(BaseModel):
    """``[plugins.action_memory]`` settings."""

    model_config = ConfigDict(extra="forbid")

    duplicate_threshold: float = Field(0.80, ge=0.0, le=1.0, description="T_p (Zhou §4.1)")
    max_attempts: int = Field(3, ge=1, description="generations per topic before it is skipped")
    capacity: int = Field(5000, gt=0, description="entries kept (oldest dropped); own posts are always kept")
    recall_window: int = Field(200, gt=0, description="latest entries a recall ranks (the memory protocol)")


class ActionMemory:
    def __init__(self, config: ActionMemoryConfig | None = None):
        self.config = config or ActionMemoryConfig()
        self.entries: list[dict[str, Any]] = []
        self.posts: list[str] = []
        self.skipped: list[dict[str, Any]] = []
        self.added = 0
        # Posts the policy showed this round (id -> (author, text)), so recording a like needs
        # no platform read; cleared once the round's actions are recorded.
        self._seen: dict[str, tuple[str, str]] = {}

    @property
    def threshold(self) -> float:
        return self.config.duplicate_threshold

    @property
    def max_attempts(self) -> int:
        return self.config.max_attempts

    # ------------------------------------------------------------------ recording

    async def _target(self, ctx: Any, post_id: str | None) -> tuple[str | None, str | None]:
        if post_id is None:
            return None, None
        if post_id in self._seen:
            return self._seen[post_id]
        view = await ctx.platform.get_post(post_id)
        return (view.author_id, view.text) if view is not None else (None, None)

    def add(self, entry: dict[str, Any]) -> None:
        entry.setdefault("id", f"a{self.added}")
        self.added += 1
        self.entries.append(entry)
        if entry["kind"] == "post" and entry.get("text"):
            self.posts.append(entry["text"])
        if len(self.entries) > self.config.capacity:
            del self.entries[: len(self.entries) - self.config.capacity]

    async def on_applied(self, ctx: Any, applied: list[tuple[Any, Any]]) -> None:
        for action, result in applied:
            if not result.ok:
                continue
            entry: dict[str, Any] = {"round": ctx.round, "kind": action.kind, "created": ctx.now.isoformat()}
            if action.kind == "browse":
                entry["post_ids"] = list(action.post_ids)
            elif action.kind == "post":
                entry.update(post_id=result.created_id, author_id=action.agent_id, text=action.text)
            elif action.kind in ENGAGEMENTS:
                author, text = await self._target(ctx, action.target_post)
                entry.update(post_id=action.target_post, author_id=author, text=text)
                if action.kind == "comment":
                    entry.update(comment=action.text, created_id=result.created_id)
            else:  # follow, unfollow
                entry["author_id"] = action.target_agent
            self.add(entry)
        self._seen.clear()

    def record_skipped(self, round: int, topic: str, similarity: float, attempts: int) -> None:
        self.skipped.append({"round": round, "topic": topic, "similarity": float(f"{similarity:.4f}"), "attempts": attempts})

    # ------------------------------------------------------------------ reading

    def post_similarity(self, text: str, extra: Sequence[str] = ()) -> float:
        """The highest TF-IDF cosine between ``text`` and the agent's earlier posts (plus
        ``extra``: posts written this round, not yet applied)."""
        return max_tfidf_cosine(text, [*self.posts, *extra])

    def is_duplicate(self, similarity: float) -> bool:
        """Regenerate when the similarity is greater than T_p (§3.1.4)."""
        return similarity > self.config.duplicate_threshold

    def engaged_posts(self, since_round: int = 0) -> list[dict[str, Any]]:
        """Posts liked, reblogged or commented on from ``since_round`` on, in the order of the
        first action on each: ``{post_id, author_id, text, actions: [(kind, comment)]}``."""
        posts: dict[str, dict[str, Any]] = {}
        for entry in self.entries:
            if entry["round"] < since_round or entry["kind"] not in ENGAGEMENTS or not entry.get("post_id"):
                continue
            item = posts.setdefault(entry["post_id"], {"post_id": entry["post_id"], "author_id": entry.get("author_id"),
                                                       "text": entry.get("text") or "", "actions": []})
            item["actions"].append((entry["kind"], entry.get("comment")))
        return list(posts.values())

    # ------------------------------------------------------------------ the memory protocol

    @staticmethod
    def as_record(entry: dict[str, Any]) -> MemoryRecord:
        """An entry as an ``action`` record ("I liked a3's post: ...")."""
        kind, author, text = entry["kind"], entry.get("author_id") or "someone", entry.get("text") or ""
        if kind == "post":
            line = f"I posted: {text}"
        elif kind == "comment":
            line = f"I commented \"{entry.get('comment') or ''}\" on {author}'s post: {text}"
        elif kind in ENGAGEMENTS:
            line = f"I {'liked' if kind == 'like' else 'reblogged'} {author}'s post: {text}"
        elif kind == "browse":
            line = f"I browsed {len(entry.get('post_ids', ()))} posts"
        else:
            line = f"I {kind}ed {author}"
        created = datetime.fromisoformat(entry["created"]) if entry.get("created") else None
        meta = {key: entry[key] for key in ("round", "post_id", "author_id") if entry.get(key) is not None}
        return MemoryRecord(line, kind="action", created=created, last_access=created, id=entry.get("id", ""), meta=meta)

    async def remember(self, ctx: Any, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """Notes the browsed posts among ``records`` (:func:`observation_of`) and passes every
        record on: this tier records the agent's actions, not what it saw."""
        for record in records:
            seen = post_of(record)
            if seen is not None:
                self._seen[seen[0]] = seen[1:]
        return list(records)

    async def recall(self, ctx: Any, query: str, k: int) -> list[MemoryRecord]:
        window = [e for e in self.entries[-self.config.recall_window:] if e["kind"] != "browse"]
        if k <= 0 or not window:
            return []
        records = [self.as_record(e) for e in window]
        vectors = await ctx.embedder.embed([r.text for r in records])
        relevance = vectors @ np.asarray(await ctx.embedder.embed_one(query), dtype=np.float32)
        scorer = retrieval_of(ctx.agent)
        scores = relevance if scorer is None else np.asarray(scorer.score(records, relevance, ctx.now))
        order = sorted(range(len(records)), key=lambda i: (-float(scores[i]), i))[:k]
        return [records[i] for i in order]

    def since(self, when: datetime | None) -> list[MemoryRecord]:
        if when is None:
            return [self.as_record(e) for e in self.entries]
        # ISO times of one clock compare as strings: only the newer entries become records
        cut = when.isoformat()
        return [self.as_record(e) for e in self.entries if (e.get("created") or "") > cut]

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {"entries": [dict(e) for e in self.entries], "posts": list(self.posts), "skipped": [dict(s) for s in self.skipped],
                "added": self.added, "records": [r.to_dict() for r in self.since(None)]}

    def set_state(self, state: dict[str, Any]) -> None:
        self.entries = [dict(e) for e in state.get("entries", [])]
        self.posts = list(state.get("posts", []))
        self.skipped = [dict(s) for s in state.get("skipped", [])]
        self.added = int(state.get("added", len(self.entries)))
        self._seen.clear()


def build_action_memory(config: ActionMemoryConfig | None, ctx: Any) -> ActionMemory:
    return ActionMemory(config)


@hookimpl
def townsquare_register_memory():
    return [
        MemorySpec(
            "action_memory", build_action_memory, config_model=ActionMemoryConfig, memory_kind="short_term", priority=100,
            description="Zhou et al.: a record of the agent's actions, duplicate-post check (TF-IDF > T_p)",
        )
    ]
