"""Knowledge source ``hotpotqa``: HotpotQA knowledge in a chromadb collection.

Zhou et al. use HotpotQA (Yang et al., 2018) as the external knowledge source and the
agents' long-term memory (§3.1.1, §3.1.4), retrieved with ColBERT. Their knowledge items are
the Wikipedia paragraphs of HotpotQA's contexts, shown as "Title: ... Text: ..." (appendix H,
table 17). This source reads a HotpotQA JSON list in either shape:

* the official (distractor / fullwiki) format, records with ``"context": [[title,
  [sentence, ...]], ...]``: every context paragraph is one item ``"Title: <title> Text:
  <sentences joined>"`` (a paragraph shared by several questions is one item), as the paper;
* the simplified format, ``{"question", "answer", "type"}`` records (as in
  ``hotpot_dev_v1_simplified.json``, which has no paragraphs): each record is one item
  ``"Q: <question> A: <answer>"``. The "Q:"/"A:" markers are single letters, which the TF-IDF
  tokenizer of the knowledge boundary ignores.

``items = "auto"`` (default) takes paragraphs when every record has a context, else the
question-answer pairs; ``"paragraphs"`` or ``"qa"`` force one. Items are retrieved by cosine
similarity with the run's embedder (DESIGN.md §3: chromadb holds large shared stores)
instead of ColBERT. The search is exact, over the vectors the collection holds, with ties
broken by the item's place in the file: chromadb's own HNSW search is approximate and its
graph differs between builds (measured: the same 43-record file built 8 times gave 8
different top-5 lists for 30 queries, and ties of equal cosine came back in any order), so a
rebuilt index (a replay, a resume with ``persist = false``) would retrieve other knowledge
than the run recorded. Exact top-k costs one matrix-vector product per search.

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
from typing import Any, ClassVar, Literal

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import KnowledgeItem, KnowledgeSourceSpec, UsageError, hookimpl
from townsquare.lib.files import parse_json_list, read_user_text

log = structlog.get_logger("townsquare.plugins.social_agent.knowledge.hotpotqa")

INSTALL_HINT = 'knowledge source "hotpotqa" needs chromadb: pip install -e ".[knowledge]"'


class HotpotQAConfig(BaseModel):
    """``[knowledge]`` settings for ``name = "hotpotqa"``."""

    model_config = ConfigDict(extra="forbid")
    #: where and in what batches the collection is built, not what it holds
    machinery_settings: ClassVar[frozenset[str]] = frozenset({"persist", "batch_size", "collection"})

    path: str | None = Field(None, description="HotpotQA-format JSON list; relative to the scenario's folder")
    limit: int | None = Field(None, gt=0, description="use only the first N records")
    persist: bool = Field(True, description="keep the collection under RUN_DIR/knowledge/ (false: in memory)")
    batch_size: int = Field(5000, gt=0, description="records embedded and inserted per batch (capped by chromadb's maximum)")
    collection: str = Field("hotpotqa", pattern=r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,60}[a-zA-Z0-9]$")
    items: Literal["auto", "paragraphs", "qa"] = Field(
        "auto", description="paragraphs: one item per context paragraph; qa: one per question; auto: paragraphs when present")


def item_text(record: dict[str, Any]) -> str:
    return f"Q: {record['question']} A: {record['answer']}"


def paragraph_text(title: str, sentences: list[str]) -> str:
    """A context paragraph as the paper shows knowledge: ``Title: <title> Text: <text>``
    (HotpotQA's sentences keep their leading spaces, so they are joined as they are)."""
    return f"Title: {title} Text: {''.join(sentences).strip()}"


def _context(value: Any) -> list[tuple[str, list[str]]] | None:
    """HotpotQA's ``context`` (``[[title, [sentence, ...]], ...]``), or None when malformed."""
    if not isinstance(value, list):
        return None
    paragraphs = []
    for entry in value:
        if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str) or not isinstance(entry[1], list)
                or not all(isinstance(s, str) for s in entry[1])):
            return None
        paragraphs.append((entry[0], list(entry[1])))
    return paragraphs


