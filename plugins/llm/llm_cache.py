"""The response cache: every answer a run gets, in ``<run_dir>/llm_cache.sqlite`` (order 10,
outermost).

An answer is keyed by the full request (:meth:`townsquare.llm.LLMRequest.cache_key`, with the
scenario's ``[llm]`` name and model), the agent that asked, and its place ``n``: the round, the
agent's issue number in it and the part (request or repair; :func:`townsquare.api.current_issue`,
:func:`call_position`). Places do not depend on when answers come back: identical requests in
flight together (three equal questions at once, the equal repairs of two of them) each get the
answer recorded for their own place, whatever order they finish in, and a replay or a resumed
round asks every call at the place it was asked. A request made outside a client call (no
issue), and every request of a cache file written before places were kept (meta ``identity``
absent), count instead how many times the agent asked exactly this before.

Answers are kept as they arrive and written and committed in groups (at most
:data:`GROUP_SECONDS` or :data:`GROUP_ROWS` apart, and at every checkpoint) by a writer thread,
off the event loop, so a killed run keeps what it paid for but the last fraction of a second;
those calls are asked again when the discarded round replays. A cache file that starts empty
(a new run) is never searched: each place (each occurrence) is asked once, so a new run cannot
hit its own answers.

Within a run the cache is a journal. Rows are marked committed when the engine takes a
checkpoint (``get_state``); on resume the discarded round asks its calls at their places again
(occurrence counters restart from the committed rows up to the checkpoint's round) and finds
them here: they
are recorded as the ``ok`` calls they were (tokens, cost and latency of the original), not
paid twice, and the export equals an uninterrupted run's. A stop (a budget, an exhausted
retry) first waits for the calls in flight, so their answers land in the journal too.

``replay_from`` (another run's cache) answers only from that file: hits are recorded as
``cached`` (cost 0) and a miss stops with ``cache miss in replay: PURPOSE for AGENT``.
:class:`CacheReplayProvider` is the same lookup as a provider (``townsquare replay``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict

from townsquare.api import (
    KEPT, Handler, LLMMiddlewareSpec, LLMRequest, LLMResponse, RunStopped, UsageError, current_issue, hookimpl, json_encoder,
    provider_capabilities,
)

log = structlog.get_logger("townsquare.plugins.llm.llm_cache")

CACHE_FILE = "llm_cache.sqlite"

#: Group commit: answers are committed at most this many seconds, or rows, apart.
GROUP_SECONDS = 0.1
GROUP_ROWS = 256

#: an answer's ``meta`` as stored (one kept encoder: ``json.dumps`` with options makes one per call)
_META_JSON = json_encoder(default=str)

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    agent TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL, round INTEGER NOT NULL,
    committed INTEGER NOT NULL DEFAULT 0, purpose TEXT, text TEXT NOT NULL, prompt_tokens INTEGER,
    completion_tokens INTEGER, model TEXT, provider TEXT, latency_ms REAL, meta TEXT,
    PRIMARY KEY (agent, key, n));
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
"""


def call_position(round: int, issue: tuple[int, ...]) -> int:
    """A request's place as the journal's ``n``: its round, the agent's issue number in that round
    and its part (0 the request, 1 its repair). Negative, so it never meets an occurrence count."""
    return -(((round + 2) << 40) | (issue[0] << 1) | issue[1])


def describe_place(n: int) -> str:
    """``n`` as words, for a replay miss."""
    if n >= 0:
        return f"call {n + 1} of this request"
    code = -n
    part = " (its repair)" if code & 1 else ""
    return f"round {(code >> 40) - 2}, the agent's call {((code & (2**40 - 1)) >> 1) + 1} of the round{part}"


class ReplayMiss(UsageError):
    """A replay asked for an answer the recorded run never got."""


