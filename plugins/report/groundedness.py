"""Groundedness: do the agents write and choose like their personas? Metric ``groundedness``.

Two measures, both with the run's own embedder (cosine of unit vectors), over the whole run so
far (the value at the last round is the run's):

* **persona margin of posts** (``posts.margin``): for each top-level post, its similarity to
  its author's persona minus its mean similarity to every other agent's persona; the mean over
  posts. Positive: posts are closer to their own persona than to anyone else's; 0: the text
  could have been written by anyone in the run. ``posts.own`` and ``posts.others`` are the two
  terms. A margin, not a raw similarity, because an embedder scores all text of one style
  alike: the raw number is not comparable across embedders, the margin's sign is.
* **persona slope of likes** (``likes.slope``): each post an agent browsed (its own left out)
  is one like decision, ``x`` = persona-post similarity, ``y`` = 1 if it liked the post. The
  least-squares slope of ``y`` on ``x`` (like rate gained per unit of cosine), and
  ``likes.auc``: the probability that a liked post is more similar to the persona than a
  browsed, unliked one (Mann-Whitney; 0.5: likes ignore the persona; 1: a similarity threshold
  such as the embedding baseline's). ``likes.rate`` and ``likes.decisions`` give the base;
  ``likes.by_similarity`` is the share of like decisions a similarity rule took (the social
  agent's per-decision routing and the embedding baseline say so in each browse action's
  ``detail["decided_by"]``): for those, AUC 1 holds by construction.

* **comments that copy their post** (``comments.copying``): the share of the run's comments
  that repeat the post they answer, verbatim or reshuffled
  (:func:`townsquare.plugins.report.comment_copying.copies`), out of ``comments.count``.

The exact statistics are our choices. The
denominator follows Zhou et al. Table 1's "not like" (shown and not liked), so a post the policy
stopped asking about once its plan's quota was used counts as not liked. The AUC is computed
from a histogram of similarities (``AUC_BINS`` bins on [-1, 1], ties within a bin count half),
so the checkpointed state stays the same size however long the run.

Persona text: :attr:`Persona.text` (the whole persona, as the report's similarity section uses).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from townsquare.api import MetricSpec, RoundView, hookimpl

from .comment_copying import copies

#: Histogram bins for the like AUC (width 0.005 in cosine).
AUC_BINS = 400


def persona_margins(post_vectors: np.ndarray, authors: Sequence[int], persona_vectors: np.ndarray,
                    weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per post: (similarity to its author's persona, mean similarity to the other personas).
    ``authors[i]`` is the row of post i's author in ``persona_vectors``. ``weights[j]``: how many
    agents have persona row j (agents sharing a persona text share a row; default one each);
    at least two agents in all."""
    personas = np.asarray(persona_vectors, dtype=np.float64)
    counts = np.ones(personas.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    agents = counts.sum()
    if agents < 2:
        raise ValueError("a persona margin needs at least two personas")
    posts = np.asarray(post_vectors, dtype=np.float64)
    own = (posts * personas[np.asarray(authors, dtype=int)]).sum(axis=1)
    # the sum of a post's cosines with every agent's persona is its dot with the personas' sum:
    # no posts x agents matrix (a million agents' round would need hundreds of gigabytes)
    others = (posts @ (counts @ personas) - own) / (agents - 1)
    return own, others


def pair_similarities(left: np.ndarray, left_rows: np.ndarray, right: np.ndarray, right_rows: np.ndarray,
                      chunk: int = 65_536) -> np.ndarray:
    """``left[left_rows[k]] . right[right_rows[k]]`` for every k: one matrix product when the two
    tables are small (a few distinct personas), else row products a chunk at a time."""
    if left.shape[0] * right.shape[0] <= 4 * len(left_rows) + 1_000_000:
        return (left @ right.T)[left_rows, right_rows]
    out = np.empty(len(left_rows), dtype=np.float64)
    for start in range(0, len(left_rows), chunk):
        end = start + chunk
        out[start:end] = (left[left_rows[start:end]] * right[right_rows[start:end]]).sum(axis=1)
    return out


def slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Least-squares slope of ``y`` on ``x`` (None when ``x`` does not vary)."""
    return slope_from_sums(*sums(x, y))


def sums(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float, float, float]:
    """(n, sum x, sum y, sum x², sum xy): what a running slope keeps."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return float(xa.size), float(xa.sum()), float(ya.sum()), float((xa * xa).sum()), float((xa * ya).sum())


def slope_from_sums(n: float, sx: float, sy: float, sxx: float, sxy: float) -> float | None:
    denominator = n * sxx - sx * sx
    if n < 2 or denominator <= 1e-12 * max(1.0, n * sxx):
        return None
    return (n * sxy - sx * sy) / denominator


def auc(positive: Sequence[float], negative: Sequence[float]) -> float | None:
    """P(a positive scores above a negative), ties counted half; None if either is empty."""
    pos, neg = np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64)
    if pos.size == 0 or neg.size == 0:
        return None
    neg_sorted = np.sort(neg)
    below = np.searchsorted(neg_sorted, pos, side="left")
    upto = np.searchsorted(neg_sorted, pos, side="right")
    return float((below + 0.5 * (upto - below)).sum() / (pos.size * neg.size))


