"""The agents and LLM clients an evaluation works with, from a scenario file or a run directory.

* A scenario file: its agents as built, before the first round (their personas and whatever
  memory the build gives them).
* A run directory: its agents rebuilt and restored from the run's newest checkpoint (persona,
  memory and every other component as the run left them), as ``townsquare interview`` does. The
  run's LLM middleware state (cache counters, budget spent) is not restored: the evaluation
  has its own.

Either way the simulation is built in the evaluation's own folder (``--out``), which holds its
response cache (``llm_cache.sqlite``) and its ``llm_calls`` rows (``events.sqlite``): every call
goes through the scenario's middleware (cache, budget, retries, concurrency), so running the
same command again answers from the cache (a stopped evaluation resumes; a finished one
replays). Each judge and the generator may be another LLM (``--judge``/``--generator``, written
as ``--llm`` is); they get the same middleware around their own provider, and a client name of
their own (``personagym.judge.1:SPEC``), so the cache never gives one judge another's answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Sequence

from townsquare.api import (
    BuildContext, LLMCallRecord, LLMClient, StepContext, UsageError,
)


@dataclass
class Target:
    """What ``TARGET`` resolved to: a scenario (and its source) or a run directory."""

    scenario: Any
    plugins: Any
    run: Any = None            # RunDir for a run directory
    checkpoint: tuple[int, dict[str, Any]] | None = None
    resolve_with: Callable[[Sequence[str]], Any] = field(default=lambda overrides: None, repr=False)


def open_target(path: str, overrides: Sequence[str], plugin_options: Sequence[str], seed: int | None) -> Target:
    """A scenario file or a run directory; one line naming ``path`` when it is neither."""
    from townsquare.api.commands import load_plugins, load_run, load_scenario

    where = Path(path)
    if where.is_dir():
        run_dir, scenario, plugins = load_run(path, extra_plugin_options=plugin_options, overrides=overrides)
        checkpoint = run_dir.latest_checkpoint()
        if checkpoint is None:
            raise UsageError(f"{path}: the run has no checkpoint to rebuild its agents from")
        return Target(scenario, plugins, run_dir, checkpoint,
                      lambda more: load_run(path, plugins, overrides=[*overrides, *more])[1])
    if not where.is_file():
        raise UsageError(f"{path}: no such scenario file or run directory")
    plugins = load_plugins(plugin_options)
    scenario = load_scenario(path, list(overrides), plugins, seed=seed)
    return Target(scenario, plugins, None, None, lambda more: load_scenario(path, [*overrides, *more], plugins, seed=seed))


class Session:
    """The built simulation of a target in ``out`` and the clients made from it."""

    def __init__(self, target: Target, out: Path):
        from townsquare.api.commands import RunDir, Simulation

        self.target = target
        (out / "checkpoints").mkdir(parents=True, exist_ok=True)
        self.sim = Simulation(target.scenario, target.plugins, RunDir(out))
        self.providers: list[Any] = []
        #: llm_calls rows written, by status (ok, cached, error, parse_failure)
        self.counts: dict[str, int] = {}
        self.round = 0

    async def build(self) -> None:
        sim = self.sim
        await sim.build()
        if self.target.checkpoint is not None:
            last, state = self.target.checkpoint
            sim.set_state({**state, "llm": {}})
            self.round = last + 1
        sim.round = self.round
        # an evaluation is no run: hooks that observe a run's LLM calls are not told of these
        sim.fire_llm_call_hook = False
        if sim.services.llm is None:
            raise UsageError(f"{self.target.scenario.source}: no [llm] to answer with (add one, or --llm PROVIDER[:MODEL])")

    def contexts(self, agents: Sequence[Any]) -> list[Any]:
        clock = self.sim.model.clock
        now = clock.start + timedelta(minutes=self.round * clock.minutes_per_round)
        return [StepContext(agent=a, round=self.round, now=now, minutes_per_round=clock.minutes_per_round,
                            services=self.sim.services, llm=self.sim.services.llm.for_agent(a.id), start=clock.start)
                for a in agents]

    def client(self, spec: str | None, name: str) -> LLMClient:
        """The run's own LLM (``spec`` None) or the LLM ``spec`` names, behind the run's
        middleware, as the client ``name``."""
        from townsquare.api.commands import Accounting, compose, llm_overrides

        sim = self.sim
        if spec is None:
            return sim.services.llm.for_agent(name)
        scenario = self.target.resolve_with(llm_overrides(spec))
        build = BuildContext(services=sim.services, seed=sim.model.seed, base_dir=scenario.base_dir, scenario=scenario.model)
        provider = scenario.llm.spec.factory(scenario.llm.config, build)
        self.providers.append(provider)
        accounting = Accounting(provider, sim.record_llm_call, lambda: sim.round, price=getattr(provider, "cost", None))
        accounting.observers = sim.accounting.observers  # the budget counts every judge's spending too

        def parse_failure(request: Any, answer: str, kind: str) -> None:
            sim.record_llm_call(LLMCallRecord(round=sim.round, agent_id=request.agent_id, purpose=request.purpose,
                                           provider=provider.name, model=provider.model, status="parse_failure",
                                           error=f"unparsable answer: {answer[:200]!r}", kind=kind))

        client = LLMClient(compose(provider, [*sim.llm_middleware, accounting]), model=provider.model,
                           on_parse_failure=parse_failure)
        return client.for_agent(name)

    def save_calls(self) -> int:
        """Write the ``llm_calls`` rows gathered so far; returns how many."""
        rows = self.sim.write_llm_calls()
        for row in rows:
            self.counts[row[5]] = self.counts.get(row[5], 0) + 1
        return len(rows)

    async def close(self) -> None:
        from townsquare.api.commands import close_each

        try:
            self.save_calls()
        finally:
            await close_each(self.providers)
            await self.sim.aclose()


def check_spec(target: Target, spec: str, option: str) -> None:
    """Resolve ``spec`` once before anything is written: a bad one is one line, exit 2."""
    from townsquare.api import TownsquareError
    from townsquare.api.commands import llm_overrides

    if not spec or spec.startswith(":"):
        raise UsageError(f"{option} {spec!r}: expected PROVIDER[:MODEL], e.g. openai:gpt-4o-mini")
    try:
        scenario = target.resolve_with(llm_overrides(spec))
    except TownsquareError as exc:
        raise UsageError(f"{option} {spec}: {exc}") from None
    if scenario is None or scenario.llm is None:
        raise UsageError(f"{option} {spec}: not an LLM provider")
