"""The LLM chain outside a run, for tests and benchmarks of providers and middleware.

:func:`build_chain` wires a provider and middleware the way the engine does (the middleware
in the given order, the kernel's :class:`~townsquare.llm.Accounting` innermost, every link
that wants it bound to the accounting) and keeps the records in a list instead of
``events.sqlite``. :func:`build_context` makes the :class:`~townsquare.components.BuildContext`
factories expect, with a minimal validated scenario.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..components import BuildContext, Services
from ..llm import Accounting, LLMCallRecord, LLMClient, compose
from ..scenario import validate_scenario


@dataclass
class Chain:
    client: LLMClient
    accounting: Accounting
    middleware: list[Any]
    records: list[LLMCallRecord] = field(default_factory=list)
    #: the round the records are attributed to; set it to move on
    round: int = 0

    def statuses(self) -> list[str]:
        return [r.status for r in self.records]


def build_context(run_dir: str | None = None, *, seed: int = 0, concurrency: int = 64, llm: dict[str, Any] | None = None,
                  plugins: dict[str, dict[str, Any]] | None = None, base_dir: str = ".") -> BuildContext:
    """A BuildContext with a one-agent scenario carrying ``engine.concurrency``, ``[llm]`` and
    ``[plugins.*]`` as given."""
    data: dict[str, Any] = {
        "rounds": 1, "seed": seed, "engine": {"concurrency": concurrency}, "plugins": plugins or {},
        "populations": [{"name": "users", "count": 1, "personas": {"name": "inline"}}],
    }
    if llm is not None:
        data["llm"] = llm
    services = Services(platform=None, embedder=None, run_dir=run_dir)  # type: ignore[arg-type]
    return BuildContext(services=services, seed=seed, base_dir=base_dir, scenario=validate_scenario(data, "<test>"))


def build_chain(provider: Any, middleware: list[Any] = (), *, agent_id: str | None = "users-0001",
                on_record: Callable[[LLMCallRecord], None] | None = None) -> Chain:
    """Provider, middleware (outermost first) and accounting, composed as the engine does."""
    chain: Chain
    records: list[LLMCallRecord] = []

    def record(call: LLMCallRecord) -> None:
        records.append(call)
        if on_record is not None:
            on_record(call)

    def parse_failure(request: Any, answer: str, kind: str) -> None:
        record(LLMCallRecord(round=chain.round, agent_id=request.agent_id, purpose=request.purpose, provider=provider.name,
                             model=provider.model, status="parse_failure", error=f"unparsable answer: {answer[:200]!r}",
                             kind=kind, mode=request.mode))

    accounting = Accounting(provider, record, lambda: chain.round, price=getattr(provider, "cost", None))
    for link in middleware:
        if hasattr(link, "bind_accounting"):
            link.bind_accounting(accounting)
    client = LLMClient(compose(provider, [*middleware, accounting]), model=provider.model, on_parse_failure=parse_failure,
                       current_round=lambda: chain.round)
    chain = Chain(client=client.for_agent(agent_id) if agent_id else client, accounting=accounting,
                  middleware=list(middleware), records=records)
    return chain
