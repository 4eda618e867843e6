"""Knowledge source ``hotpotqa``: HotpotQA question-answer pairs in a chromadb collection.

Zhou et al. use HotpotQA (Yang et al., 2018) as the external knowledge source and the
agents' long-term memory (§3.1.1, §3.1.4), retrieved with ColBERT. This source reads a
HotpotQA-format JSON file (a list of ``{"question", "answer", "type"}`` records, as in
``hotpot_dev_v1_simplified.json``), turns each record into one item ``"Q: <question> A:
<answer>"`` and retrieves by cosine similarity with the run's embedder (DESIGN.md §3:
chromadb holds large shared stores) instead of ColBERT. The "Q:"/"A:" markers are single
letters, which the TF-IDF tokenizer of the knowledge boundary ignores.

chromadb is imported only here, when the source is built; without it the run stops with one
line naming the extra to install. Its default embedding function downloads a model, so it is
never used: the collection is created with ``embedding_function=None`` and every add and
query passes vectors from the run's embedder.

The collection is built on the first search (embedding is async; factories are not), in
batches. ``persist = true`` (default) keeps it under ``RUN_DIR/knowledge/`` and a resumed
run reuses it; the collection's metadata holds a fingerprint of the file, ``limit`` and the
embedder, and a mismatch rebuilds it. ``persist = false`` (or no run directory) uses an
in-process client, keyed by the same fingerprint.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import KnowledgeItem, KnowledgeSourceSpec, UsageError, hookimpl, parse_json_list, read_user_text

log = structlog.get_logger("townsquare.plugins.social_agent.knowledge.hotpotqa")

INSTALL_HINT = 'knowledge source "hotpotqa" needs chromadb: pip install -e ".[knowledge]"'


class HotpotQAConfig(BaseModel):
    """``[knowledge]`` settings for ``name = "hotpotqa"``."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(None, description="HotpotQA-format JSON list; relative to the scenario's folder")
    limit: int | None = Field(None, gt=0, description="use only the first N records")
    persist: bool = Field(True, description="keep the collection under RUN_DIR/knowledge/ (false: in memory)")
    batch_size: int = Field(5000, gt=0, description="records embedded and inserted per batch (capped by chromadb's maximum)")
    collection: str = Field("hotpotqa", pattern=r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,60}[a-zA-Z0-9]$")


def item_text(record: dict[str, Any]) -> str:
    return f"Q: {record['question']} A: {record['answer']}"


def read_hotpotqa(path: Path, limit: int | None = None) -> list[dict[str, str]]:
    """The records of a HotpotQA-format file; a problem is one line naming the file."""
    text = read_user_text(path, "HotpotQA file")
    data = parse_json_list(text, path, "{question, answer, type} records")
    records = []
    for i, record in enumerate(data[:limit] if limit else data):
        if not isinstance(record, dict) or not isinstance(record.get("question"), str) or not isinstance(record.get("answer"), str):
            raise UsageError(f'{path}: record {i}: expected {{"question": str, "answer": str, "type": str}}')
        records.append({"question": record["question"], "answer": record["answer"], "type": str(record.get("type", ""))})
    if not records:
        raise UsageError(f"{path}: no records")
    return records


def _import_chromadb() -> Any:
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return chromadb, Settings


