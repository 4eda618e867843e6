"""Park et al.'s memory stream (§4.1): slot ``memory.stream``, component ``memory_stream``.

The stream is the agent's complete record of experience: observations, the agent's own
actions, reflections (§4.2) and plans (§4.3), each a :class:`~townsquare.api.MemoryRecord` with
a text, a creation time, a last-access time and an importance.

- **Importance** (§4.1): the language model rates each new record from 1 (mundane) to 10
  (poignant); the answer is one of the labels ``"1"``..``"10"`` (``LLMClient.choose``: one
  repair request, then ``default_importance``). Ratings are cached per text, so a text seen
  again costs no call. A record that arrives with an importance (> 0) keeps it. Without an LLM
  (the engine's after-action context has none) the record gets ``default_importance``: the
  paper gives no value for that case; 3 is a mundane-to-ordinary rating. An object seen idle
  ("the piano is idle") gets ``idle_importance`` (1) without a call, as the reference code's
  ``generate_poig_score`` gives every "is idle" event (the paper does not say).
- **Embeddings**: the run's embedder (``ctx.embedder``, shared and cached), computed once per
  record at ``remember`` time.
- **Storage**: per agent, numpy arrays (float32 vectors, importance, created and last-access
  times in hours) that grow by half their size when full, so ``remember`` is amortised O(1)
  and the spare rows stay under a third of the array; records keep no
  embedding of their own (the vectors live in the array).
- **Recall**: cosine relevance of every record to the query (one matrix-vector product), scored
  by the ``memory.retrieval`` slot (:mod:`.park_retrieval`) or by relevance alone when it is
  empty; the top ``k`` get their last access set to ``ctx.now``. Records that say the same
  thing word for word (a routine seen again, a thought repeated) fill one place among the
  ``k``, not many: of equal texts only the best-scoring one is recalled (``distinct_recall``;
  the paper does not say, and the reference code's ``perceive`` likewise skips an event that is
  already among the latest ones). A burst of identical records so cannot crowd a rarer one
  out of a prompt.
- **Seed memories** (§3.1): the persona's description split at semicolons, each part one
  memory, stored the first time the stream is used. Our personas are lists of sentences plus
  fields, so each sentence and each ``field: value`` line is split at semicolons.

``get_state()["records"]`` is the list of ``MemoryRecord.to_dict()`` (``townsquare export``
reads it); the vectors travel as one float32 array beside it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import replace
from datetime import datetime
from typing import Any, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import MemoryRecord, MemorySpec, hookimpl, retrieval_of

from ..prompt_files import fill, load_prompts, prompts_for
from .memory_text import cut
from .sim_hours import hours

log = structlog.get_logger("townsquare.plugins.generative_agents.memory_stream")

#: the importance scale (Park §4.1: 1 to 10)
IMPORTANCE_LABELS: tuple[str, ...] = tuple(str(i) for i in range(1, 11))
REQUIRED = {"importance": frozenset({"name", "kind", "memory"})}
#: what marks an idle object in a memory's text (the town's perception: "the piano is idle (...)")
IDLE = "is idle"


class MemoryStreamConfig(BaseModel):
    """``[plugins.memory_stream]`` settings."""

    model_config = ConfigDict(extra="forbid")

    default_importance: float = Field(3.0, ge=1, le=10, description="importance without an LLM or a usable answer")
    idle_importance: float | None = Field(1.0, ge=1, le=10, description="importance of an 'is idle' memory, no call "
                                          "(the reference code's 1); None: rated like any other")
    seed_memories: bool = Field(True, description="the persona split at semicolons as first memories (Park §3.1)")
    memory_chars: int = Field(600, gt=0, description="longest memory text shown in the importance prompt")
    importance_cache: int = Field(4096, ge=0, description="texts whose rating is kept (per agent)")
    initial_capacity: int = Field(64, gt=0, description="rows allocated at first; the arrays grow by half when full")
    distinct_recall: bool = Field(True, description="of records with the same text, recall only the best-scoring one "
                                  "(our choice; the paper does not say); False: every copy competes for the top k")
    prompts_file: str | None = None


def seed_statements(persona: Any) -> list[str]:
    """Park §3.1: the description's semicolon-separated parts, each one memory. The description is
    the persona's sentences, then each text field (``key: value``) that no sentence already holds
    (a Smallville persona keeps ``currently`` both as a sentence and as a field: one memory, not
    two); numbers (``age``, ``recency_decay``) are parameters, not memories."""
    extra = [f"{k}: {v}" for k, v in persona.fields.items()
             if isinstance(v, str) and v.strip() and not any(v in str(s) for s in persona.sentences)]
    lines = [*persona.sentences, *extra]
    return [part.strip() for line in lines for part in str(line).split(";") if part.strip()]


class StreamView(Sequence[MemoryRecord]):
    """The stream's records as the retrieval scorer sees them, with their columns as arrays
    (a scorer may use ``importance`` and ``last_access_hours`` instead of reading records one by
    one: at 10,000 records that is the difference between microseconds and milliseconds)."""

    def __init__(self, records: list[MemoryRecord], importance: np.ndarray, last_access_hours: np.ndarray):
        self._records = records
        self.importance = importance
        self.last_access_hours = last_access_hours

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, i):  # type: ignore[override]
        return self._records[i]


class MemoryStream:
    """One agent's stream (see the module docstring)."""

    def __init__(self, config: MemoryStreamConfig | None = None, prompts: dict[str, str] | None = None):
        self.config = config or MemoryStreamConfig()
        self.prompts = prompts or load_prompts("memory", REQUIRED)
        self.records: list[MemoryRecord] = []
        self.seeded = False
        self._n = 0
        self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._importance = np.zeros(0, dtype=np.float32)
        self._created = np.zeros(0, dtype=np.float64)
        self._access = np.zeros(0, dtype=np.float64)
        self._rated: OrderedDict[str, float] = OrderedDict()
        self.llm_ratings = 0

    # ------------------------------------------------------------------ storage

    def __len__(self) -> int:
        return self._n

    def _reserve(self, rows: int, dim: int) -> None:
        if self._vectors.shape[1] != dim:
            if self._n:
                raise ValueError(f"memory_stream: embedding size changed from {self._vectors.shape[1]} to {dim}")
            self._vectors = np.zeros((0, dim), dtype=np.float32)
        need = self._n + rows
        capacity = self._vectors.shape[0]
        if need <= capacity:
            return
        new = max(need, capacity + capacity // 2, self.config.initial_capacity)
        vectors = np.zeros((new, dim), dtype=np.float32)
        vectors[: self._n] = self._vectors[: self._n]
        self._vectors = vectors
        for name in ("_importance", "_created", "_access"):
            old = getattr(self, name)
            grown = np.zeros(new, dtype=old.dtype)
            grown[: self._n] = old[: self._n]
            setattr(self, name, grown)

    def append(self, record: MemoryRecord, vector: np.ndarray) -> MemoryRecord:
        """Store one record whose id, times and importance are set (no LLM, no embedding)."""
        self._reserve(1, vector.shape[-1])
        i = self._n
        self._vectors[i] = vector
        self._importance[i] = record.importance
        self._created[i] = hours(record.created)
        self._access[i] = hours(record.last_access or record.created)
        record.embedding = None
        self.records.append(record)
        self._n += 1
        return record

    # ------------------------------------------------------------------ importance

    async def rate(self, ctx: Any, record: MemoryRecord) -> float:
        """Park §4.1's importance, 1..10, cached per text."""
        if self.config.idle_importance is not None and IDLE in record.text:
            return self.config.idle_importance
        cached = self._rated.get(record.text)
        if cached is not None:
            self._rated.move_to_end(record.text)
            return cached
        llm = getattr(ctx, "llm", None)
        if llm is None:
            return self.config.default_importance
        prompt = fill(self.prompts["importance"], name=ctx.agent.persona.name, kind=record.kind,
                      memory=cut(record.text, self.config.memory_chars))
        answer = await llm.choose(prompt, IMPORTANCE_LABELS, purpose="importance",
                                  default=str(int(round(self.config.default_importance))))
        self.llm_ratings += 1
        score = float(answer)
        if self.config.importance_cache:
            self._rated[record.text] = score
            while len(self._rated) > self.config.importance_cache:
                self._rated.popitem(last=False)
        return score

    # ------------------------------------------------------------------ the Memory protocol

    async def _seed(self, ctx: Any) -> None:
        if self.seeded:
            return
        self.seeded = True
        if self.config.seed_memories:
            seeds = [MemoryRecord(text, kind="observation", meta={"seed": True}) for text in seed_statements(ctx.agent.persona)]
            await self._store(ctx, seeds)

    async def _store(self, ctx: Any, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        # the stream keeps its own copies: a tier before it may hold the same objects
        records = [replace(r) for r in records if r.text.strip()]
        if not records:
            return []
        if len(records) == 1:  # the common case, without a batch's bookkeeping
            vectors = [await ctx.embedder.embed_one(records[0].text)]
        else:
            vectors = await ctx.embedder.embed([r.text for r in records])
        unrated = {r.text: r for r in records if r.importance <= 0}
        if unrated:
            # distinct texts are rated concurrently; equal texts share one rating
            ratings = await asyncio.gather(*(self.rate(ctx, r) for r in unrated.values()))
            by_text = dict(zip(unrated, ratings))
        for record, vector in zip(records, vectors):
            record.id = record.id or f"m{self._n}"
            record.created = record.created or ctx.now
            record.last_access = record.last_access or record.created
            if record.importance <= 0:
                record.importance = by_text[record.text]
            self.append(record, vector)
        return records

    async def remember(self, ctx: Any, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """Store every record (the stream keeps everything); the stream is the last tier, so
        nothing is passed on."""
        await self._seed(ctx)
        await self._store(ctx, records)
        return []

    def view(self) -> StreamView:
        n = self._n
        return StreamView(self.records, self._importance[:n], self._access[:n])

    async def recall(self, ctx: Any, query: str, k: int) -> list[MemoryRecord]:
        """The top ``k`` records for ``query`` at ``ctx.now``, best first; their last access
        becomes ``ctx.now`` (Park §4.1)."""
        await self._seed(ctx)
        if k <= 0 or not self._n:
            return []
        query_vector = await ctx.embedder.embed_one(query)
        return self.top(ctx.agent, query_vector, k, ctx.now)

    def top(self, agent: Any, query_vector: np.ndarray, k: int, now: datetime) -> list[MemoryRecord]:
        """Score, pick and touch the top ``k`` (no LLM, no embedding: what the benchmark times)."""
        n = self._n
        if k <= 0 or not n:
            return []
        relevance = self._vectors[:n] @ np.asarray(query_vector, dtype=np.float32)
        scorer = retrieval_of(agent) if agent is not None else None
        scores = relevance if scorer is None else np.asarray(scorer.score(self.view(), relevance, now), dtype=np.float64)
        picked = self._best(scores, min(k, n))
        self._access[picked] = hours(now)
        found = []
        for i in picked:
            record = self.records[int(i)]
            record.last_access = now
            found.append(record)
        return found

    def _best(self, scores: np.ndarray, k: int) -> np.ndarray:
        """Indices of the ``k`` best scores, best first (ties go to the older record, so the order
        is reproducible); with ``distinct_recall``, one index per text. A window of candidates
        four times ``k`` is sorted, widened only when its texts repeat too much to fill ``k``."""
        n = len(scores)
        window = k if not self.config.distinct_recall else min(n, 4 * k)
        while True:
            ranked = np.argpartition(-scores, window - 1)[:window] if window < n else np.arange(n)
            ranked = ranked[np.lexsort((ranked, -scores[ranked]))]
            if not self.config.distinct_recall:
                return ranked[:k]
            chosen, texts = [], set()
            for i in ranked:
                text = self.records[int(i)].text
                if text not in texts:
                    texts.add(text)
                    chosen.append(i)
                    if len(chosen) == k:
                        break
            if len(chosen) == k or window == n:
                return np.asarray(chosen, dtype=np.int64)
            window = min(n, 4 * window)

    def since(self, when: datetime | None) -> list[MemoryRecord]:
        """Records created after ``when`` (all when None), oldest first."""
        n = self._n
        if when is None:
            index = np.arange(n)
        else:
            index = np.flatnonzero(self._created[:n] > hours(when))
        index = index[np.argsort(self._created[index], kind="stable")]
        return [self.records[int(i)] for i in index]

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {
            "records": [r.to_dict() for r in self.records],
            "vectors": np.array(self._vectors[: self._n], dtype=np.float32),
            "seeded": self.seeded,
            "llm_ratings": self.llm_ratings,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        records = [MemoryRecord.from_dict(d) for d in state.get("records", [])]
        vectors = np.asarray(state.get("vectors", np.zeros((0, 0))), dtype=np.float32)
        if len(records) != len(vectors) and records:
            raise ValueError(f"memory_stream: {len(records)} records but {len(vectors)} vectors in the state")
        self.records, self._n = [], 0
        self._vectors = np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 0), dtype=np.float32)
        self._importance = np.zeros(0, dtype=np.float32)
        self._created = np.zeros(0, dtype=np.float64)
        self._access = np.zeros(0, dtype=np.float64)
        for record, vector in zip(records, vectors):
            self.append(record, vector)
        self.seeded = bool(state.get("seeded", bool(records)))
        self.llm_ratings = int(state.get("llm_ratings", 0))
        self._rated = OrderedDict((r.text, r.importance) for r in records[-self.config.importance_cache:] if self.config.importance_cache)


def build_memory_stream(config: MemoryStreamConfig | None, ctx: Any) -> MemoryStream:
    config = config or MemoryStreamConfig()
    return MemoryStream(config, prompts_for("memory", REQUIRED, config, ctx))


@hookimpl
def townsquare_register_memory():
    return [
        MemorySpec(
            "memory_stream", build_memory_stream, config_model=MemoryStreamConfig, memory_kind="stream", priority=100,
            needs_llm=True,
            description="Park et al. §4.1: every observation, action, reflection and plan; LLM importance 1-10; numpy vectors",
        )
    ]
