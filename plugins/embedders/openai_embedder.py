"""API embeddings from OpenAI or any OpenAI-compatible server: ``[embedder] name = "openai"``.

Texts go to ``POST {base_url}/embeddings`` through ``openai.AsyncOpenAI``, ``batch_size`` texts a
request and at most ``max_concurrent`` requests at once. ``base_url`` defaults to
``$OPENAI_BASE_URL`` (read by the SDK), else OpenAI; the key comes from ``api_key_env`` or
``api_key_file`` through :func:`townsquare.lib.secret_files.resolve_secrets` and is never logged
(``api_key_env = ""`` for a server that takes none).

The dimension is needed before the first text (the run's embedding cache and the memory
components size their arrays by it): ``dim`` when set, else the known size of an OpenAI
model, else one probe request at build time, which also fails fast on a wrong URL or key.
``dim`` with a ``text-embedding-3`` model is sent as ``dimensions`` (the API shortens the
vectors; ``send_dimensions`` overrides the guess for other servers). Returned rows are
scaled to unit length (float32); an empty text gets a zero row without a request (the API
rejects empty input). Vectors are cached by the SHA-1 of their text.

Failures are classified like chat calls (:mod:`townsquare.llm_faults`): a retryable fault (a
timeout, a reset, a cut-off or HTML body, 429, 5xx, an answer without vectors) is retried
``max_retries`` times after ``Retry-After`` or a seeded full-jitter backoff (the SDK's own
retries are off); a fatal one (401/403, 404, a context too long, another 4xx), the retries
used up, or vectors of the wrong size stop the run cleanly at its last checkpoint
(:class:`EmbedderUnavailable`, exit status 3) with one line naming the endpoint and the status.
``faults`` counts the faults by kind (embedding calls have no ``llm_calls`` rows).
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
from collections import Counter
from typing import Any, ClassVar, Literal, Sequence

import numpy as np
import structlog
from pydantic import Field

from townsquare.api import EmbedderSpec, LLMFatal, LLMFault, UsageError, classify, hookimpl, normalize_rows
from townsquare.lib.backoff import backoff_delay
from townsquare.lib.endpoint import EndpointConfig
from .text_vector_cache import VectorCache, embed_with_cache

log = structlog.get_logger("townsquare.embedder.openai")

#: Output sizes of OpenAI's embedding models (https://platform.openai.com/docs/guides/embeddings).
KNOWN_DIMS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedderConfig(EndpointConfig):
    """``[embedder]`` settings for ``name = "openai"`` (or ``[plugins.openai_embedder]``); the
    endpoint and its keys as :class:`townsquare.api.EndpointConfig` says."""

    machinery_settings: ClassVar[frozenset[str]] = EndpointConfig.machinery_settings | {
        "batch_size", "max_concurrent", "encoding_format", "timeout_s", "max_retries", "base_delay_s", "max_delay_s",
        "max_retry_after_s", "cache_size"}
    model: str = "text-embedding-3-small"
    dim: int | None = Field(None, gt=0, description="vector size; default: the model's known size, else probed")
    send_dimensions: bool | None = Field(None, description="send dim as 'dimensions'; default: for text-embedding-3 models")
    batch_size: int = Field(256, gt=0, le=2048, description="texts per request (the API takes at most 2048)")
    max_concurrent: int = Field(4, gt=0, description="requests in flight at once")
    encoding_format: Literal["float", "base64"] = Field("float", description="base64 is smaller; not every server has it")
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(5, ge=0, description="retries of a failed request (retryable faults only)")
    base_delay_s: float = Field(0.5, ge=0)
    max_delay_s: float = Field(30.0, ge=0)
    max_retry_after_s: float = Field(120.0, ge=0)
    cache_size: int = Field(20_000, ge=0, description="vectors kept by text hash (0: no cache)")


class EmbedderUnavailable(LLMFatal):
    """The embedding endpoint refused the run's requests or kept failing: a clean stop."""


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint. ``sleep`` and ``clock``
    may be replaced (tests)."""

    name = "openai"

    def __init__(self, config: OpenAIEmbedderConfig, client: Any, dim: int, seed: int = 0):
        self.config = config
        self.client = client
        self.model = config.model
        self.dim = dim
        self.cache = VectorCache(config.cache_size)
        self.requests = 0
        self.prompt_tokens = 0
        self.faults: Counter[str] = Counter()
        self.endpoint = f"{str(client.base_url).rstrip('/')}/embeddings"
        self.rng = random.Random(seed)
        self.sleep = asyncio.sleep
        self.clock = time.time
        self._slots = asyncio.Semaphore(config.max_concurrent)
        send = config.send_dimensions if config.send_dimensions is not None else config.model.startswith("text-embedding-3")
        self._extra = {"dimensions": dim} if send and config.dim else {}

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await embed_with_cache(texts, self.cache, self.dim, self._encode)

    async def _encode(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        wanted = [i for i, text in enumerate(texts) if text.strip()]
        size = self.config.batch_size
        batches = [wanted[start:start + size] for start in range(0, len(wanted), size)]
        for indices, vectors in zip(batches, await asyncio.gather(*(self._request([texts[i] for i in b]) for b in batches))):
            rows[indices] = vectors
        return normalize_rows(rows)

    async def _request(self, batch: list[str]) -> np.ndarray:
        """One batch, retried on retryable faults (see the module docstring)."""
        c, attempt = self.config, 0
        while True:
            attempt += 1
            try:
                async with self._slots:
                    response = await self.client.embeddings.create(
                        model=self.model, input=batch, encoding_format=c.encoding_format, **self._extra)
                return self._vectors(response, len(batch))
            except Exception as exc:
                fault = classify(exc, self.endpoint)
                if fault is None:
                    raise
                self.faults[fault.kind] += 1
                if not fault.retryable:
                    raise EmbedderUnavailable(f"embedding endpoint refused the request, not retried: {fault.describe()}") from exc
                if attempt > c.max_retries:
                    raise EmbedderUnavailable(f"embedding request failed {attempt} times; last: {fault.describe()}") from exc
                delay = backoff_delay(attempt, exc, self.rng, self.clock(), base_s=c.base_delay_s, max_s=c.max_delay_s,
                                      max_retry_after_s=c.max_retry_after_s)
                log.info("embedder.retry", attempt=attempt, kind=fault.kind, delay_s=round(delay, 3))
                await self.sleep(delay)

    def _vectors(self, response: Any, expected: int) -> np.ndarray:
        data = getattr(response, "data", None)
        if not isinstance(data, list):
            raise LLMFault("bad_body", f"not an embedding list: {str(response)[:80]!r}", status=200, endpoint=self.endpoint)
        if len(data) != expected:
            raise LLMFault("empty", f"{expected} texts sent, {len(data)} vectors returned", status=200, endpoint=self.endpoint)
        self.requests += 1
        self.prompt_tokens += int(getattr(getattr(response, "usage", None), "prompt_tokens", 0) or 0)
        vectors = np.stack([as_vector(item.embedding) for item in sorted(data, key=lambda item: item.index)])
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise EmbedderUnavailable(f"embedder openai: model {self.model} returned {vectors.shape[-1]}-dimensional vectors, "
                                      f"expected {self.dim} (set [embedder] dim)")
        return vectors

    async def aclose(self) -> None:
        await self.client.close()

    def get_state(self) -> dict[str, Any]:
        return {}  # the cache is derived from the texts

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def as_vector(embedding: Any) -> np.ndarray:
    """One returned embedding: a list of floats, or base64 of little-endian float32 (the SDK
    decodes base64 only when it chose the format itself)."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4").astype(np.float32)
    return np.asarray(embedding, dtype=np.float32)


