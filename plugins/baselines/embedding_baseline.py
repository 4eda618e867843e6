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

Batch path (``batch = true``, the default): the engine hands every active agent of a round
whose policy is this one to :meth:`EmbeddingBaseline.step_batch` at once
(:mod:`townsquare.batch_turns`): the feeds are read in one platform call, each distinct
persona-post cosine is computed once with numpy, and each agent then draws from its own
generator in the order :meth:`step` does, so the event log is the one ``batch = false`` (one
turn per agent) writes. A cosine is an elementwise product summed along the row
(:func:`cosines`), whose bits do not depend on how many rows are computed together.

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from pydantic import Field, field_validator

from townsquare.api import Action, PolicySpec, UsageError, hookimpl
from townsquare.lib.files import read_user_text
from townsquare.lib.similarity_rule import SimilarityRule, SimilarityRuleConfig

log = structlog.get_logger("townsquare.plugins.baselines.embedding_baseline")


#: Recorded on each browse: every decision of this policy is the similarity rule's.
DECIDED_BY = {kind: "similarity" for kind in SimilarityRule.KINDS}


class EmbeddingBaselineConfig(SimilarityRuleConfig):
    """``[plugins.embedding_baseline]`` settings."""

    feed_size: int = Field(10, gt=0)
    post_probability: float = Field(0.3, ge=0.0, le=1.0)
    #: posts written when the agent posts (Zhou §4.1's initial agents publish 7 each at once)
    posts_per_step: int = Field(1, ge=1)
    content_file: str | None = Field(None, description="one post per line; relative to the scenario's folder")
    batch: bool = Field(True, description="decide every active agent of a round in one numpy pass "
                                          "(townsquare.batch_turns); false: one turn per agent. Same event log either way")

    @field_validator("thresholds")
    @classmethod
    def _fixed(cls, value: str) -> str:
        if value != "fixed":
            raise ValueError("the baseline decides by fixed thresholds (like_threshold, ...); calibrated thresholds "
                             "are for the decisions a social agent routes to the rule (similarity_rule in [plugins.social_agent])")
        return value


@lru_cache(maxsize=8)
def _read_lines(path: str) -> tuple[str, ...]:
    # Cached: the factory runs once per agent and 10k agents should not reread one file.
    text = read_user_text(path, "content file (plugins.embedding_baseline.content_file)")
    lines = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not lines:
        raise UsageError(f"{path}: content file has no lines")
    return lines


def cosines(vectors: np.ndarray, personas: np.ndarray) -> np.ndarray:
    """Row-wise dot products of unit vectors: ``cosines(V, P)[i] = V[i] . P[i]``.

    An elementwise product summed along each row, so a row's value depends on that row alone:
    the batch path (thousands of rows) and one agent's turn (ten rows) give the same bits,
    which a matrix-vector product (BLAS blocks rows differently by count) does not promise."""
    return (vectors * personas).sum(axis=1)


class EmbeddingBaseline:
    """Likes, reblogs and follows by cosine thresholds; posts given text.

    Kept small for populations of a million: the config and content are shared, the persona
    vector is the run's embedding cache entry (one array per distinct persona text), and the
    followed set exists only once the agent follows someone."""

    __slots__ = ("config", "content", "_vector", "_followed")

    def __init__(self, config: EmbeddingBaselineConfig | None = None, content: tuple[str, ...] = ()):
        self.config = config or EmbeddingBaselineConfig()
        self.content = content
        self._vector: np.ndarray | None = None
        self._followed: set[str] | None = None

    @property
    def batch(self) -> bool:
        """Whether the engine may decide this agent in a batch (:meth:`step_batch`)."""
        return self.config.batch

    async def step(self, ctx: Any) -> list[Action]:
        return (await self.step_batch([ctx]))[0]

    @staticmethod
    async def step_batch(ctxs: Sequence[Any]) -> list[list[Action]]:
        """:meth:`step` for many active agents whose policy is an :class:`EmbeddingBaseline`, in
        order: every feed read in one platform call where the platform offers
        ``home_timelines``, every persona-post cosine in one numpy pass over the distinct
        (persona, post) pairs, then each agent's decisions and posts with its own generator,
        in the order :meth:`step` makes them."""
        if not ctxs:
            return []
        policies: list[EmbeddingBaseline] = [ctx.agent.components["policy"] for ctx in ctxs]
        feeds = await _feeds(ctxs, policies)
        sims, starts = await _similarities(ctxs, policies, feeds)
        out: list[list[Action]] = []
        for k, (ctx, policy, feed) in enumerate(zip(ctxs, policies, feeds)):
            actions: list[Action] = []
            if feed:
                actions.append(Action(ctx.agent.id, "browse", post_ids=tuple(p.id for p in feed), detail={"decided_by": DECIDED_BY}))
                policy._judge(ctx.agent.id, feed, sims[starts[k]:starts[k + 1]], actions)
            policy._posts(ctx, actions)
            out.append(actions)
        return out

    def _judge(self, me: str, feed: list[Any], similarity: np.ndarray, actions: list[Action]) -> None:
        cfg = self.config
        like, reblog, follow = cfg.like_threshold, cfg.reblog_threshold, cfg.follow_threshold
        # Only posts over the lowest bar get a Python-level look.
        for i in np.flatnonzero(similarity >= min(like, reblog, follow)):
            post, sim = feed[i], float(similarity[i])
            detail = {"similarity": round(sim, 4)}
            if sim >= like:
                actions.append(Action(me, "like", target_post=post.id, detail=detail))
            if sim >= reblog:
                actions.append(Action(me, "reblog", target_post=post.id, detail=detail))
            author = post.author_id
            if sim >= follow and author != me and (self._followed is None or author not in self._followed):
                if self._followed is None:
                    self._followed = set()
                self._followed.add(author)
                actions.append(Action(me, "follow", target_agent=author, detail=detail))

    def _posts(self, ctx: Any, actions: list[Action]) -> None:
        cfg = self.config
        if cfg.post_probability > 0 and ctx.rng.random() < cfg.post_probability:
            pool = self.content or ctx.agent.persona.sentences
            for _ in range(cfg.posts_per_step if pool else 0):
                actions.append(Action(ctx.agent.id, "post", text=pool[int(ctx.rng.integers(len(pool)))]))

    def get_state(self) -> dict[str, Any]:
        # The persona vector is not saved: it is the embedder's vector of the persona text,
        # embedded again after a resume (the same vector with the offline embedders). Saved, it
        # made a million agents' checkpoint a gigabyte.
        return {"followed": sorted(self._followed or ())}

    def set_state(self, state: dict[str, Any]) -> None:
        self._vector = None
        self._followed = set(state["followed"]) if state.get("followed") else None


