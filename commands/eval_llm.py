"""The LLM clients of an evaluation command (``eval personagym``, ``eval some``, ``eval zhou``):
one way to build them, so every evaluation records, limits, resumes and prices its calls alike.

* **Clients**: the run's own LLM or any ``PROVIDER[:MODEL]`` spec (a judge, a generator), each
  behind the scenario's middleware, built once and shared (the response cache in the
  evaluation's folder, the budget, retries, the concurrency limit), each with its own
  accounting link, all observed by the one budget. A client asks under a name of its own
  (``personagym.judge.SPEC``...), so the cache never hands one model's answer to another.
* **Journal**: every call, cache hit and parse failure is an ``llm_calls`` row in the
  evaluation's store. An evaluation run again (to resume, or to replay) records its calls anew:
  its rows replace the earlier attempt's answered ones (a replayed answer is recorded as the
  call it was), while the earlier attempts' ``error`` rows stay, so the table holds each
  answer once and every failed attempt.
* **Budget**: ``[plugins.llm_budget]`` of the scenario (``--set`` raises it) stops the
  evaluation cleanly; the stop message names the command that resumes it
  (:func:`command_line`, put in ``Services.resume_command``).
* **Estimate** (``--estimate``): a :class:`DryRun` gives every client a
  :class:`~townsquare.commands.dry_run.StandInModel` and no middleware: the evaluation's code runs, no
  call reaches a model, and :meth:`DryRun.table` prices the calls per stage and model.
* **Model under test**: :meth:`EvalLLMs.identity` names what answers a spec, so a command can
  warn when a judge or a question generator is the model it evaluates.
* **Agents**: :class:`EvalSimulation` opens a scenario's world for an evaluation that never
  plays a round (``eval personagym``'s designs, ``eval park``'s interviewees, ``eval
  discrimination``'s users; :meth:`townsquare.world.World.open`): the one place an evaluation
  assembles agents, so its calls land in the same journal and cache as the clients' above.
* **The truth on a rerun**: :func:`cached_answers` counts the answers a folder's response caches
  hold; the difference before and after an evaluation is what the providers answered this
  time (0 when everything came from the cache), which :func:`calls_line` prints.
"""

from __future__ import annotations

import shlex
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from townsquare.components import BuildContext, Services
from townsquare.commands.dry_run import StandInModel, cost_of, format_table, prices_of
from townsquare.errors import TownsquareError, UsageError
from townsquare.llm import Accounting, LLMCallRecord, LLMClient, compose

#: the budget middleware's registered name: the one link an evaluation of several designs shares
BUDGET = "llm_budget"


def model_identity(scenario: Any) -> str:
    """``provider:model`` of a resolved scenario's ``[llm]`` (``auto`` without one)."""
    llm = getattr(scenario, "llm", None)
    if llm is None:
        return "auto"
    model = getattr(llm.config, "model", None) or ""
    return f"{llm.spec.name}:{model}" if model else llm.spec.name


def spec_overrides(spec: str | None) -> list[str]:
    """``openai:gpt-4o-mini`` -> the ``--set`` overrides that make it the scenario's ``[llm]``."""
    if not spec:
        return []
    name, _, model = spec.partition(":")
    return [f"llm.name={name}"] + ([f'llm.model="{model}"'] if model else [])


def check_spec(resolve: Callable[[list[str]], Any], spec: str, option: str) -> Any:
    """The scenario with ``spec`` as its LLM; a bad spec is one line naming ``option``."""
    if not spec or spec.startswith(":"):
        raise UsageError(f"{option} {spec!r}: expected PROVIDER[:MODEL], e.g. openai:gpt-4o-mini")
    try:
        scenario = resolve(spec_overrides(spec))
    except TownsquareError as exc:
        raise UsageError(f"{option} {spec}: {exc}") from None
    if scenario is None or scenario.llm is None:
        raise UsageError(f"{option} {spec}: not an LLM provider")
    return scenario