def probe_dimension(openai: Any, config: OpenAIEmbedderConfig, key: str) -> int:
    """Embed one word to learn the model's output size (synchronously, at build time)."""
    try:
        with openai.OpenAI(base_url=config.base_url, api_key=key, timeout=config.timeout_s, max_retries=config.max_retries) as client:
            response = client.embeddings.create(model=config.model, input=["dimension"], encoding_format="float")
            return len(response.data[0].embedding)
    except Exception as exc:
        if classify(exc) is None and not isinstance(exc, (openai.OpenAIError, AttributeError, IndexError, TypeError)):
            raise
        raise UsageError(f"embedder openai: cannot reach model {config.model!r} to learn its dimension "
                         f"({type(exc).__name__}: {_first_line(exc)}); set [embedder] dim or check base_url and the key") from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else ""


def build_openai_embedder(config: OpenAIEmbedderConfig | None, ctx: Any) -> OpenAIEmbedder:
    import openai  # heavy: imported when a run uses this embedder

    config = config or OpenAIEmbedderConfig()
    keys = config.api_keys(getattr(ctx, "base_dir", "."), what="embedder openai API key")
    key = keys[0] if keys else "no-key"
    client = openai.AsyncOpenAI(base_url=config.base_url, api_key=key, timeout=config.timeout_s, max_retries=0)
    if not keys and client.base_url.host == "api.openai.com":
        raise UsageError("embedder openai: OpenAI needs an API key: set api_key_env or api_key_file")
    dim = config.dim or KNOWN_DIMS.get(config.model) or probe_dimension(openai, config, key)
    log.info("embedder.openai.ready", model=config.model, base_url=str(client.base_url), dim=dim, batch_size=config.batch_size)
    return OpenAIEmbedder(config, client, dim, seed=int(getattr(ctx, "seed", 0) or 0))


@hookimpl
def townsquare_register_embedders():
    return [
        EmbedderSpec(
            "openai", build_openai_embedder, config_model=OpenAIEmbedderConfig,
            description="API embeddings from OpenAI or an OpenAI-compatible server",
        )
    ]