class HotpotQAKnowledge:
    """HotpotQA items in a chromadb collection, searched with the run's embedder."""

    def __init__(self, config: HotpotQAConfig, records: list[dict[str, str]], embedder: Any, directory: Path | None,
                 fingerprint: str):
        self.config = config
        self.records = records
        self.texts = [item_text(r) for r in records]
        self.embedder = embedder
        self.directory = directory
        self.fingerprint = fingerprint
        self._collection: Any = None
        self._lock = asyncio.Lock()
        self.build_seconds: float | None = None
        self.reused = False

    def _client(self) -> Any:
        chromadb, Settings = _import_chromadb()
        settings = Settings(anonymized_telemetry=False)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            return chromadb.PersistentClient(path=str(self.directory), settings=settings)
        return chromadb.EphemeralClient(settings=settings)

    async def _ensure(self) -> Any:
        if self._collection is not None:
            return self._collection
        async with self._lock:
            if self._collection is None:
                self._collection = await self._open()
        return self._collection

    async def _open(self) -> Any:
        client = self._client()
        # in memory, the client is shared by the whole process: the fingerprint names the data
        name = self.config.collection if self.directory is not None else f"{self.config.collection}-{self.fingerprint[:16]}"
        existing = {c if isinstance(c, str) else c.name for c in client.list_collections()}
        if name in existing:
            collection = client.get_collection(name, embedding_function=None)
            if (collection.metadata or {}).get("fingerprint") == self.fingerprint and collection.count() == len(self.records):
                self.reused = True
                log.info("knowledge.reused", source="hotpotqa", collection=name, items=len(self.records))
                return collection
            client.delete_collection(name)
        collection = client.create_collection(
            name, embedding_function=None, metadata={"hnsw:space": "cosine", "fingerprint": self.fingerprint})
        started = time.perf_counter()
        raw = getattr(self.embedder, "embedder", self.embedder)  # bypass the run's text cache: these are embedded once
        step = min(self.config.batch_size, client.get_max_batch_size())
        for start in range(0, len(self.texts), step):
            texts = self.texts[start:start + step]
            vectors = np.asarray(await raw.embed(texts), dtype=np.float32)
            # no documents: the texts stay in memory, and chromadb's full-text index of them
            # cost about 40% of the build time on the 7,405-record dev file
            # in a worker thread: HNSW indexing takes seconds, and the other agents' LLM calls
            # should not wait on it
            await asyncio.to_thread(collection.add, ids=[str(i) for i in range(start, start + len(texts))], embeddings=vectors)
        self.build_seconds = time.perf_counter() - started
        log.info("knowledge.built", source="hotpotqa", collection=name, items=len(self.records),
                 seconds=round(self.build_seconds, 3), persistent=self.directory is not None)
        return collection

    async def search(self, query: str, k: int) -> list[KnowledgeItem]:
        """The ``k`` items closest to ``query``, best first; ``score`` is the cosine."""
        if k <= 0:
            return []
        collection = await self._ensure()
        vector = np.asarray(await self.embedder.embed_one(query), dtype=np.float32)
        found = collection.query(query_embeddings=vector[None, :], n_results=min(k, len(self.records)),
                                 include=["distances"])
        items = []
        for key, distance in zip(found["ids"][0], found["distances"][0]):
            record = self.records[int(key)]
            items.append(KnowledgeItem(id=f"hotpotqa-{key}", text=self.texts[int(key)], score=round(1.0 - float(distance), 6),
                                       meta={"question": record["question"], "answer": record["answer"], "type": record["type"]}))
        return items

    def get_state(self) -> dict[str, Any]:
        return {}  # the collection is rebuilt or reopened from the file

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_hotpotqa(config: HotpotQAConfig | None, ctx: Any) -> HotpotQAKnowledge:
    if config is None or not config.path:
        raise UsageError('knowledge: the hotpotqa source needs path = "…" (a HotpotQA-format JSON list)')
    _import_chromadb()  # fail before round 0 when it is missing
    path = Path(config.path)
    if not path.is_absolute():
        path = Path(getattr(ctx, "base_dir", ".") or ".") / path
    records = read_hotpotqa(path, config.limit)
    services = ctx.services
    embedder = services.embedder
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    raw = getattr(embedder, "embedder", embedder)
    fingerprint = hashlib.sha256(json.dumps(
        [digest, config.limit, getattr(embedder, "name", "?"), getattr(embedder, "dim", 0), repr(getattr(raw, "config", None))],
    ).encode()).hexdigest()
    directory = Path(services.run_dir) / "knowledge" if config.persist and services.run_dir else None
    return HotpotQAKnowledge(config, records, embedder, directory, fingerprint)


@hookimpl
def townsquare_register_knowledge_sources():
    return [
        KnowledgeSourceSpec("hotpotqa", build_hotpotqa, config_model=HotpotQAConfig, priority=100,
                            description="HotpotQA question-answer pairs in chromadb, searched with the run's embedder (Zhou §3.1.1)"),
    ]