def read_hotpotqa(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The records of a HotpotQA-format file (simplified or official); a problem is one line
    naming the file. A record keeps ``context`` (as (title, sentences) pairs) when it has one."""
    text = read_user_text(path, "HotpotQA file")
    data = parse_json_list(text, path, "{question, answer, type} or {question, answer, context} records")
    records = []
    for i, record in enumerate(data[:limit] if limit else data):
        if not isinstance(record, dict) or not isinstance(record.get("question"), str) or not isinstance(record.get("answer"), str):
            raise UsageError(f'{path}: record {i}: expected {{"question": str, "answer": str, "type": str}}')
        kept: dict[str, Any] = {"question": record["question"], "answer": record["answer"], "type": str(record.get("type", ""))}
        if "context" in record:
            context = _context(record["context"])
            if context is None:
                raise UsageError(f'{path}: record {i}: "context" must be a list of [title, [sentence, ...]] pairs')
            kept["context"] = context
        records.append(kept)
    if not records:
        raise UsageError(f"{path}: no records")
    return records


def knowledge_items(records: list[dict[str, Any]], items: str = "auto", source: str = "HotpotQA file") -> list[tuple[str, dict[str, Any]]]:
    """(text, meta) of every item: one per distinct context paragraph, or one per question
    (see the module docstring for ``items``)."""
    with_context = all("context" in r for r in records)
    if items == "paragraphs" and not with_context:
        missing = next(i for i, r in enumerate(records) if "context" not in r)
        raise UsageError(f'{source}: items = "paragraphs" but record {missing} has no "context" (a simplified file?)')
    if items == "qa" or (items == "auto" and not with_context):
        return [(item_text(r), {"question": r["question"], "answer": r["answer"], "type": r["type"]}) for r in records]
    found: dict[str, dict[str, Any]] = {}
    for record in records:
        for title, sentences in record["context"]:
            text = paragraph_text(title, sentences)
            if text not in found and sentences:
                found[text] = {"title": title, "question": record["question"]}
    return list(found.items())


def _import_chromadb() -> Any:
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return chromadb, Settings


class HotpotQAKnowledge:
    """HotpotQA items in a chromadb collection, searched with the run's embedder."""

    def __init__(self, config: HotpotQAConfig, items: list[tuple[str, dict[str, Any]]], embedder: Any, directory: Path | None,
                 fingerprint: str):
        self.config = config
        self.texts = [text for text, _ in items]
        self.meta = [meta for _, meta in items]
        self.embedder = embedder
        self.directory = directory
        self.fingerprint = fingerprint
        self._collection: Any = None
        #: the items' unit vectors, in file order (the exact search's matrix)
        self._vectors: np.ndarray | None = None
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
            if (collection.metadata or {}).get("fingerprint") == self.fingerprint and collection.count() == len(self.texts):
                self.reused = True
                log.info("knowledge.reused", source="hotpotqa", collection=name, items=len(self.texts))
                self._vectors = _unit_rows(_stored_vectors(collection, len(self.texts), client.get_max_batch_size()))
                return collection
            client.delete_collection(name)
        collection = client.create_collection(
            name, embedding_function=None, metadata={"hnsw:space": "cosine", "fingerprint": self.fingerprint})
        started = time.perf_counter()
        raw = getattr(self.embedder, "embedder", self.embedder)  # bypass the run's text cache: these are embedded once
        step = min(self.config.batch_size, client.get_max_batch_size())
        parts = []
        for start in range(0, len(self.texts), step):
            texts = self.texts[start:start + step]
            vectors = np.asarray(await raw.embed(texts), dtype=np.float32)
            parts.append(vectors)
            # no documents: the texts stay in memory, and chromadb's full-text index of them
            # cost about 40% of the build time on the 7,405-record dev file
            # in a worker thread: HNSW indexing takes seconds, and the other agents' LLM calls
            # should not wait on it
            await asyncio.to_thread(collection.add, ids=[str(i) for i in range(start, start + len(texts))], embeddings=vectors)
        self._vectors = _unit_rows(np.concatenate(parts))
        self.build_seconds = time.perf_counter() - started
        log.info("knowledge.built", source="hotpotqa", collection=name, items=len(self.texts),
                 seconds=round(self.build_seconds, 3), persistent=self.directory is not None)
        return collection

    async def search(self, query: str, k: int) -> list[KnowledgeItem]:
        """The ``k`` items closest to ``query``, best first; ``score`` is the cosine (rounded to
        6 places, so a last-bit difference between machines is a tie), ties in file order."""
        if k <= 0:
            return []
        await self._ensure()
        vector = _unit_rows(np.asarray(await self.embedder.embed_one(query), dtype=np.float32)[None, :])[0]
        scores = np.round(self._vectors @ vector, 6)
        order = np.lexsort((np.arange(len(scores)), -scores))[:k]
        return [KnowledgeItem(id=f"hotpotqa-{i}", text=self.texts[i], title=self.meta[i].get("title", ""),
                              score=float(scores[i]), meta=dict(self.meta[i])) for i in map(int, order)]

    def get_state(self) -> dict[str, Any]:
        return {}  # the collection is rebuilt or reopened from the file

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _stored_vectors(collection: Any, count: int, step: int) -> np.ndarray:
    """The vectors of a reused collection, in item order (ids are the items' places)."""
    rows: list[Any] = [None] * count
    for start in range(0, count, step):
        found = collection.get(ids=[str(i) for i in range(start, min(count, start + step))], include=["embeddings"])
        for key, vector in zip(found["ids"], found["embeddings"]):
            rows[int(key)] = vector
    return np.asarray(rows, dtype=np.float32)


def build_hotpotqa(config: HotpotQAConfig | None, ctx: Any) -> HotpotQAKnowledge:
    if config is None or not config.path:
        raise UsageError('knowledge: the hotpotqa source needs path = "…" (a HotpotQA-format JSON list)')
    _import_chromadb()  # fail before round 0 when it is missing
    path = Path(config.path)
    if not path.is_absolute():
        path = Path(getattr(ctx, "base_dir", ".") or ".") / path
    items = knowledge_items(read_hotpotqa(path, config.limit), config.items, str(path))
    services = ctx.services
    embedder = services.embedder
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    raw = getattr(embedder, "embedder", embedder)
    fingerprint = hashlib.sha256(json.dumps(
        [digest, config.limit, config.items, getattr(embedder, "name", "?"), getattr(embedder, "dim", 0), repr(getattr(raw, "config", None))],
    ).encode()).hexdigest()
    directory = Path(services.run_dir) / "knowledge" if config.persist and services.run_dir else None
    return HotpotQAKnowledge(config, items, embedder, directory, fingerprint)


@hookimpl
def townsquare_register_knowledge_sources():
    return [
        KnowledgeSourceSpec("hotpotqa", build_hotpotqa, config_model=HotpotQAConfig, priority=100,
                            description="HotpotQA Wikipedia paragraphs (or question-answer pairs) in chromadb, searched with the run's embedder (Zhou §3.1.1)"),
    ]
