"""Mastodon-Digest-style ranking (Zhou et al. §3.2.2, eq. 1): slot ``recommender``, component
``mastodon_digest``.

Every time a user browses, the unread posts are scored and sorted:

    score = cbrt(N_L * N_R * N_C) / sqrt(N_F)                                   (eq. 1)

with N_L, N_R, N_C the post's likes, reblogs and comments and N_F its author's followers.

Read literally, eq. 1 gives 0 to any post that lacks likes, reblogs OR comments, so fresh
posts all tie; and it divides by zero for an author with no followers. We give such a post
score 0, as Mastodon Digest's own ``InverseFollowerWeight`` does ("zero out posts by accounts
with zero followers"). Ties, which are common (a simulation starts with no follows, so at
first every post scores 0), are broken by recency: the platform's newest-first candidate order, so
the ranking is deterministic and with no engagement at all it is the chronological feed.

``smoothing = true`` scores ``cbrt((N_L+1)(N_R+1)(N_C+1)) / sqrt(N_F+1)`` instead: every post
gets a positive score, one missing count no longer zeroes the rest, and a zero-follower author
no longer needs a special case. Mastodon Digest's later scorers smooth the same way for the
counts (``ExtendedSimpleScorer``: geometric mean of count + 1, but 0 when all counts are 0) and
keep the zero-follower rule; its weighted variant applies the follower weight twice. We follow
the paper's formula, not the code.

Every candidate is scored (a lazy candidate sequence is read in full, up to the platform's
candidate window); the top ``limit`` are kept with a heap.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from townsquare.api import PostView, RecommenderSpec, hookimpl


class MastodonDigestConfig(BaseModel):
    """``[recommender]`` settings of ``mastodon_digest``."""

    model_config = ConfigDict(extra="forbid")

    smoothing: bool = False


def digest_score(likes: int, reblogs: int, replies: int, followers: int, smoothing: bool = False) -> float:
    """Eq. 1 (or its +1-smoothed variant); 0 for a zero-follower author under eq. 1."""
    if smoothing:
        return math.cbrt((likes + 1) * (reblogs + 1) * (replies + 1)) / math.sqrt(followers + 1)
    if followers <= 0:
        return 0.0
    return math.cbrt(likes * reblogs * replies) / math.sqrt(followers)


class MastodonDigest:
    def __init__(self, config: MastodonDigestConfig | None = None):
        self.config = config or MastodonDigestConfig()

    def score(self, post: PostView) -> float:
        return digest_score(post.likes, post.reblogs, post.replies, post.author_followers, self.config.smoothing)

    def rank(self, viewer: str, candidates: Sequence[PostView], limit: int, rng: Any) -> list[PostView]:
        if limit <= 0:
            return []
        # Candidates arrive newest first: their position breaks ties by recency.
        scored = ((-self.score(post), i, post) for i, post in enumerate(candidates))
        return [item[2] for item in heapq.nsmallest(limit, scored, key=lambda item: item[:2])]

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_mastodon_digest(config: MastodonDigestConfig | None, ctx: Any) -> MastodonDigest:
    return MastodonDigest(config)


@hookimpl
def townsquare_register_recommenders():
    return [
        RecommenderSpec(
            "mastodon_digest", build_mastodon_digest, config_model=MastodonDigestConfig,
            description="Zhou et al. eq. 1: cbrt(likes*reblogs*comments)/sqrt(followers), ties newest first",
        )
    ]
