"""The platform protocol: where agents act.

The in-memory platform (``townsquare.platforms.in_memory``) is the reference implementation;
the Mastodon adapter implements the same methods over HTTP. Methods are coroutines so a
network platform can wait without blocking the round. Read methods are called during agent
steps; write methods only by the engine, in deterministic order (see :mod:`townsquare.actions`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .actions import SOCIAL_ACTIONS, Action, ActionResult


@dataclass
class PostView:
    """A post as agents and recommenders see it. Counts are taken when the view is made."""

    id: str
    author_id: str
    text: str
    round: int
    created_at: str
    reply_to: str | None = None
    reblog_of: str | None = None
    likes: int = 0
    reblogs: int = 0
    replies: int = 0
    author_followers: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class AccountView:
    id: str
    handle: str
    display_name: str
    bio: str = ""
    followers: int = 0
    following: int = 0
    posts: int = 0


def platform_actions(platform: Any) -> frozenset[str]:
    """The action kinds ``platform`` accepts: its ``actions`` attribute, or the social actions.
    The engine refuses any other kind, naming the kind and the platform."""
    return frozenset(getattr(platform, "actions", None) or SOCIAL_ACTIONS)


@runtime_checkable
class Platform(Protocol):
    """What every platform offers. ``viewer`` and ``author`` are agent ids. A platform declares
    the action kinds it accepts in an ``actions`` attribute (a frozenset; the social platforms
    accept :data:`townsquare.actions.SOCIAL_ACTIONS`, the default when it is absent)."""

    async def register_account(self, agent_id: str, display_name: str, bio: str) -> AccountView: ...

    async def apply(self, action: Action, round: int, now: str) -> ActionResult:
        """Carry out one write action (post, comment, like, reblog, follow, unfollow, browse).

        A platform may also offer ``async apply_batch(actions, round, now) -> list[ActionResult]``:
        the engine then hands it the whole round's actions in apply order and expects the
        answers in the same order (a network platform can send independent writes in parallel).
        """

    async def home_timeline(self, viewer: str, limit: int, *, rng: Any = None, author_filter: set[str] | None = None) -> list[PostView]:
        """The viewer's unread feed, ranked by the configured recommender. ``rng`` is the
        viewer's generator (random recommenders stay reproducible); ``author_filter`` keeps
        only posts by those accounts (staged scenarios)."""

    async def public_timeline(self, limit: int) -> list[PostView]: ...

    async def search(self, query: str, limit: int) -> list[PostView]: ...

    async def get_post(self, post_id: str) -> PostView | None: ...

    async def profile(self, agent_id: str) -> AccountView | None: ...

    async def followers(self, agent_id: str) -> list[str]: ...

    async def following(self, agent_id: str) -> list[str]: ...

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...