def command_line(ctx: Any, leave_out: Sequence[str] = ("estimate",)) -> str:
    """The command line that repeats the current click command (its path, arguments and every
    option that differs from its default), for a stop message to name."""
    import click

    parts = ctx.command_path.split()
    for param in ctx.command.params:
        if param.name in leave_out or param.name is None:
            continue
        value = ctx.params.get(param.name)
        if isinstance(param, click.Argument):
            parts += [str(v) for v in value] if isinstance(value, (tuple, list)) else ([] if value is None else [str(value)])
            continue
        if value in (None, (), False) or value == param.default or not param.opts:
            continue
        option = param.opts[0] if param.opts[0].startswith("--") or len(param.opts) == 1 else param.opts[-1]
        if getattr(param, "is_flag", False):
            parts.append(option)
        elif getattr(param, "multiple", False):
            for item in value:
                parts += [option, str(item)]
        else:
            parts += [option, str(value)]
    return shlex.join(parts)


def clear_earlier_answers(store: Path) -> None:
    """Before an evaluation runs again into ``store``: drop the earlier attempt's answered
    ``llm_calls`` rows (this attempt records every answer again, replayed ones as the calls
    they were); ``error`` rows stay."""
    if not store.is_file():
        return
    db = sqlite3.connect(store)
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'llm_calls'").fetchone():
            with db:
                db.execute("DELETE FROM llm_calls WHERE status != 'error'")
    finally:
        db.close()


class DryRun:
    """Stand-in models, one per client, and the priced table of what they were asked."""

    def __init__(self, completion_tokens: dict[str, int] | None = None, script: Callable[[Any], str | None] | None = None):
        self.completion_tokens = dict(completion_tokens or {})
        #: scripted answers for some requests (:class:`StandInModel`'s ``script``)
        self.script = script
        #: client label -> (its stand-in, the model it stands in for, prices per 1k tokens)
        self.models: dict[str, tuple[StandInModel, str, tuple[float, float] | None]] = {}

    def model(self, label: str, stands_for: str, prices: tuple[float, float] | None, cap: int | None = None) -> StandInModel:
        """The stand-in for ``label``; ``cap``: the most completion tokens that model gives."""
        if label not in self.models:
            self.models[label] = (StandInModel(self.completion_tokens, cap=cap, script=self.script), stands_for, prices)
        return self.models[label][0]

    def stand_in(self, label: str, scenario: Any) -> StandInModel:
        """The stand-in for ``label``, answering for ``scenario``'s ``[llm]``."""
        return self.model(label, model_identity(scenario), prices_of(scenario.llm.config), completion_cap(scenario.llm.config))

    def rows(self, stage_of: Callable[[str], str]) -> list[tuple[str, str, int, int, int, float | None]]:
        """(stage, model, calls, prompt tokens, completion tokens, cost) per stage and model."""
        out: dict[tuple[str, str], list[Any]] = {}
        priced: dict[tuple[str, str], tuple[float, float] | None] = {}
        for model, stands_for, prices in self.models.values():
            for purpose, (calls, prompt, completion) in model.rows.items():
                key = (stage_of(purpose), stands_for)
                row = out.setdefault(key, [0, 0, 0])
                row[0] += calls
                row[1] += prompt
                row[2] += completion
                priced[key] = prices
        return [(stage, model, c, pt, ct, cost_of(pt, ct, priced[(stage, model)]))
                for (stage, model), (c, pt, ct) in sorted(out.items())]

    def calls(self) -> int:
        return sum(calls for model, _, _ in self.models.values() for calls, _, _ in model.rows.values())

    def table(self, stage_of: Callable[[str], str]) -> list[str]:
        """The table's lines: per stage and model, then the total (cost: a dollar amount where
        every row has prices, else ``-``)."""
        rows = self.rows(stage_of)
        calls, prompt, completion = (sum(r[i] for r in rows) for i in (2, 3, 4))
        costs = [r[5] for r in rows]
        total = sum(c for c in costs if c is not None) if costs and all(c is not None for c in costs) else None
        header = ("stage", "model", "calls", "prompt tokens", "completion tokens", "cost")
        return format_table(header, [*rows, ("total", "", calls, prompt, completion, total)])

    def report(self, headline: str, assumptions: str, stage_of: Callable[[str], str] = lambda p: ".".join(p.split(".")[:2])) -> list[str]:
        """An estimate's lines: ``ESTIMATE: N LLM calls`` and ``headline``, the table, the
        ``assumptions``, and a hint where a model has no prices."""
        lines = [f"ESTIMATE: {self.calls():,} LLM calls {headline}; no model was called.", *self.table(stage_of), assumptions]
        if any(row[5] is None for row in self.rows(stage_of)):
            lines.append("no price for some models: set llm.price_prompt_per_1k and llm.price_completion_per_1k for a cost.")
        return lines


