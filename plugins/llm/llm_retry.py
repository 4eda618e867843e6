"""Retries with backoff (order 30): every retryable provider fault, then a clean stop.

The kernel's accounting (inside this link) classifies each failed attempt once, records it
as an ``error`` row of ``llm_calls`` with its kind, and raises an
:class:`~townsquare.llm_faults.LLMFault` (see :mod:`townsquare.llm_faults` for the kinds:
timeouts, connection errors, unreadable or cut-off bodies, 429, 5xx, empty choices, null
content, cut-off decisions, unknown provider errors). A retryable fault is retried after
``Retry-After`` when the server sends one (``retry-after-ms``, seconds or an HTTP date; at
most ``max_retry_after_s``), else after a full-jitter exponential backoff: uniform in
``[0, min(max_delay_s, base_delay_s * 2**k)]`` for the k-th retry (Brooker, "Exponential
Backoff and Jitter", AWS Architecture Blog, 2015). The jitter comes from a generator seeded
with the run's seed; waiting times never change results. Anything that is not a provider
fault (a bug, a replay miss, a budget stop) passes through untouched.

A decision cut off by the token limit (``length``) on every attempt is not an outage: the last
cut-off answer is returned, and the decision's parser treats it like any unreadable answer (one
repair request, then a recorded parse failure and the decision's safe default).

When the attempts are used up, or the fault is fatal (401/403, 404, a context too long,
another 4xx), the call raises :class:`~townsquare.llm_faults.LLMFatal`, a
:class:`~townsquare.errors.RunStopped`: the run stops cleanly at its last checkpoint (exit
status 3) with one line naming the endpoint, the status and the kind, and ``townsquare
resume`` continues once the endpoint answers again; answers already paid for are in the cache.
Falling back to each decision's default instead would keep going but silently bias the
simulation for as long as an outage lasts.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, ClassVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import (
    ALL_SETTINGS, KEPT, Handler, LLMFatal, LLMFault, LLMMiddlewareSpec, LLMRequest, LLMResponse, classify, hookimpl,
)
from townsquare.lib.backoff import backoff_delay

log = structlog.get_logger("townsquare.plugins.llm.llm_retry")

class RetryConfig(BaseModel):
    """``[plugins.llm_retry]``."""

    model_config = ConfigDict(extra="forbid")
    machinery_settings: ClassVar = ALL_SETTINGS

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
        self.run_dir = getattr(getattr(ctx, "services", None), "run_dir", None) or "RUN"

    async def __call__(self, request: LLMRequest, call_next: Handler) -> LLMResponse:
        attempts, attempt = self.config.attempts, 0
        while True:
            attempt += 1
            try:
                return await call_next(request)
            except Exception as exc:
                fault = classify(exc)
                if fault is None:
                    raise
                who = f"{request.purpose} for {request.agent_id or 'the run'}"
                if not fault.retryable:
                    raise LLMFatal(f"LLM endpoint refused the request ({who}), not retried: {fault.describe()}") from exc
                if attempt >= attempts:
                    if fault.kind == "length" and fault.response is not None:
                        # a model that keeps talking past the limit is no outage: its cut-off
                        # answer goes to the decision's parser (one repair, then the recorded
                        # parse failure and the decision's safe default), the run goes on
                        log.warning("llm.cut_off_answer_kept", purpose=request.purpose, agent=request.agent_id,
                                    attempts=attempts)
                        # its error row is its record: a journal or replay hands it back without another
                        fault.response.meta = {**fault.response.meta, KEPT: "cut_off"}
                        return fault.response
                    raise LLMFatal(f"LLM call failed {attempts} times ({who}); last: {fault.describe()}") from exc
                delay = self.delay(attempt, exc)
                log.info("llm.retry", purpose=request.purpose, agent=request.agent_id, attempt=attempt,
                         kind=fault.kind, delay_s=round(delay, 3))
                await self.sleep(delay)

    def delay(self, attempt: int, exc: BaseException) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        c = self.config
        return backoff_delay(attempt, exc, self.rng, self.clock(), base_s=c.base_delay_s, max_s=c.max_delay_s,
                             max_retry_after_s=c.max_retry_after_s)


__all__ = ["LLMRetry", "LLMFatal", "LLMFault", "RetryConfig", "classify"]


@hookimpl
def townsquare_register_llm_middleware():
    return [LLMMiddlewareSpec("llm_retry", LLMRetry, config_model=RetryConfig, order=30,
                              description="retries every retryable provider fault with backoff; stops cleanly when exhausted or refused")]
