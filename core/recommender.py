"""The recommender protocol: rank candidate posts into a feed."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

from .platform import PostView


@runtime_checkable
class Recommender(Protocol):
    """Ranks ``candidates`` for ``viewer``; returns at most ``limit`` of them, best first.

    ``rng`` is the viewer's own generator (a numpy ``Generator``), so random recommenders stay
    reproducible under any concurrency. Candidates arrive newest first, as a sequence that may
    be lazy (the in-memory platform builds a post view only when it is touched): index, slice
    or iterate it; do not copy it whole unless the ranking needs every candidate.
    """

    def rank(self, viewer: str, candidates: Sequence[PostView], limit: int, rng: Any) -> list[PostView]: ...

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...