class EvalLLMs:
    """The clients of one evaluation (see the module docstring).

    ``scenario``: the resolved scenario whose ``[llm]`` is "the run's LLM" and whose middleware
    the clients share; ``resolve(overrides)``: the same scenario with overrides (a spec's);
    ``folder``: where the response cache lives; ``journal``: the store its ``llm_calls`` rows
    go to; ``resume``: the command that resumes the evaluation (named in a budget stop);
    ``dry_run``: estimate mode. ``world``: an open :class:`~townsquare.world.World` whose
    middleware, budget and LLM journal the clients share instead (an evaluation whose agents
    answer in that world)."""

    def __init__(self, scenario: Any, resolve: Callable[[list[str]], Any], folder: Path, *, journal: Path | None = None,
                 resume: str | None = None, dry_run: DryRun | None = None, world: Any = None, round: int = -1):
        self.scenario = scenario
        self.resolve = resolve
        self.folder = Path(folder)
        self.journal = journal
        self.resume = resume
        self.dry_run = dry_run
        self.world = world
        self.round = round
        self.rows: list[LLMCallRecord] = []
        self.providers: list[Any] = []
        self._middleware: list[Any] | None = None
        self._observers: list[Callable[[LLMCallRecord], None]] | None = None
        self._first: Accounting | None = None
        if world is not None:
            self._middleware = list(world.llm_middleware)
            self._observers = world.accounting.observers if world.accounting is not None else []
            world.services.resume_command = resume

    # ------------------------------------------------------------------ what answers a spec

    def scenario_for(self, spec: str | None) -> Any:
        return self.scenario if spec is None else self.resolve(spec_overrides(spec))

    def identity(self, spec: str | None) -> str:
        """``provider:model`` that answers ``spec`` (None: the run's LLM)."""
        return model_identity(self.scenario_for(spec))

    # ------------------------------------------------------------------ clients

    def _context(self, scenario: Any) -> BuildContext:
        services = Services(platform=None, embedder=None, run_dir=str(self.folder), resume_command=self.resume)  # type: ignore[arg-type]
        return BuildContext(services=services, seed=scenario.model.seed, base_dir=scenario.base_dir, scenario=scenario.model)

    def record(self, call: LLMCallRecord) -> None:
        if self.world is not None:
            self.world.journal.record(call)
        else:
            self.rows.append(call)

    def client(self, spec: str | None, name: str) -> LLMClient:
        """The client named ``name`` for ``spec`` (None: the run's LLM)."""
        scenario = self.scenario_for(spec)
        if scenario.llm is None:
            raise UsageError(f"{scenario.source}: no [llm] to answer with (add one, or --llm PROVIDER[:MODEL])")
        if self.dry_run is not None:
            stand_in = self.dry_run.stand_in(name, scenario)
            return LLMClient(stand_in.complete, model=stand_in.model, agent_id=name)
        if spec is None and self.world is not None and self.world.services.llm is not None:
            return self.world.services.llm.for_agent(name)
        ctx = self._context(scenario)
        provider = scenario.llm.spec.factory(scenario.llm.config, ctx)
        self.providers.append(provider)
        if self._middleware is None:
            self._middleware = [link.spec.factory(link.config, ctx) for link in self.scenario.llm_middleware]
        accounting = Accounting(provider, self.record, lambda: self.round, price=getattr(provider, "cost", None))
        if self._observers is None:  # the first client: the middleware binds to its accounting
            for link in self._middleware:
                if hasattr(link, "bind_accounting"):
                    link.bind_accounting(accounting)
            self._observers = accounting.observers
        else:  # the others' spending is observed by the same budget
            accounting.observers = self._observers

        def parse_failure(request: Any, answer: str, kind: str) -> None:
            self.record(LLMCallRecord(round=self.round, agent_id=request.agent_id, purpose=request.purpose, provider=provider.name,
                                      model=provider.model, status="parse_failure", error=f"unparsable answer: {answer[:200]!r}",
                                      kind=kind))

        client = LLMClient(compose(provider, [*self._middleware, accounting]), model=provider.model, on_parse_failure=parse_failure)
        return client.for_agent(name)

    def budget(self) -> Any | None:
        """The budget link these clients share (for other worlds of the same evaluation to
        share it too), or None."""
        if self._middleware is None:
            return None
        names = [link.spec.name for link in self.scenario.llm_middleware]
        for name, link in zip(names, self._middleware):
            if name == BUDGET:
                return link
        return None

    # ------------------------------------------------------------------ the journal

    def write_journal(self) -> dict[str, int]:
        """Write the rows gathered so far into ``journal``; returns how many, by status."""
        from townsquare.store import EventStore

        counts: dict[str, int] = {}
        rows, self.rows = self.rows, []
        for call in rows:
            counts[call.status] = counts.get(call.status, 0) + 1
        if rows and self.journal is not None and self.dry_run is None:
            store = EventStore(self.journal)
            try:
                store.write_now("llm_calls", [(c.round, c.agent_id, c.purpose, c.provider, c.model, c.status, c.prompt_tokens,
                                               c.completion_tokens, round(c.latency_ms, 3), c.cost, c.error, c.kind) for c in rows])
            finally:
                store.close()
        return counts

    async def aclose(self) -> None:
        """Write the journal, close the middleware this object built and every provider."""
        from townsquare.world import close_each

        try:
            self.write_journal()
        finally:
            built_here = self._middleware if self.world is None and self._middleware else []
            await close_each([*built_here, *self.providers])