class CacheConfig(BaseModel):
    """``[plugins.llm_cache]``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    #: another run's ``llm_cache.sqlite`` (or its run directory): answer only from it
    replay_from: str | None = None


class ResponseStore:
    """The ``responses`` table, with the per-(agent, key) occurrence counters."""

    def __init__(self, path: Path, readonly: bool = False):
        self.path = path
        self.readonly = readonly
        if readonly:
            if not path.is_file():
                raise UsageError(f"{path}: no LLM cache there (was the run made with llm_cache disabled?)")
            self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        else:
            # check_same_thread off: the writer thread writes the groups; every use here first
            # waits for the group in writing (:meth:`wait_written`), so one thread at a time uses it
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
        self.counters: dict[tuple[str, str], int] = {}
        #: counters restart from committed rows up to this round (None: a fresh start at 0)
        self.through: int | None = None
        #: False while nothing was there to find (a new file): lookups are skipped
        self.searchable = self.db.execute("SELECT 1 FROM responses LIMIT 1").fetchone() is not None
        #: answers put since the last group was handed to the writer, each row with its rowid
        self._rows: list[tuple] = []
        self._opened = 0.0
        #: the rowid the next answer gets: this process is the file's one writer (a Ray run's
        #: shards send their answers to the driver), so it numbers the rows as it keeps them
        self._next_rowid = 1 if readonly else self.db.execute("SELECT COALESCE(MAX(rowid), 0) + 1 FROM responses").fetchone()[0]
        self._writer: ThreadPoolExecutor | None = None
        #: the group being written (at most one at a time, in order)
        self._writing: Future | None = None

    def next_n(self, agent: str, key: str) -> int:
        n = self.counters.get((agent, key))
        if n is None:
            n = 0
            if self.through is not None:
                self.wait_written()
                row = self.db.execute("SELECT MAX(n) FROM responses WHERE agent=? AND key=? AND committed=1 AND round<=?",
                                      (agent, key, self.through)).fetchone()
                n = 0 if row[0] is None else row[0] + 1
        self.counters[(agent, key)] = n + 1
        return n

    def get(self, agent: str, key: str, n: int) -> tuple[int, LLMResponse] | None:
        if not self.searchable:
            return None
        self.flush()  # an answer put meanwhile is found too
        row = self.db.execute(
            "SELECT rowid, text, prompt_tokens, completion_tokens, model, provider, latency_ms, meta FROM responses"
            " WHERE agent=? AND key=? AND n=?", (agent, key, n)).fetchone()
        if row is None:
            return None
        return row[0], LLMResponse(text=row[1], prompt_tokens=row[2], completion_tokens=row[3], model=row[4],
                                   provider=row[5], latency_ms=row[6] or 0.0, meta=json.loads(row[7] or "{}"))

    def put(self, agent: str, key: str, n: int, round: int, purpose: str, response: LLMResponse) -> int:
        """Keep an answer; it is written with the others of its group. Returns its rowid."""
        if not self._rows:
            self._opened = time.monotonic()
        rowid = self._next_rowid
        self._next_rowid += 1
        self._rows.append((rowid, agent, key, n, round, purpose, response.text, response.prompt_tokens,
                           response.completion_tokens, response.model, response.provider, response.latency_ms,
                           _META_JSON(response.meta) if response.meta else None))
        if len(self._rows) >= GROUP_ROWS or time.monotonic() - self._opened >= GROUP_SECONDS:
            self._write_behind()
        return rowid

    def _write_behind(self) -> None:
        """Hand the group to the writer thread. The event loop does not wait for it: 256 rows
        took 1.5 to 2.5 ms, and among a round's answers each such pause lengthened the train
        of those still waiting (docs/scale.md). SQLite lets go of the GIL while it writes."""
        rows, self._rows = self._rows, []
        self.wait_written()
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm-journal")
        self._writing = self._writer.submit(self._write, rows)

    def _write(self, rows: list[tuple]) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO responses (rowid, agent, key, n, round, purpose, text, prompt_tokens, completion_tokens,"
                " model, provider, latency_ms, meta) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def wait_written(self) -> None:
        """Wait until the group handed to the writer is written and committed (its error, if
        it failed, is raised here)."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def flush(self) -> None:
        """Write and commit every answer kept so far before returning."""
        self.wait_written()
        rows, self._rows = self._rows, []
        if rows:
            self._write(rows)

    def touch(self, rowid: int, round: int) -> None:
        self.wait_written()
        self.db.execute("UPDATE responses SET round=? WHERE rowid=?", (round, rowid))

    def commit(self, rowids: list[int]) -> None:
        """Mark rows committed (a checkpoint's)."""
        self.flush()
        for start in range(0, len(rowids), 500):
            chunk = rowids[start:start + 500]
            self.db.execute(f"UPDATE responses SET committed=1 WHERE rowid IN ({','.join('?' * len(chunk))})", chunk)

    def restore(self, through: int) -> None:
        """Count from the rows committed up to round ``through`` (a checkpoint's)."""
        self.through = through
        self.counters.clear()
        if not self.readonly:
            self.flush()
            # committed by a checkpoint that was never written (killed in between)
            self.db.execute("UPDATE responses SET committed=0 WHERE round>?", (through,))

    def meta(self) -> dict[str, str]:
        self.wait_written()
        return dict(self.db.execute("SELECT name, value FROM meta").fetchall())

    def set_meta(self, **values: str) -> None:
        self.wait_written()
        self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)", values.items())

    def close(self) -> None:
        try:
            if not self.readonly:
                self.flush()
        finally:
            if self._writer is not None:
                self._writer.shutdown()
            self.db.close()


