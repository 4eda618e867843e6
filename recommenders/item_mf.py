"""Matrix factorisation item recommender for ``recsys``, retrained as the log grows.

RecAgent's information-cocoon study (Wang et al., "Studying the information cocoon
phenomenon") serves five items at a time with matrix factorisation (MF) that "is incrementally
trained after each round of execution" on the agents' interactions. The paper names neither
the loss nor the solver. Three trainings, the setting ``loss``:

- ``"bce"`` (default): binary cross-entropy on sigmoid(x_u . y_i), label 1 for each observed
  pair and 0 for each of its ``negatives`` sampled items (the reference code's loss,
  ``BCEWithLogitsLoss``, which it feeds 1 for the watched item of a page and 0 for the others;
  NCF's sampled training), by stochastic gradient descent: ``epochs`` passes over the positives
  per refit (the reference code's 10), mini-batches of ``batch_size``, learning rate
  ``learning_rate``, L2 ``weight_decay``;
- ``"bpr"``: Bayesian personalised ranking (Rendle et al., "BPR: Bayesian Personalized
  Ranking from Implicit Feedback", 2009): for each observed (user u, item i) and each sampled j,
  maximise ln sigmoid(x_u . y_i - x_u . y_j) - ``weight_decay`` * |params|^2, the same way;
- ``"als"``: implicit-feedback weighted least squares solved exactly by alternating least squares
  (Hu, Koren & Volinsky, 2008): min sum_{u,i} c_ui (p_ui - x_u . y_i)^2 + lambda (|X|^2 + |Y|^2),
  p_ui = 1 for observed pairs, else 0, confidence c_ui = 1 + ``alpha`` * n_ui; every unobserved
  pair is a weak negative, so nothing is sampled.

Negatives (bpr, bce) are drawn for each positive and epoch uniformly from every item the model
knows (every item any ranking has offered it, so the whole catalogue after the first page) that
the user has not watched. With ``impression_negatives`` they are drawn instead from the items
shown to the user on a page or in search results and not watched, while it has any (the
reference code's training data: "unwatched impressions are negatives"); users without such
impressions get uniform negatives.

Observed pairs: the paper trains on "the agent searching behaviors and system recommendations".
We read that as the items agents *watched*, whether they found them on a recommendation page or
in search results (``ItemInteractions.watched``, which also holds a MovieLens user's earlier
ratings when the platform puts them in the log); with ``als``, ``shown_weight`` > 0 also counts
every showing as weak positive evidence and ``impression_weight`` > 0 an unwatched showing as a
weighted negative.

Incremental training: the model is refitted from its current factors (warm start) when the
interaction log's ``version`` changed (the platform bumps it with every recorded event) and at
least ``retrain_every`` rounds have passed since the last refit (1: after every round with
activity, the paper's cadence: the model that serves the next pages has seen every event so
far; the round comes from ``on_round_start``). A new user or item
starts from small random factors drawn from a generator seeded by the run seed and its id, and
a refit's sampling from a generator seeded by the run seed and the log's version, so training
is reproducible and a resumed run trains the same way.

Ranking: score x_u . y_i over the candidates; items shown to the viewer ``max_shown`` times go
to the end (as in ``item_popularity``), and ties (every score is 0 before anyone watched, with
``als``) are broken at random with the viewer's generator.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, RecommenderSpec, hookimpl
from townsquare.lib.items import Item, ItemInteractions, ItemRecommender

from .item_ranking import order_items


class ItemMFConfig(BaseModel):
    """``[plugins.item_mf]`` settings (values are our choices; the paper gives none)."""

    model_config = ConfigDict(extra="forbid")

    loss: Literal["bce", "bpr", "als"] = Field("bce", description="bce (the reference code's) or bpr with sampled negatives (SGD), or als")
    factors: int = Field(16, gt=0, description="latent dimensions")
    retrain_every: int = Field(1, ge=1, description="refit at most every this many rounds (1: after every round with activity)")
    epochs: int = Field(10, ge=1, description="bpr/bce: passes over the observed pairs per refit (the reference code: 10)")
    learning_rate: float = Field(0.1, gt=0, description="bpr/bce: SGD step size")
    weight_decay: float = Field(0.001, ge=0, description="bpr/bce: L2 penalty per update")
    negatives: int = Field(1, ge=1, description="bpr/bce: sampled negatives per observed pair and epoch")
    batch_size: int = Field(256, ge=1, description="bpr/bce: observed pairs per SGD step")
    impression_negatives: bool = Field(False, description="bpr/bce: sample negatives from the user's shown-but-unwatched items")
    regularization: float = Field(0.1, ge=0, description="als: lambda, the L2 penalty on both factor matrices")
    alpha: float = Field(10.0, ge=0, description="als: confidence per interaction, c = 1 + alpha * n")
    sweeps: int = Field(3, ge=1, description="als: sweeps per refit (each sweep solves users, then items)")
    shown_weight: float = Field(0.0, ge=0, description="als: an item shown but not watched counts this fraction of a watch")
    impression_weight: float = Field(0.0, ge=0, description="als: confidence that an item shown but never watched is not wanted")
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
        self.round = 0
        self.trained_round: int | None = None

    def on_round_start(self, round: int, now: Any) -> None:
        self.round = round

    def due(self, interactions: ItemInteractions) -> bool:
        """A refit is due: the log changed and ``retrain_every`` rounds have passed since the last."""
        if self.trained_version == interactions.version:
            return False
        every = self.config.retrain_every
        return every == 1 or self.trained_round is None or self.round - self.trained_round >= every

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
        """Refit from the current factors on the whole log (see the module docstring)."""
        self.trained_round = self.round
        if self.config.loss != "als":
            self.fit_sampled(interactions)
            return
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

    def fit_sampled(self, interactions: ItemInteractions) -> None:
        """``epochs`` passes of mini-batch SGD on BPR or BCE with sampled negatives."""
        cfg = self.config
        pairs = list(dict.fromkeys((u, i) for u, items in interactions.watched.items() for i in items))
        self.X = self._grow(self.users, self.X, [u for u, _ in pairs], "user")
        self.Y = self._grow(self.items, self.Y, [i for _, i in pairs], "item")
        self.trained_version = interactions.version
        if not pairs or len(self.items) < 2:
            return
        users = np.fromiter((self.users[u] for u, _ in pairs), dtype=np.int64, count=len(pairs))
        items = np.fromiter((self.items[i] for _, i in pairs), dtype=np.int64, count=len(pairs))
        sampler = NegativeSampler(self, interactions, users, items)
        rng = np.random.default_rng([self.seed, 7, interactions.version])
        users, items = np.repeat(users, cfg.negatives), np.repeat(items, cfg.negatives)
        for _ in range(cfg.epochs):
            order = rng.permutation(len(users))
            for start in range(0, len(order), cfg.batch_size):
                batch = order[start:start + cfg.batch_size]
                u, i = users[batch], items[batch]
                j = sampler.draw(u, rng)
                if cfg.loss == "bpr":
                    self._bpr_step(u, i, j)
                else:
                    self._bce_step(np.concatenate([u, u]), np.concatenate([i, j]),
                                   np.concatenate([np.ones(len(i)), np.zeros(len(j))]))

    def _bpr_step(self, u: np.ndarray, i: np.ndarray, j: np.ndarray) -> None:
        lr, wd = self.config.learning_rate, self.config.weight_decay
        xu, yi, yj = self.X[u], self.Y[i], self.Y[j]
        g = 1.0 / (1.0 + np.exp(np.clip(np.einsum("nk,nk->n", xu, yi - yj), -30, 30)))  # d/dx ln sigmoid(x)
        np.add.at(self.X, u, lr * (g[:, None] * (yi - yj) - wd * xu))
        np.add.at(self.Y, i, lr * (g[:, None] * xu - wd * yi))
        np.add.at(self.Y, j, lr * (-g[:, None] * xu - wd * yj))

    def _bce_step(self, u: np.ndarray, i: np.ndarray, label: np.ndarray) -> None:
        lr, wd = self.config.learning_rate, self.config.weight_decay
        xu, yi = self.X[u], self.Y[i]
        g = label - 1.0 / (1.0 + np.exp(-np.clip(np.einsum("nk,nk->n", xu, yi), -30, 30)))  # d/dz of the log-likelihood
        np.add.at(self.X, u, lr * (g[:, None] * yi - wd * xu))
        np.add.at(self.Y, i, lr * (g[:, None] * xu - wd * yi))

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
        if self.config.loss != "als":  # every item offered is known, so negatives come from the whole catalogue
            self.Y = self._grow(self.items, self.Y, [item.id for item in candidates], "item")
        if self.trained_version == -1 or self.due(interactions):
            self.fit(interactions)
        score = np.round(self.scores(viewer, [item.id for item in candidates]), 9)  # equal scores tie exactly
        return order_items(viewer, candidates, score, limit, rng, interactions, self.config.max_shown)

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {"users": list(self.users), "items": list(self.items), "X": self.X.tolist(), "Y": self.Y.tolist(),
                "trained_version": self.trained_version, "round": self.round, "trained_round": self.trained_round}

    def set_state(self, state: dict[str, Any]) -> None:
        k = self.config.factors
        self.users = {u: n for n, u in enumerate(state.get("users", []))}
        self.items = {i: n for n, i in enumerate(state.get("items", []))}
        self.X = np.asarray(state.get("X") or np.zeros((0, k)), dtype=np.float64).reshape(-1, k)
        self.Y = np.asarray(state.get("Y") or np.zeros((0, k)), dtype=np.float64).reshape(-1, k)
        self.trained_version = int(state.get("trained_version", -1))
        self.round = int(state.get("round", 0))
        self.trained_round = state.get("trained_round")


class NegativeSampler:
    """Negatives for the users of a refit: uniform over the known items a user has not watched,
    or (``impression_negatives``) over the items shown to it and not watched, while it has any."""

    def __init__(self, mf: ItemMF, interactions: ItemInteractions, users: np.ndarray, items: np.ndarray):
        self.n_items = len(mf.items)
        self.positives: dict[int, set[int]] = {}
        for u, i in zip(users.tolist(), items.tolist()):
            self.positives.setdefault(u, set()).add(i)
        self.impressions: dict[int, np.ndarray] = {}
        if mf.config.impression_negatives:
            for user, shown in interactions.shown.items():
                u = mf.users.get(user)
                if u is None:
                    continue
                unwatched = [mf.items[i] for i in shown if i in mf.items and mf.items[i] not in self.positives.get(u, ())]
                if unwatched:
                    self.impressions[u] = np.array(sorted(unwatched), dtype=np.int64)

    def draw(self, users: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = rng.integers(0, self.n_items, len(users))
        for n, u in enumerate(users.tolist()):
            pool = self.impressions.get(u)
            if pool is not None:
                out[n] = pool[rng.integers(len(pool))]
                continue
            liked = self.positives.get(u, ())
            for _ in range(10):  # rejection: a watched item is no negative (a user who watched nearly all keeps the last draw)
                if int(out[n]) not in liked:
                    break
                out[n] = rng.integers(self.n_items)
        return out


def build_item_mf(config: ItemMFConfig | None, ctx: BuildContext) -> ItemMF:
    return ItemMF(config, ctx.seed)


@hookimpl
def townsquare_register_recommenders():
    return [RecommenderSpec("item_mf", build_item_mf, config_model=ItemMFConfig, protocol=ItemRecommender, priority=-10,
                            description="recsys items: implicit-feedback matrix factorisation (BPR, BCE or ALS), retrained each round")]
