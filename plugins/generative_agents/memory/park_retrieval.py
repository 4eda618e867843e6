"""Park et al.'s retrieval score (§4.1): slot ``memory.retrieval``, component ``park_retrieval``.

    score = w_rec * recency + w_imp * importance + w_rel * relevance

- recency = ``recency_decay ** h``, ``h`` the simulated hours since the record was last
  accessed (the paper: an exponential decay over sandbox game hours since last retrieval,
  factor 0.995);
- importance = the record's 1-10 rating (:mod:`.memory_stream`);
- relevance = cosine of the record's embedding to the query's (given by the memory);
- each of the three is min-max normalised to [0, 1] over the candidates; a component that is
  equal for every candidate becomes 0.5 for all (the paper does not say; this is what the
  reference code's ``normalize_dict_floats`` does);
- all weights are 1 (the paper: "all alphas are set to 1").

``mode = "reference_code"`` reproduces joonspk-research/generative_agents' ``new_retrieve``
instead, which differs from the paper (STYLE.md item 11): weights recency 0.5, relevance 3,
importance 2 (``gw = [0.5, 3, 2]`` in the order recency, relevance, importance), and recency
``0.99 ** rank`` by list position rather than by elapsed time. The code ranks the candidates
sorted by last access *oldest first* (rank 1 = the least recently accessed, which so gets the
largest recency term); this mode does the same, to match the code as written. The reference
code reads the decay from each persona's seed (``recency_decay`` in ``scratch.json``: 0.995 for
every agent of the 25-agent base, 0.99 for Isabella in the 3-agent one), so this mode takes the
agent's ``recency_decay`` persona field when it has one, else 0.99. Explicit ``recency_decay`` /
``*_weight`` settings override either mode's values.

Relevance is the cosine of the run's embeddings (``[embedder]``): the default ``hash`` embedder
is lexical (shared words), while the paper and the reference code embed with a language model
(OpenAI's). :data:`RECALL_PRESETS` names the two set-ups a study compares, as scenario overrides:
``ours`` (the defaults: the offline hash embedder, the paper's weights) and ``reference_code``
(all-MiniLM-L6-v2 sentence embeddings, ``[embedder] name = "minilm"``, and this mode: relevance
weighted 3, importance 2, recency 0.5)::

    townsquare run examples/valentines.toml --set 'embedder={ name = "minilm" }' \
        --set plugins.park_retrieval.mode=reference_code
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import MemoryRecord, MemorySpec, hookimpl

from .sim_hours import hours

#: named recall set-ups (scenario overrides, as ``--set`` takes them): see the module docstring
RECALL_PRESETS: dict[str, tuple[str, ...]] = {
    "ours": (),
    "reference_code": ('embedder={ name = "minilm" }', "plugins.park_retrieval.mode=reference_code"),
}

#: mode -> (recency_decay, w_rec, w_imp, w_rel)
MODES: dict[str, tuple[float, float, float, float]] = {
    "paper": (0.995, 1.0, 1.0, 1.0),
    "reference_code": (0.99, 0.5, 2.0, 3.0),
}


class ParkRetrievalConfig(BaseModel):
    """``[plugins.park_retrieval]`` settings (None: the mode's value)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["paper", "reference_code"] = "paper"
    recency_decay: float | None = Field(None, gt=0, le=1)
    recency_weight: float | None = Field(None, ge=0)
    importance_weight: float | None = Field(None, ge=0)
    relevance_weight: float | None = Field(None, ge=0)


def min_max(values: np.ndarray) -> np.ndarray:
    """Scaled to [0, 1]; all 0.5 when every value is the same."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values
    low, high = values.min(), values.max()
    if high - low <= 1e-12:
        return np.full(values.shape, 0.5)
    return (values - low) / (high - low)


class ParkRetrieval:
    """A :class:`~townsquare.api.MemoryRetrieval` scorer; stateless apart from its settings."""

    def __init__(self, config: ParkRetrievalConfig | None = None, persona_decay: float | None = None):
        self.config = config or ParkRetrievalConfig()
        decay, w_rec, w_imp, w_rel = MODES[self.config.mode]
        cfg = self.config
        if cfg.mode == "reference_code" and persona_decay is not None and 0 < persona_decay <= 1:
            decay = persona_decay
        self.decay = decay if cfg.recency_decay is None else cfg.recency_decay
        self.weights = (
            w_rec if cfg.recency_weight is None else cfg.recency_weight,
            w_imp if cfg.importance_weight is None else cfg.importance_weight,
            w_rel if cfg.relevance_weight is None else cfg.relevance_weight,
        )

    def recency(self, last_access_hours: np.ndarray, now: datetime) -> np.ndarray:
        if self.config.mode == "reference_code":
            # rank by last access, oldest first, as the reference code sorts its nodes
            order = np.argsort(last_access_hours, kind="stable")
            recency = np.empty(len(order))
            recency[order] = self.decay ** np.arange(1, len(order) + 1)
            return recency
        elapsed = np.maximum(hours(now) - last_access_hours, 0.0)
        return self.decay ** elapsed

    def components(self, records: Sequence[MemoryRecord], relevance: np.ndarray, now: datetime) -> dict[str, np.ndarray]:
        """The three normalised components (for reports and tests)."""
        importance = getattr(records, "importance", None)
        if importance is None:
            importance = np.array([r.importance for r in records], dtype=np.float64)
        access = getattr(records, "last_access_hours", None)
        if access is None:
            access = np.array([hours(r.last_access or r.created or now) for r in records], dtype=np.float64)
        return {
            "recency": min_max(self.recency(np.asarray(access, dtype=np.float64), now)),
            "importance": min_max(importance),
            "relevance": min_max(relevance),
        }

    def score(self, records: Sequence[MemoryRecord], relevance: np.ndarray, now: datetime) -> np.ndarray:
        parts = self.components(records, relevance, now)
        w_rec, w_imp, w_rel = self.weights
        return w_rec * parts["recency"] + w_imp * parts["importance"] + w_rel * parts["relevance"]

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_park_retrieval(config: ParkRetrievalConfig | None, ctx: Any) -> ParkRetrieval:
    agent = getattr(ctx, "agent", None)
    decay = agent.persona.fields.get("recency_decay") if agent is not None else None
    return ParkRetrieval(config, decay if isinstance(decay, (int, float)) and not isinstance(decay, bool) else None)


@hookimpl
def townsquare_register_memory():
    return [
        MemorySpec(
            "park_retrieval", build_park_retrieval, config_model=ParkRetrievalConfig, memory_kind="retrieval", priority=100,
            description="Park et al. §4.1: recency (0.995 per hour) + importance + relevance, each min-max normalised",
        )
    ]
