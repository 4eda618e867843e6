"""The LLM budget (order 20): stops the run cleanly, with a checkpoint, before it overspends.

``[plugins.llm_budget]`` sets ``max_calls``, ``max_tokens`` and ``max_cost`` (each optional).
Spending is what the run's ``llm_calls`` table shows as ``ok`` (calls, tokens, cost) and
``error`` (the tokens and cost of paid answers that were faults, such as a cut-off decision):
the budget observes the
kernel's accounting, so answers the cache re-serves from the run's own journal after a stop
(paid, but their round was discarded) count once, and replayed answers (``cached``) are free.
When the next call would pass a limit, the call raises :class:`~townsquare.errors.RunStopped`:
the unfinished round is discarded and ``townsquare resume RUN --set
plugins.llm_budget.max_calls=...`` continues from the last checkpoint (an evaluation puts the
command that resumes it in ``Services.resume_command``, and the message names that one). Calls in flight count
against ``max_calls`` already; tokens and cost are known only when an answer arrives, so
those two limits may be passed by the calls in flight at that moment.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import ALL_SETTINGS, Handler, LLMCallRecord, LLMMiddlewareSpec, LLMRequest, LLMResponse, RunStopped, hookimpl


class BudgetConfig(BaseModel):
    """``[plugins.llm_budget]``; a limit left out is no limit."""

    model_config = ConfigDict(extra="forbid")
    machinery_settings: ClassVar = ALL_SETTINGS

    max_calls: int | None = Field(None, gt=0)
    max_tokens: int | None = Field(None, gt=0)
    max_cost: float | None = Field(None, gt=0)


class LLMBudget:
    """Counts answered calls, tokens and cost; refuses the call that would pass a limit."""

    def __init__(self, config: BudgetConfig, ctx: Any):
        self.config = config
        self.services = getattr(ctx, "services", None)
        self.run_dir = getattr(self.services, "run_dir", None) or "RUN"
        self.calls = 0
        self.tokens = 0
        self.cost = 0.0
        self.in_flight = 0

    def bind_accounting(self, accounting: Any) -> None:
        accounting.observers.append(self.observe)

    def observe(self, call: LLMCallRecord) -> None:
        if call.status == "ok":
            self.calls += 1
        if call.status in ("ok", "error"):  # a paid answer that was a fault (cut off, empty) costs too
            self.tokens += call.prompt_tokens + call.completion_tokens
            self.cost += call.cost

    async def __call__(self, request: LLMRequest, call_next: Handler) -> LLMResponse:
        c = self.config
        if c.max_calls is not None or c.max_tokens is not None or c.max_cost is not None:  # no limit, nothing to check
            reached = self.reached()
            if reached is not None:
                raise RunStopped(self.message(reached))
        self.in_flight += 1
        try:
            return await call_next(request)
        finally:
            self.in_flight -= 1

    def reached(self) -> str | None:
        """The key of the first limit the next call would pass, or None."""
        c = self.config
        if c.max_calls is not None and self.calls + self.in_flight >= c.max_calls:
            return "max_calls"
        if c.max_tokens is not None and self.tokens >= c.max_tokens:
            return "max_tokens"
        if c.max_cost is not None and self.cost >= c.max_cost:
            return "max_cost"
        return None

    def message(self, key: str) -> str:
        c = self.config
        limit = getattr(c, key)
        calls = f"{self.calls + self.in_flight:,} calls" + (f" (limit {c.max_calls:,})" if c.max_calls else "")
        tokens = f"{self.tokens:,} tokens" + (f" (limit {c.max_tokens:,})" if c.max_tokens else "")
        cost = f"${self.cost:,.2f}" + (f" (limit ${c.max_cost:,.2f})" if c.max_cost else "")
        raised = limit * 2 if isinstance(limit, int) else round(limit * 2, 2)
        # an evaluation names the command that resumes it; a run is resumed with `resume`
        resume = getattr(self.services, "resume_command", None) or f"townsquare resume {self.run_dir}"
        return f"LLM budget reached: {calls}, {tokens}, {cost}; raise it with: {resume} --set plugins.llm_budget.{key}={raised}"

    def get_state(self) -> dict[str, Any]:
        return {"calls": self.calls, "tokens": self.tokens, "cost": self.cost}

    def set_state(self, state: dict[str, Any]) -> None:
        self.calls, self.tokens, self.cost = state["calls"], state["tokens"], state["cost"]


@hookimpl
def townsquare_register_llm_middleware():
    return [LLMMiddlewareSpec("llm_budget", LLMBudget, config_model=BudgetConfig, order=20,
                              description="stop with a checkpoint at a call, token or cost limit")]