class LLMCache:
    """The cache middleware (see the module docstring)."""

    def __init__(self, config: CacheConfig, ctx: Any):
        self.config = config
        self.model_id = model_identity(getattr(ctx, "scenario", None))
        self.replay = bool(config.replay_from)
        self.store: ResponseStore | None = None
        if config.enabled:
            self.store = (ResponseStore(cache_path(config.replay_from, ctx.base_dir), readonly=True) if self.replay
                          else ResponseStore(Path(ctx.services.run_dir) / CACHE_FILE))
        #: answers keyed by their place (a new file, or one written so); else by occurrence counts
        self.by_place = self.store is not None and (not self.store.searchable or self.store.meta().get("identity") == "place")
        self.accounting: Any = None
        self._round = lambda: -1
        self._used: list[int] = []
        self._through = -1
        self._in_flight = 0
        self._idle = asyncio.Event()

    def bind_accounting(self, accounting: Any) -> None:
        self.accounting = accounting
        self._round = accounting.run_round
        if self.store is not None and not self.replay:
            self.store.set_meta(provider=accounting.provider.name, model=accounting.provider.model, model_id=self.model_id,
                                structured=json.dumps(provider_capabilities(accounting.provider)),
                                **({"identity": "place"} if self.by_place else {}))

    async def __call__(self, request: LLMRequest, call_next: Handler) -> LLMResponse:
        if self.store is None:
            return await call_next(request)
        agent, key = request.agent_id or "", request.cache_key(self.model_id)
        issue = current_issue() if self.by_place else None
        n = call_position(issue.round, issue) if issue is not None else self.store.next_n(agent, key)
        hit = self.store.get(agent, key, n) if self.store.searchable else None  # a new journal holds none
        if hit is not None:
            rowid, response = hit
            if self.replay:  # free and instant; a journal hit keeps its original cost and latency
                response.cached, response.latency_ms = True, 0.0
            else:
                self.store.touch(rowid, self._round())
                self._used.append(rowid)
            if self.accounting is not None and not response.meta.get(KEPT):
                self.accounting.account(request, response)
            return response
        if self.replay:
            raise ReplayMiss(f"cache miss in replay: {request.purpose} for {agent or 'the run'} "
                             f"({describe_place(n)}; {self.store.path})")
        # call inward (here, not in a coroutine of its own: a call less per request); on a
        # stop, first wait until the other calls in flight have landed here
        self._in_flight += 1
        if self._in_flight == 1:  # the first in flight: no longer idle (with more, it was not)
            self._idle.clear()
        stopped = False
        try:
            response = await call_next(request)
        except RunStopped:
            stopped = True
            raise
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()
            while stopped and self._in_flight:
                await self._idle.wait()
            if stopped and self.store is not None:
                self.store.flush()  # the paid answers of the calls that landed are kept
        if self.store is not None:  # None: closed while this call was in flight (the run stopped)
            self._used.append(self.store.put(agent, key, n, self._round(), request.purpose, response))
        return response

    def get_state(self) -> dict[str, Any]:
        """The checkpoint is the commit point: answers used so far count on resume."""
        if self.store is not None and not self.replay:
            self.store.commit(self._used)
        self._used = []
        self._through = max(self._through, self._round())
        return {"round": self._through}

    def set_state(self, state: dict[str, Any]) -> None:
        self._through = state["round"]
        if self.store is not None:
            self.store.restore(self._through)
        self._used = []

    async def aclose(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


class CacheReplayProvider:
    """A provider that answers only from a recorded run's cache (``townsquare replay``).

    Answers are marked cached (recorded with status ``cached``, cost 0); a request the run
    never made raises :class:`ReplayMiss`. Named like the recorded provider and model.
    """

    def __init__(self, path: str | Path, scenario: Any):
        self.cache = LLMCache(CacheConfig(replay_from=str(path)), _Context(scenario))
        meta = self.cache.store.meta()
        self.name = meta.get("provider", "replay")
        self.model = meta.get("model", "")
        #: the recorded provider's capabilities: the replay asks for the constraints it did
        self.structured = json.loads(meta.get("structured") or "{}")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "structured": self.structured}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return await self.cache(request, _no_endpoint)

    async def aclose(self) -> None:
        await self.cache.aclose()


class _Context:
    """The little of a BuildContext the replay provider's cache needs."""

    def __init__(self, scenario: Any):
        self.scenario = scenario
        self.base_dir = "."


async def _no_endpoint(request: LLMRequest) -> LLMResponse:  # pragma: no cover - the replay cache raises first
    raise ReplayMiss(f"cache miss in replay: {request.purpose} for {request.agent_id}")


def model_identity(scenario: Any) -> str:
    """What answers the requests, as far as the scenario says: ``[llm]`` name and model."""
    llm = getattr(scenario, "llm", None)
    if llm is None:
        return "auto"
    return f"{llm.name}:{llm.settings().get('model', '')}"


def cache_path(where: str, base_dir: str = ".") -> Path:
    """``where`` is a cache file or a run directory holding one."""
    path = Path(where)
    path = path if path.is_absolute() else Path(base_dir) / path
    return path / CACHE_FILE if path.is_dir() else path


@hookimpl
def townsquare_register_llm_middleware():
    return [LLMMiddlewareSpec("llm_cache", LLMCache, config_model=CacheConfig, order=10,
                              description="response cache and journal in the run directory; exact replay")]