def completion_cap(llm_config: Any) -> int | None:
    """The most completion tokens an ``[llm]`` gives whatever a request asks (the local model's
    ``max_tokens``), or None."""
    cap = getattr(llm_config, "max_tokens", None)
    return cap if isinstance(cap, int) and cap > 0 else None


def cached_answers(folder: Path) -> int:
    """How many answers the response caches (``llm_cache.sqlite``) in ``folder`` and its
    subfolders hold."""
    total = 0
    for path in sorted(Path(folder).rglob("llm_cache.sqlite")) if Path(folder).is_dir() else []:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            total += db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        except sqlite3.Error:
            pass
        finally:
            db.close()
    return total


def calls_line(counts: dict[str, int], new: int) -> str:
    """The journal's rows by status and what the providers answered this time (``new``: the
    answers the caches gained), the rest from the cache."""
    total = sum(counts.values())
    replayed = max(0, total - counts.get("parse_failure", 0) - counts.get("error", 0) - new)
    by_status = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
    return f"{total} LLM calls ({by_status}), {new} answered by the model, {replayed} from the cache"


class EvalSimulation:
    """A scenario's world opened for an evaluation in ``folder`` and never played
    (:meth:`townsquare.world.World.open`): its response cache ``llm_cache.sqlite`` and its calls'
    ``llm_calls`` rows (``events.sqlite``) live there, so the same evaluation again replays from
    the cache. ``build(state, round)`` restores the agents from a checkpoint's ``state`` (its
    ``llm`` part left out: the cache here is the evaluation's own) with the clock at ``round``;
    hooks that observe a run's LLM calls are not told of these (an evaluation is no run); a
    budget stop names ``resume``.

    ``llm_provider``: a stand-in (``--estimate``: no middleware is built); ``shared_budget``: the
    evaluation's one budget link, which replaces the scenario's own."""

    def __init__(self, scenario: Any, plugins: Any, folder: Path, *, llm_provider: Any = None, shared_budget: Any = None,
                 dry_run: bool = False):
        self.scenario, self.plugins, self.folder = scenario, plugins, Path(folder)
        self.llm_provider, self.shared_budget, self.dry_run = llm_provider, shared_budget, dry_run
        self.world: Any = None
        self.round = 0

    async def build(self, state: dict[str, Any] | None = None, round: int = 0, resume: str | None = None) -> Any:
        """Open the world (see the class docstring); returns it."""
        from townsquare.world import World

        scenario, extra = self.scenario, []
        if self.dry_run:
            scenario = without_middleware(scenario)
        elif self.shared_budget is not None:  # the evaluation's one budget counts these calls too
            scenario, extra = without_middleware(scenario, keep=lambda name: name != BUDGET), [self.shared_budget]
        (self.folder / "checkpoints").mkdir(parents=True, exist_ok=True)
        self.round = round
        self.world = await World.open(scenario, self.folder, state=state, round=round, llm_provider=self.llm_provider,
                                      llm_middleware=extra, resume_command=resume)
        return self.world

    def restore(self, state: dict[str, Any] | None, round: int) -> None:
        """The built world set to a checkpoint's ``state`` (None: as it is), its clock at ``round``
        (:meth:`townsquare.world.World.question_at`)."""
        self.round = round
        self.world.question_at(round, state)

    def context(self, agent: Any) -> Any:
        """The step context of ``agent`` at the evaluation's round."""
        return self.world.context(agent, self.round)

    def write_calls(self) -> dict[str, int]:
        """Write the ``llm_calls`` rows gathered so far; returns how many, by status."""
        counts: dict[str, int] = {}
        for row in self.world.write_calls() if self.world is not None and not self.dry_run else []:
            counts[row[5]] = counts.get(row[5], 0) + 1
        return counts

    async def aclose(self) -> dict[str, int]:
        """Write the calls, close the world; returns the calls written, by status."""
        if self.world is None:
            return {}
        try:
            return self.write_calls()
        finally:
            await self.world.aclose()


