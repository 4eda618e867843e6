"""Retries with backoff (order 30): timeouts, 408 and 429, 5xx and connection errors.

A failed attempt is retried after ``Retry-After`` when the server sends one (``retry-after-ms``,
seconds or an HTTP date; at most ``max_retry_after_s``), else after a full-jitter exponential
backoff: uniform in ``[0, min(max_delay_s, base_delay_s * 2**k)]`` for the k-th retry (the
"full jitter" of Brooker, "Exponential Backoff and Jitter", AWS Architecture Blog, 2015). The
jitter comes from a generator seeded with the run's seed; waiting times never change results.
The kernel's accounting sits inside this link, so every failed attempt has its ``error`` row.

Errors are told apart by shape, not by SDK: an exception with an HTTP ``status_code`` (its
own or its ``response``'s), or one whose class name says ``Timeout``/``Connection`` (the
``openai`` and ``httpx`` errors, ``TimeoutError``, ``ConnectionError``). Anything else (a bug,
a replay miss, a budget stop) passes through untouched.

When the attempts are used up, or the server rejects the request outright (another 4xx: a bad
key, an unknown model, a request too long), the call raises :class:`LLMUnavailable`, a
:class:`~townsquare.errors.RunStopped`: the run stops cleanly at its last checkpoint (exit
status 3) with a message naming the error, and ``townsquare resume`` continues once the
endpoint answers again; answers already paid for are in the cache. Falling back to each
decision's default instead would keep going but silently bias the simulation for as long as
an outage lasts.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare import hookimpl
from townsquare.errors import RunStopped, TownsquareError
from townsquare.llm import Handler, LLMRequest, LLMResponse
from townsquare.specs import LLMMiddlewareSpec

log = structlog.get_logger("townsquare.plugins.llm_retry")

RETRY_STATUS = frozenset({408, 429})


class LLMUnavailable(RunStopped):
    """An LLM call failed for good: the run stops at its last checkpoint, to be resumed."""


class RetryConfig(BaseModel):
    """``[plugins.llm_retry]``."""

    model_config = ConfigDict(extra="forbid")

    #: attempts per call, the first included
    attempts: int = Field(6, ge=1)
    base_delay_s: float = Field(0.5, ge=0)
    max_delay_s: float = Field(30.0, ge=0)
    max_retry_after_s: float = Field(120.0, ge=0)


class LLMRetry:
    """Retries one call until it succeeds, fails for good, or runs out of attempts.

    ``sleep`` and ``clock`` (for ``Retry-After`` dates) may be replaced, e.g. by tests.
    """

    def __init__(self, config: RetryConfig, ctx: Any):
        self.config = config
        self.rng = random.Random(getattr(ctx, "seed", 0))
        self.sleep = asyncio.sleep
        self.clock = time.time

    async def __call__(self, request: LLMRequest, call_next: Handler) -> LLMResponse:
        attempts, attempt = self.config.attempts, 0
        while True:
            attempt += 1
            try:
                return await call_next(request)
            except Exception as exc:
                verdict = classify(exc)
                if verdict is None:
                    raise
                who = f"{request.purpose} for {request.agent_id or 'the run'}"
                error = f"{type(exc).__name__}: {exc}"[:300]
                if verdict == "reject":
                    raise LLMUnavailable(f"LLM call rejected ({who}), not retried: {error}") from exc
                if attempt == attempts:
                    raise LLMUnavailable(f"LLM call failed {attempts} times ({who}): {error}") from exc
                delay = self.delay(attempt, exc)
                log.info("llm.retry", purpose=request.purpose, agent=request.agent_id, attempt=attempt,
                         error=type(exc).__name__, delay_s=round(delay, 3))
                await self.sleep(delay)

    def delay(self, attempt: int, exc: BaseException) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        after = retry_after(exc, self.clock())
        if after is not None:
            return min(after, self.config.max_retry_after_s)
        return self.rng.uniform(0, min(self.config.max_delay_s, self.config.base_delay_s * 2 ** (attempt - 1)))


def classify(exc: BaseException) -> str | None:
    """``"retry"``, ``"reject"`` (a 4xx other than 408 and 429) or None: not an endpoint error."""
    if isinstance(exc, TownsquareError):
        return None
    status = status_code(exc)
    if status is not None:
        return "retry" if status in RETRY_STATUS or status >= 500 else "reject"
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return "retry"
    if any("Timeout" in cls.__name__ or "Connection" in cls.__name__ for cls in type(exc).__mro__):
        return "retry"
    return None


def status_code(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        status = getattr(holder, "status_code", None)
        if isinstance(status, int):
            return status
    return None


def retry_after(exc: BaseException, now: float) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms``, ``retry-after``), or None."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


@hookimpl
def townsquare_register_llm_middleware():
    return [LLMMiddlewareSpec("llm_retry", LLMRetry, config_model=RetryConfig, order=30,
                              description="retries with backoff on timeouts, 429 and 5xx; stops cleanly when exhausted")]