def histogram_auc(positive: np.ndarray, negative: np.ndarray) -> float | None:
    """:func:`auc` from two histograms over the same bins (ties within a bin count half)."""
    n_pos, n_neg = positive.sum(), negative.sum()
    if n_pos == 0 or n_neg == 0:
        return None
    below = np.cumsum(negative) - negative  # negatives in lower bins
    return float((positive * (below + 0.5 * negative)).sum() / (n_pos * n_neg))


def bin_of(similarity: np.ndarray) -> np.ndarray:
    return np.clip(((np.asarray(similarity) + 1.0) / 2.0 * AUC_BINS).astype(int), 0, AUC_BINS - 1)


class GroundednessMetric:
    """Accumulates the two measures over the run (see the module docstring)."""

    def __init__(self, embedder: Any):
        self.embedder = embedder
        self._personas: tuple[list[str], np.ndarray] | None = None
        self.set_state({})

    async def _persona_vectors(self, agents: list[Any]) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
        """(agent id -> row, one vector per distinct persona text, agents per row); kept while
        the population is the same list (the engine's), so a million agents cost one pass."""
        key = (id(agents), len(agents), agents[0].id, agents[-1].id)
        if self._personas is None or self._personas[0] != key:
            by_text: dict[str, int] = {}
            rows = {agent.id: by_text.setdefault(agent.persona.text, len(by_text)) for agent in agents}
            weights = np.bincount(np.fromiter(rows.values(), dtype=np.int64, count=len(rows)), minlength=len(by_text))
            vectors = np.asarray(await self.embedder.embed(list(by_text)), dtype=np.float64)
            self._personas = (key, rows, vectors, weights)
        return self._personas[1], self._personas[2], self._personas[3]

    async def measure(self, view: RoundView) -> dict[str, float]:
        if self.embedder is not None and len(view.agents) >= 2:
            rows, personas, weights = await self._persona_vectors(view.agents)
            await self._add_posts(view.actions, rows, personas, weights)
            await self._add_likes(view, rows, personas)
        await self._add_comments(view)
        return self.values()

    async def _add_comments(self, view: RoundView) -> None:
        for action in view.actions:
            if action["kind"] != "comment" or not action.get("ok", True) or not action.get("text") or not action.get("target_post"):
                continue
            post = await view.platform.get_post(action["target_post"])
            if post is None or not post.text:
                continue
            self.comments += np.array([1, int(copies(action["text"], post.text))])

    async def _add_posts(self, actions: list[dict[str, Any]], rows: dict[str, int], personas: np.ndarray,
                         weights: np.ndarray) -> None:
        posts = [a for a in actions if a["kind"] == "post" and a.get("ok", True) and a.get("text") and a["agent_id"] in rows]
        if not posts:
            return
        vectors = np.asarray(await self.embedder.embed([a["text"] for a in posts]), dtype=np.float64)
        own, others = persona_margins(vectors, [rows[a["agent_id"]] for a in posts], personas, weights)
        self.posts += np.array([len(posts), own.sum(), others.sum()])

    async def _add_likes(self, view: RoundView, rows: dict[str, int], personas: np.ndarray) -> None:
        liked = {(a["agent_id"], a["target_post"]) for a in view.actions if a["kind"] == "like" and a.get("ok", True)}
        persona_rows: list[int] = []
        post_rows: list[int] = []
        ys: list[float] = []
        posts: dict[str, tuple[int, str | None]] = {}  # post id -> (row among the texts, author)
        texts: list[str] = []
        routed = 0
        for action in view.actions:
            agent = action["agent_id"]
            if action["kind"] != "browse" or agent not in rows:
                continue
            by = (action.get("detail") or {}).get("decided_by")
            rule = isinstance(by, dict) and by.get("like") == "similarity"
            before = len(ys)
            row = rows[agent]
            for post_id in action.get("post_ids") or ():
                seen = posts.get(post_id)
                if seen is None:
                    post = await view.platform.get_post(post_id)
                    if post is None or not post.text:
                        seen = posts[post_id] = (-1, None)
                    else:
                        seen = posts[post_id] = (len(texts), post.author_id)
                        texts.append(post.text)
                if seen[0] >= 0 and seen[1] != agent:  # its own post is no decision
                    persona_rows.append(row)
                    post_rows.append(seen[0])
                    ys.append(1.0 if (agent, post_id) in liked else 0.0)
            routed += (len(ys) - before) if rule else 0
        if not ys:
            return
        vectors = np.asarray(await self.embedder.embed(texts), dtype=np.float64)
        x = pair_similarities(vectors, np.asarray(post_rows), personas, np.asarray(persona_rows))
        y = np.asarray(ys)
        self.likes += np.array(sums(x, y))
        self.routed += routed
        bins = bin_of(x)
        np.add.at(self.liked_hist, bins[y == 1], 1)
        np.add.at(self.passed_hist, bins[y == 0], 1)

    def values(self) -> dict[str, float]:
        out: dict[str, float] = {}
        n_posts, own, others = self.posts
        out["posts.count"] = float(n_posts)
        if n_posts:
            out.update({"posts.own": own / n_posts, "posts.others": others / n_posts, "posts.margin": (own - others) / n_posts})
        n = self.likes[0]
        out["likes.decisions"] = float(n)
        if n:
            out["likes.rate"] = float(self.likes[2] / n)
            out["likes.by_similarity"] = float(self.routed / n)
        fitted = slope_from_sums(*self.likes)
        if fitted is not None:
            out["likes.slope"] = fitted
        area = histogram_auc(self.liked_hist, self.passed_hist)
        if area is not None:
            out["likes.auc"] = area
        out["comments.count"] = float(self.comments[0])
        if self.comments[0]:
            out["comments.copying"] = float(self.comments[1] / self.comments[0])
        return out

    def get_state(self) -> dict[str, Any]:
        return {"posts": self.posts.tolist(), "likes": self.likes.tolist(), "routed": self.routed,
                "liked_hist": self.liked_hist.tolist(), "passed_hist": self.passed_hist.tolist(), "comments": self.comments.tolist()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.posts = np.asarray(state.get("posts", [0.0] * 3), dtype=np.float64)
        self.likes = np.asarray(state.get("likes", [0.0] * 5), dtype=np.float64)
        self.routed = int(state.get("routed", 0))
        self.liked_hist = np.asarray(state.get("liked_hist", [0] * AUC_BINS), dtype=np.int64)
        self.passed_hist = np.asarray(state.get("passed_hist", [0] * AUC_BINS), dtype=np.int64)
        self.comments = np.asarray(state.get("comments", [0, 0]), dtype=np.int64)  # (comments, copying)


def summary_line(metrics: dict[str, float]) -> str | None:
    """One line on groundedness for the end of a run, from the last round's metric values
    (keys without the ``groundedness.`` prefix); None when nothing was measured."""
    parts = []
    if "posts.margin" in metrics:
        margin = metrics["posts.margin"]
        parts.append(f"posts {margin:+.3f} cosine closer to their author's persona than to others'"
                     f" ({int(metrics['posts.count'])} posts)")
    if "likes.slope" in metrics:
        area = metrics.get("likes.auc")
        share = metrics.get("likes.by_similarity", 0.0)
        by = "" if share == 0 else (" (decided by the similarity rule)" if share == 1 else f" ({share:.0%} decided by the similarity rule)")
        parts.append(f"likes{by}: rate {metrics['likes.slope']:+.2f} per unit of persona-post cosine"
                     + (f", AUC {area:.2f} (0.5 = ignores the persona)" if area is not None else ""))
    if metrics.get("comments.count"):
        parts.append(f"comments: {metrics['comments.copying']:.0%} of {int(metrics['comments.count'])} copy the post they answer")
    if not parts:
        return None
    return "groundedness: " + "; ".join(parts)


def run_summary_line(run_path: Any) -> str | None:
    """:func:`summary_line` for a run directory (reads its ``metrics`` table); None if the run
    has no groundedness values."""
    import sqlite3
    from pathlib import Path

    db = Path(run_path) / "events.sqlite"
    if not db.exists():
        return None
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        try:
            rows = conn.execute(
                "SELECT name, value FROM metrics WHERE name LIKE 'groundedness.%' AND round = "
                "(SELECT MAX(round) FROM metrics WHERE name LIKE 'groundedness.%')").fetchall()
        except sqlite3.Error:
            return None
    return summary_line({name.removeprefix("groundedness."): value for name, value in rows})


@hookimpl
def townsquare_report_run(run_dir):
    """The groundedness line under a finished run's summary (:func:`run_summary_line`)."""
    return run_summary_line(run_dir)


def build_groundedness(config: None, ctx: Any) -> GroundednessMetric:
    services = getattr(ctx, "services", None)
    return GroundednessMetric(getattr(services, "embedder", None))


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("groundedness", build_groundedness, priority=100,
                       description="persona margin of posts, persona slope/AUC of likes and comments that copy their post")]