#: the scenario of an evaluation that grades answers produced elsewhere (``--answers``): no agent
#: of it answers; it carries the LLM settings its judges start from (``--set llm.*`` reaches every
#: ``PROVIDER[:MODEL]`` spec, ``--set plugins.*`` the middleware: cache, budget, retries)
SETTINGS_SCENARIO = {"name": "answers", "rounds": 1, "populations": [
    {"name": "answers", "count": 1, "personas": {"name": "inline", "items": [{"name": "answers", "sentences": ["none"]}]}}]}


def settings_scenario(overrides: Sequence[str], plugins: Any) -> tuple[Any, Callable[[list[str]], Any]]:
    """:data:`SETTINGS_SCENARIO` resolved with ``overrides``, and how to resolve it with more
    (a judge's spec: :func:`spec_overrides`)."""
    from townsquare.launch.scenario_files import load_scenario

    scenario = load_scenario(SETTINGS_SCENARIO, list(overrides), plugins)
    return scenario, lambda more: load_scenario(SETTINGS_SCENARIO, [*overrides, *more], plugins)


def without_middleware(scenario: Any, keep: Callable[[str], bool] = lambda name: False) -> Any:
    """``scenario`` with only the middleware links ``keep`` accepts (by name): a dry run keeps
    none; a design that shares an evaluation's budget keeps all but the budget."""
    return replace(scenario, llm_middleware=[link for link in scenario.llm_middleware if keep(link.spec.name)])
