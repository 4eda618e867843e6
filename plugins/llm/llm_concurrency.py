"""The LLM concurrency limit (order 40): at most ``limit`` calls in flight, run-wide.

One semaphore shared by every agent; ``[plugins.llm_concurrency] limit`` defaults to the
scenario's ``engine.concurrency``. ``peak`` is the most calls seen in flight at once.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import ALL_SETTINGS, Handler, LLMMiddlewareSpec, LLMRequest, LLMResponse, hookimpl

from .limiter import Limiter


class ConcurrencyConfig(BaseModel):
    """``[plugins.llm_concurrency]``."""

    model_config = ConfigDict(extra="forbid")
    machinery_settings: ClassVar = ALL_SETTINGS

    limit: int | None = Field(None, gt=0)


class LLMConcurrency:
    def __init__(self, config: ConcurrencyConfig, ctx: Any):
        scenario = getattr(ctx, "scenario", None)
        self.limit = config.limit or (scenario.engine.concurrency if scenario is not None else 64)
        self._limiter = Limiter(self.limit)
        self.active = 0
        self.peak = 0

    async def __call__(self, request: LLMRequest, call_next: Handler) -> LLMResponse:
        limiter = self._limiter
        if not limiter.take():  # ``async with`` would run two coroutines a call even with room
            await limiter.wait()
        self.active += 1
        if self.active > self.peak:
            self.peak = self.active
        try:
            return await call_next(request)
        finally:
            self.active -= 1
            limiter.release()


@hookimpl
def townsquare_register_llm_middleware():
    return [LLMMiddlewareSpec("llm_concurrency", LLMConcurrency, config_model=ConcurrencyConfig, order=40,
                              description="at most N LLM calls in flight, run-wide")]
