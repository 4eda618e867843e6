"""Matrix factorisation item recommender for ``recsys``, retrained after every round.

RecAgent's information-cocoon study (Wang et al., "Studying the information cocoon
phenomenon") serves five items at a time with matrix factorisation (MF) that "is incrementally
trained after each round of execution" on the agents' interactions. The paper names neither
the loss nor the solver; we use implicit-feedback weighted least squares solved by alternating
least squares (Hu, Koren & Volinsky, "Collaborative Filtering for Implicit Feedback Datasets",
2008), in numpy:

    min_{X,Y}  sum_{u,i} c_ui (p_ui - x_u . y_i)^2 + lambda (sum_u |x_u|^2 + sum_i |y_i|^2)

with p_ui = 1 when user u interacted with item i, else 0, and confidence
c_ui = 1 + alpha * n_ui, where n_ui = watches + ``shown_weight`` * showings. Each half-step is
exact: x_u = (Y'Y + Y_u' (C_u - I) Y_u + lambda I)^-1 Y_u' c_u over the items u interacted with
(and the same for items over users), so an item nobody touched solves to the zero vector.

Interactions: the paper trains on "the agent searching behaviors and system recommendations".
We read that as the items agents *watched*, whether they found them on a recommendation page or
in search results (``ItemInteractions.watched``); ``shown_weight`` > 0 also counts every
showing as weak evidence (0 by default: counting unwatched recommendations as positives keeps
serving the same page and the model learns its own output).

Incremental training: the model is refitted when the interaction log's ``version`` changed,
which the platform bumps with every recorded event, so after every round with activity; the
refit starts from the current factors (warm start) and runs ``sweeps`` ALS sweeps. A new user
or item starts from small random factors drawn from a generator seeded by the run seed and its
id, so training is reproducible and a resumed run trains the same way.

Ranking: score x_u . y_i over the candidates; items shown to the viewer ``max_shown`` times go
to the end (as in ``item_popularity``), and ties (every score is 0 before anyone watched) are
broken at random with the viewer's generator, so an untrained model serves random pages.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, RecommenderSpec, hookimpl
from townsquare.lib.items import Item, ItemInteractions, ItemRecommender

from .item_ranking import order_items


class ItemMFConfig(BaseModel):
    """``[plugins.item_mf]`` settings (values are our choices; the paper gives none)."""

    model_config = ConfigDict(extra="forbid")

    factors: int = Field(16, gt=0, description="latent dimensions")
    regularization: float = Field(0.1, ge=0, description="lambda, the L2 penalty on both factor matrices")
    alpha: float = Field(10.0, ge=0, description="confidence per interaction: c = 1 + alpha * n")
    sweeps: int = Field(3, ge=1, description="ALS sweeps per refit (each sweep solves users, then items)")
    shown_weight: float = Field(0.0, ge=0, description="an item shown but not watched counts this fraction of a watch")
    impression_weight: float = Field(0.0, ge=0, description="confidence that an item shown but never watched is not wanted")
    max_shown: int = Field(3, ge=1, description="after this many showings an item goes to the end for that viewer")
    init_scale: float = Field(0.1, gt=0, description="standard deviation of new factors")


class ItemMF:
    """Implicit-feedback MF by alternating least squares; see the module docstring."""

    def __init__(self, config: ItemMFConfig | None = None, seed: int = 0):
        self.config = config or ItemMFConfig()
        self.seed = seed
        self.users: dict[str, int] = {}
        self.items: dict[str, int] = {}
        k = self.config.factors
        self.X = np.zeros((0, k))
        self.Y = np.zeros((0, k))
        self.trained_version = -1

    # ------------------------------------------------------------------ training

    def _init_rows(self, ids: Sequence[str], kind: str) -> np.ndarray:
        k, scale = self.config.factors, self.config.init_scale
        return np.stack([np.random.default_rng([self.seed, zlib.crc32(f"{kind}:{i}".encode())]).normal(0, scale, k)
                         for i in ids]) if ids else np.zeros((0, k))

    def _grow(self, index: dict[str, int], matrix: np.ndarray, ids: Sequence[str], kind: str) -> np.ndarray:
        new = [i for i in dict.fromkeys(ids) if i not in index]
        for i in new:
            index[i] = len(index)
        return np.vstack([matrix, self._init_rows(new, kind)]) if new else matrix

    def counts(self, interactions: ItemInteractions) -> dict[tuple[str, str], tuple[float, float]]:
        """(p_ui, n_ui) per (user, item) with evidence: watches plus ``shown_weight`` times
        showings count for p = 1; an item shown but never watched, with ``impression_weight``,
        counts its showings for p = 0."""
        cfg = self.config
        n: dict[tuple[str, str], float] = {}
        for user, watched in interactions.watched.items():
            for item in watched:
                n[user, item] = n.get((user, item), 0.0) + 1.0
        out = {key: (1.0, value) for key, value in n.items()}
        if cfg.shown_weight > 0 or cfg.impression_weight > 0:
            for user, shown in interactions.shown.items():
                for item, times in shown.items():
                    if (user, item) in n:
                        out[user, item] = (1.0, n[user, item] + cfg.shown_weight * times)
                    elif cfg.shown_weight > 0:
                        out[user, item] = (1.0, cfg.shown_weight * times)
                    else:
                        out[user, item] = (0.0, cfg.impression_weight * times)
        return out

    def fit(self, interactions: ItemInteractions) -> None:
        """Refit from the current factors on the whole log (``sweeps`` ALS sweeps)."""
        n = self.counts(interactions)
        self.X = self._grow(self.users, self.X, [u for u, _ in n], "user")
        self.Y = self._grow(self.items, self.Y, [i for _, i in n], "item")
        self.trained_version = interactions.version
        if not n:
            return
        rows = np.fromiter((self.users[u] for u, _ in n), dtype=np.int64, count=len(n))
        cols = np.fromiter((self.items[i] for _, i in n), dtype=np.int64, count=len(n))
        pref = np.fromiter((p for p, _ in n.values()), dtype=np.float64, count=len(n))
        conf = 1.0 + self.config.alpha * np.fromiter((c for _, c in n.values()), dtype=np.float64, count=len(n))
        for _ in range(self.config.sweeps):
            self.X = self._half_step(self.Y, rows, cols, pref, conf, len(self.users))
            self.Y = self._half_step(self.X, cols, rows, pref, conf, len(self.items))

    def _half_step(self, fixed: np.ndarray, rows: np.ndarray, cols: np.ndarray, pref: np.ndarray, conf: np.ndarray,
                   size: int) -> np.ndarray:
        """Solve every row's factors with ``fixed`` held: rows without interactions solve to 0."""
        k = fixed.shape[1]
        gram = fixed.T @ fixed + self.config.regularization * np.eye(k)
        out = np.zeros((size, k))
        order = np.argsort(rows, kind="stable")
        rows, cols, pref, conf = rows[order], cols[order], pref[order], conf[order]
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        ends = np.r_[starts[1:], len(rows)]
        for start, end in zip(starts, ends):
            f, c = fixed[cols[start:end]], conf[start:end]
            a = gram + (f.T * (c - 1.0)) @ f
            out[rows[start]] = np.linalg.solve(a, f.T @ (c * pref[start:end]))
        return out

    # ------------------------------------------------------------------ ranking

    def scores(self, viewer: str, item_ids: Sequence[str]) -> np.ndarray:
        """x_u . y_i for each id (0 for an unknown user or item)."""
        u = self.users.get(viewer)
        if u is None:
            return np.zeros(len(item_ids))
        idx = np.fromiter((self.items.get(i, -1) for i in item_ids), dtype=np.int64, count=len(item_ids))
        known = idx >= 0
        out = np.zeros(len(item_ids))
        out[known] = self.Y[idx[known]] @ self.X[u]
        return out

    def rank_items(self, viewer: str, candidates: Sequence[Item], limit: int, rng: Any,
                   interactions: ItemInteractions) -> list[Item]:
        if limit <= 0 or not candidates:
            return []
        if self.trained_version != interactions.version:
            self.fit(interactions)
        score = np.round(self.scores(viewer, [item.id for item in candidates]), 9)  # equal scores tie exactly
        return order_items(viewer, candidates, score, limit, rng, interactions, self.config.max_shown)

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {"users": list(self.users), "items": list(self.items), "X": self.X.tolist(), "Y": self.Y.tolist(),
                "trained_version": self.trained_version}

    def set_state(self, state: dict[str, Any]) -> None:
        k = self.config.factors
        self.users = {u: n for n, u in enumerate(state.get("users", []))}
        self.items = {i: n for n, i in enumerate(state.get("items", []))}
        self.X = np.asarray(state.get("X") or np.zeros((0, k)), dtype=np.float64).reshape(-1, k)
        self.Y = np.asarray(state.get("Y") or np.zeros((0, k)), dtype=np.float64).reshape(-1, k)
        self.trained_version = int(state.get("trained_version", -1))


def build_item_mf(config: ItemMFConfig | None, ctx: BuildContext) -> ItemMF:
    return ItemMF(config, ctx.seed)


@hookimpl
def townsquare_register_recommenders():
    return [RecommenderSpec("item_mf", build_item_mf, config_model=ItemMFConfig, protocol=ItemRecommender, priority=-10,
                            description="recsys items: implicit-feedback matrix factorisation (ALS), retrained each round")]