async def _feeds(ctxs: Sequence[Any], policies: list[EmbeddingBaseline]) -> list[list[Any]]:
    """Each agent's feed, as :meth:`StepContext.home_timeline` reads it."""
    home_timelines = getattr(ctxs[0].platform, "home_timelines", None)
    if home_timelines is None or len(ctxs) == 1:
        return [await ctx.home_timeline(policy.config.feed_size) for ctx, policy in zip(ctxs, policies)]
    return await home_timelines([(ctx.agent.id, policy.config.feed_size, ctx.agent.rng, ctx.feed_authors)
                                 for ctx, policy in zip(ctxs, policies)])


async def _similarities(ctxs: Sequence[Any], policies: list[EmbeddingBaseline],
                        feeds: list[list[Any]]) -> tuple[np.ndarray, list[int]]:
    """The cosine of every feed post with its reader's persona, feeds laid end to end
    (agent k's are ``sims[starts[k]:starts[k + 1]]``). Each distinct text and persona is
    embedded once; each distinct (persona, post) pair is computed once."""
    embedder = ctxs[0].embedder
    starts = [0]
    for feed in feeds:
        starts.append(starts[-1] + len(feed))
    if starts[-1] == 0:
        return np.zeros(0, dtype=np.float32), starts
    unread = [k for k, feed in enumerate(feeds) if feed and policies[k]._vector is None]
    if unread:
        texts = [ctxs[k].agent.persona.text for k in unread]
        if len(unread) > 1:
            await embedder.embed(list(dict.fromkeys(texts)))  # the new ones in one call
        for k, text in zip(unread, texts):
            # the cache's own array: agents with one persona text share one vector
            policies[k]._vector = np.asarray(await embedder.embed_one(text), dtype=np.float32)
    post_rows: dict[str, int] = {}  # by text: a cosine depends on the text alone
    texts: list[str] = []
    persona_rows: dict[int, int] = {}
    personas: list[np.ndarray] = []
    entry_post = np.empty(starts[-1], dtype=np.int64)
    entry_persona = np.empty(starts[-1], dtype=np.int64)
    for k, feed in enumerate(feeds):
        if not feed:
            continue
        vector = policies[k]._vector
        row = persona_rows.get(id(vector))
        if row is None:
            row = persona_rows[id(vector)] = len(personas)
            personas.append(vector)
        entry_persona[starts[k]:starts[k + 1]] = row
        for j, post in enumerate(feed, start=starts[k]):
            prow = post_rows.get(post.text)
            if prow is None:
                prow = post_rows[post.text] = len(texts)
                texts.append(post.text)
            entry_post[j] = prow
    post_vectors = np.asarray(await embedder.embed(texts), dtype=np.float32)
    persona_matrix = np.stack(personas)
    pairs, inverse = np.unique(entry_persona * len(texts) + entry_post, return_inverse=True)
    sims = cosines(post_vectors[pairs % len(texts)], persona_matrix[pairs // len(texts)])
    return sims[inverse.reshape(-1)], starts


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
