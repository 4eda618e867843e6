"""What Zhou et al.'s policy and follow reflection need of ``memory.short_term``, beyond the
memory protocol every tier implements: the protocols they name in ``ComponentSpec.requires``,
checked when an agent is built (a short-term memory that lacks a method fails at start, naming
it; one left empty, ``memory.short_term = "none"``, switches the feature off).
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from townsquare.api import Component


class DuplicateCheck(Component, Protocol):
    """What a policy that avoids repeating itself needs of ``memory.short_term`` (Zhou et al.
    §3.1.4: a new post too similar to the agent's earlier ones is regenerated, at most
    ``max_attempts`` times, then skipped)."""

    @property
    def max_attempts(self) -> int: ...

    def post_similarity(self, text: str, extra: Sequence[str] = ()) -> float:
        """The highest similarity of ``text`` to the agent's earlier posts and ``extra``."""

    def is_duplicate(self, similarity: float) -> bool: ...

    def record_skipped(self, round: int, topic: str, similarity: float, attempts: int) -> None:
        """Remember that a post on ``topic`` was given up after ``attempts`` drafts."""


class EngagementLog(Component, Protocol):
    """What the follow reflection needs of ``memory.short_term`` (Zhou et al. §3.1.5): the
    posts the agent engaged with since a round (the browsed posts reach the tier as
    observations through ``remember``, like any memory's)."""

    def engaged_posts(self, since_round: int = 0) -> list[dict[str, Any]]:
        """Posts the agent liked, reblogged or commented on since ``since_round``, oldest
        first, as dicts with at least ``post_id``, ``author_id`` and ``text``."""
