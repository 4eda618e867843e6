"""The Embedding baseline: acts on cosine similarity between persona and post, no LLM.

RecAgent (Wang et al., "Believability of the simulated user behaviors", Fig. 2a) compares its
LLM agents with an "Embedding" simulator [26]: probabilistic matrix factorisation (Mnih &
Salakhutdinov, 2007) learns a vector per user and per item from ratings, and a simulated user
picks the listed items with the largest inner product. A social simulation starts with no
ratings to learn from, so this adaptation puts text embeddings of the persona and of each post
in place of the learned vectors, and fixed thresholds in place of "pick the top a" (a feed has
no fixed number of right answers). Each time the agent is active it

1. reads its home timeline (``feed_size`` posts) and marks them read (one ``browse``);
2. embeds its persona text once (cached, checkpointed) and the posts (one matrix-vector
   product gives every cosine, since embeddings have unit length);
3. likes a post when cos >= ``like_threshold``, reblogs it when cos >= ``reblog_threshold`` and
   follows its author when cos >= ``follow_threshold`` (once per author: the policy remembers
   whom it followed); the cosine goes in ``Action.detail["similarity"]``;
4. with probability ``post_probability`` posts one of its persona's sentences, or a line of
   ``content_file`` when one is given. The baseline cannot write, so it posts given text.

Default thresholds were measured with the hash embedder (dim 256, bigrams, stop words
dropped) on ``examples/personas.jsonl``, each persona against every other persona's sentences
(the posts this policy makes): 0.10 / 0.15 / 0.20 put 9.8% / 3.3% / 0.8% of the 6,786 pairs
over the like / reblog / follow bar. In a 40-agent, 20-round run with every agent active and a
chronological feed that gave 229 posts, 738 likes, 240 reblogs and 40 follows: likes common,
reblogs rarer, follows rarest. At dim 256 hash collisions add noise near 0.1 (about half the
pairs over the like bar share no word; 87% of those over the follow bar do); a larger ``dim``
or another embedder (MiniLM scores unrelated text higher) needs the thresholds re-measured.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare import hookimpl
from townsquare.actions import Action
from townsquare.errors import UsageError
from townsquare.files import read_user_text
from townsquare.specs import PolicySpec

log = structlog.get_logger("townsquare.plugins.embedding_baseline")


class SimilarityRuleConfig(BaseModel):
    """The thresholds of the similarity rule (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    like_threshold: float = Field(0.10, ge=-1.0, le=1.0)
    reblog_threshold: float = Field(0.15, ge=-1.0, le=1.0)
    follow_threshold: float = Field(0.20, ge=-1.0, le=1.0)


class SimilarityRule:
    """The baseline's decision rule for one agent: cosine between its persona and a post
    against a threshold per decision kind (``like``, ``reblog``, ``follow``). Also the cheap
    decider other policies route decisions to (the social agent's ``similarity_decides``)."""

    KINDS = ("like", "reblog", "follow")

    def __init__(self, config: SimilarityRuleConfig):
        self.config = config
        self._persona_vector: np.ndarray | None = None

    def threshold(self, kind: str) -> float:
        return float(getattr(self.config, f"{kind}_threshold"))

    async def similarities(self, ctx: Any, texts: list[str]) -> np.ndarray:
        """Cosine of each text with the agent's persona (embedded once, then kept)."""
        if self._persona_vector is None:
            self._persona_vector = np.asarray(await ctx.embedder.embed_one(ctx.agent.persona.text), dtype=np.float32)
        return (await ctx.embedder.embed(texts)) @ self._persona_vector

    def decides(self, kind: str, similarity: float) -> bool:
        return similarity >= self.threshold(kind)

    def get_state(self) -> list[float] | None:
        return None if self._persona_vector is None else self._persona_vector.tolist()

    def set_state(self, vector: list[float] | None) -> None:
        self._persona_vector = None if vector is None else np.asarray(vector, dtype=np.float32)


#: Recorded on each browse: every decision of this policy is the similarity rule's.
DECIDED_BY = {kind: "similarity" for kind in SimilarityRule.KINDS}


class EmbeddingBaselineConfig(SimilarityRuleConfig):
    """``[plugins.embedding_baseline]`` settings."""

    feed_size: int = Field(10, gt=0)
    post_probability: float = Field(0.3, ge=0.0, le=1.0)
    #: posts written when the agent posts (Zhou §4.1's initial agents publish 7 each at once)
    posts_per_step: int = Field(1, ge=1)
    content_file: str | None = Field(None, description="one post per line; relative to the scenario's folder")


@lru_cache(maxsize=8)
def _read_lines(path: str) -> tuple[str, ...]:
    # Cached: the factory runs once per agent and 10k agents should not reread one file.
    text = read_user_text(path, "content file (plugins.embedding_baseline.content_file)")
    lines = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not lines:
        raise UsageError(f"{path}: content file has no lines")
    return lines


class EmbeddingBaseline:
    """Likes, reblogs and follows by cosine thresholds; posts given text."""

    def __init__(self, config: EmbeddingBaselineConfig | None = None, content: tuple[str, ...] = ()):
        self.config = config or EmbeddingBaselineConfig()
        self.content = content
        self.rule = SimilarityRule(self.config)
        self._followed: set[str] = set()

    async def step(self, ctx: Any) -> list[Action]:
        cfg = self.config
        me = ctx.agent.id
        actions: list[Action] = []
        feed = await ctx.home_timeline(cfg.feed_size)
        if feed:
            rule = self.rule
            actions.append(Action(me, "browse", post_ids=tuple(p.id for p in feed), detail={"decided_by": DECIDED_BY}))
            similarity = await rule.similarities(ctx, [p.text for p in feed])
            # Only posts over the lowest bar get a Python-level look.
            low = min(rule.threshold(kind) for kind in rule.KINDS)
            for i in np.flatnonzero(similarity >= low):
                post, sim = feed[i], float(similarity[i])
                detail = {"similarity": round(sim, 4)}
                if rule.decides("like", sim):
                    actions.append(Action(me, "like", target_post=post.id, detail=detail))
                if rule.decides("reblog", sim):
                    actions.append(Action(me, "reblog", target_post=post.id, detail=detail))
                author = post.author_id
                if rule.decides("follow", sim) and author != me and author not in self._followed:
                    self._followed.add(author)
                    actions.append(Action(me, "follow", target_agent=author, detail=detail))
        if cfg.post_probability > 0 and ctx.rng.random() < cfg.post_probability:
            pool = self.content or ctx.agent.persona.sentences
            for _ in range(cfg.posts_per_step if pool else 0):
                actions.append(Action(me, "post", text=pool[int(ctx.rng.integers(len(pool)))]))
        return actions

    def get_state(self) -> dict[str, Any]:
        return {"persona_vector": self.rule.get_state(), "followed": sorted(self._followed)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.rule.set_state(state.get("persona_vector"))
        self._followed = set(state.get("followed", []))


def build_embedding_baseline(config: EmbeddingBaselineConfig | None, ctx: Any) -> EmbeddingBaseline:
    config = config or EmbeddingBaselineConfig()
    content: tuple[str, ...] = ()
    if config.content_file:
        path = Path(config.content_file)
        if not path.is_absolute():
            path = Path(getattr(ctx, "base_dir", ".") or ".") / path
        content = _read_lines(str(path.resolve()))
    return EmbeddingBaseline(config, content)


@hookimpl
def townsquare_register_policies():
    return [
        PolicySpec(
            "embedding_baseline", build_embedding_baseline, config_model=EmbeddingBaselineConfig,
            description="likes, reblogs and follows by persona-post cosine; no LLM (RecAgent's Embedding baseline)",
        )
    ]
