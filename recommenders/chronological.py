"""Chronological feed: newest first, nothing ranked (Mastodon's home timeline)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from townsquare.api import PostView, RecommenderSpec, hookimpl


class Chronological:
    """Keeps the platform's newest-first order and cuts it to ``limit``.

    Slicing (rather than copying every candidate) lets a lazy candidate sequence build only
    the posts shown.
    """

    def rank(self, viewer: str, candidates: Sequence[PostView], limit: int, rng: Any) -> list[PostView]:
        return list(candidates[:limit]) if limit > 0 else []

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_chronological(config: None, ctx: Any) -> Chronological:
    return Chronological()


@hookimpl
def townsquare_register_recommenders():
    return [RecommenderSpec("chronological", build_chronological, priority=100, description="newest first")]
