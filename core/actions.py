"""What an agent does: actions, and what the platform answers.

A policy returns :class:`Action` records; it never writes to the platform itself. The engine
applies every active agent's actions after all of the round's steps have finished, in agent
order and then in the order each policy returned them, so a seed fixes the outcome however
the concurrent LLM calls interleave.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Actions on a social platform (Zhou et al. §3.1.2: browse, like, reblog, comment, post, follow).
SOCIAL_ACTIONS: frozenset[str] = frozenset(
    {"browse", "post", "comment", "like", "reblog", "follow", "unfollow"}
)

#: Actions that change platform state; ``browse`` only marks posts as read.
WRITE_ACTIONS: frozenset[str] = SOCIAL_ACTIONS - {"browse"}


@dataclass(frozen=True)
class Action:
    """One intended action.

    ``target_post`` is the post liked, reblogged or commented on; ``target_agent`` the account
    followed or unfollowed; ``text`` the body of a post or comment; ``post_ids`` the posts a
    ``browse`` showed. ``detail`` carries policy-specific, JSON-serialisable context (the
    similarity that triggered a like, the topic of a post...), stored in the actions trace.
    """

    agent_id: str
    kind: str
    target_post: str | None = None
    target_agent: str | None = None
    text: str | None = None
    post_ids: tuple[str, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["post_ids"] = list(self.post_ids)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Action":
        return cls(**{**data, "post_ids": tuple(data.get("post_ids", ()))})


@dataclass(frozen=True)
class ActionResult:
    """The platform's answer. ``ok`` is False when the platform refused (liking a deleted
    post, following oneself); ``error`` says why. ``created_id`` is the new post's id."""

    ok: bool = True
    created_id: str | None = None
    error: str | None = None
    remote_id: str | None = None
