"""Assembling a run: from a resolved scenario to the services, platform, metrics and agents.

:func:`assemble` builds, in this order, the embedder, the LLM client (provider, configured
middleware, the accounting link), the knowledge source, the recommender, the platform and
the metrics, checks the run-wide slots, then every population: its personas, each agent with
its slot components (checked against the slot protocols) and its platform account. The round
loop (:mod:`townsquare.engine`) plays the result; it builds nothing itself.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .activity import sample_activity
from .components import Agent, BuildContext, Services
from .embedding import EmbeddingCache
from .errors import ComponentError
from .llm import Accounting, LLMCallRecord, LLMClient, compose, current_issue
from .random_streams import RandomStreams
from .scenario import ResolvedScenario
from .slots import check_agent, check_run_wide
from .specs import AGENT_SLOTS


@dataclass
class Assembly:
    """What a run is made of."""

    services: Services
    metrics: list[tuple[str, Any]]
    agents: list[Agent]
    #: one ``agents`` table row per agent
    agent_rows: list[tuple]
    #: population -> [(start_round, end_round, authors)]: whose posts its feeds may show
    stages: dict[str, list[tuple[int, int | None, frozenset[str]]]]
    llm_middleware: list[Any] = field(default_factory=list)
    provider: Any = None
    accounting: Accounting | None = None
    #: every agent's random numbers (:mod:`townsquare.random_streams`)
    streams: RandomStreams | None = None
    #: whether only some agents' components were built (``assemble(only=...)``)
    partial: bool = False


async def assemble(
    scenario: ResolvedScenario,
    run_path: str,
    *,
    llm_provider: Any = None,
    llm_middleware: list[Any] = (),  # type: ignore[assignment]
    on_llm_call: Callable[[LLMCallRecord], None],
    current_round: Callable[[], int],
    only: Callable[[int], bool] | None = None,
) -> Assembly:
    """Build everything ``scenario`` names. ``llm_provider`` replaces the scenario's provider
    (replay, estimate); ``llm_middleware`` links go inside the configured ones; ``on_llm_call``
    hears every call and parse failure (building components may call the LLM already).

    ``only(index)``: the agents whose components are built (a Ray shard's own; see
    :mod:`townsquare.ray_shard`); the others get their account, persona and index but no
    components and no ``agents`` table row. Ignored on a platform that hands agents to each
    other (one with ``members``: RecAgent's chat, the town), where every agent is built."""
    model = scenario.model
    seed = model.seed

    def ctx(services: Services | None = None, **extra: Any) -> BuildContext:
        return BuildContext(services=services, seed=seed, base_dir=scenario.base_dir, scenario=model, **extra)

    embedder = EmbeddingCache(scenario.embedder.spec.factory(scenario.embedder.config, ctx()))
    services = Services(platform=None, embedder=embedder, run_dir=run_path)  # type: ignore[arg-type]
    built = Assembly(services=services, metrics=[], agents=[], agent_rows=[], stages={}, llm_middleware=list(llm_middleware))
    services.llm = build_llm(scenario, ctx(services), built, llm_provider, on_llm_call, current_round)
    if scenario.knowledge:
        services.knowledge = scenario.knowledge.spec.factory(scenario.knowledge.config, ctx(services))
    services.recommender = scenario.recommender.spec.factory(scenario.recommender.config, ctx(services))
    services.platform = scenario.platform.spec.factory(scenario.platform.config, ctx(services))
    built.metrics = [(m.spec.name, m.spec.factory(m.config, ctx(services))) for m in scenario.metrics]
    check_run_wide(scenario, services, built.metrics)
    noted: set = set()

    if only is not None and hasattr(services.platform, "members"):
        only = None
    built.partial = only is not None
    index = 0
    built.streams = streams = RandomStreams(seed, sum(pop.config.count for pop in scenario.populations))
    for p, pop in enumerate(scenario.populations):
        cfg = pop.config
        source = pop.personas.spec.factory(pop.personas.config, ctx(services, population=cfg.name))
        personas = source.load(cfg.count, np.random.default_rng([seed, 1, p]))
        if inspect.isawaitable(personas):
            personas = await personas
        if len(personas) != cfg.count:
            raise ComponentError(f"populations[{p}].personas: source {pop.personas.spec.name!r} gave {len(personas)} personas, expected {cfg.count}")
        levels = activity_levels(seed, cfg.count, p, cfg.activity or model.activity)
        width = max(4, len(str(cfg.count)))
        for k, persona in enumerate(personas):
            agent = Agent(
                id=f"{cfg.name}-{k + 1:0{width}d}", index=index, population=cfg.name, persona=persona,
                activity=float(levels[k]), rng=streams.view(index),
                start_round=cfg.start_round, end_round=cfg.end_round,
            )
            index += 1
            built.agents.append(agent)
            if only is not None and not only(agent.index):
                await services.platform.register_account(agent.id, persona.name, " ".join(persona.sentences[:2]))
                continue
            for slot in AGENT_SLOTS:
                choice = pop.slots.get(slot)
                if choice is not None:
                    agent.components[slot] = choice.spec.factory(choice.config, ctx(services, agent=agent, population=cfg.name))
            check_agent(agent, pop.slots, f"populations[{p}] ({cfg.name})", noted)
            await services.platform.register_account(agent.id, persona.name, " ".join(persona.sentences[:2]))
            # field order is kept: Persona.text follows it, and the report rebuilds the text
            # Persona.to_dict's fields, without dataclasses.asdict's deep copy (a million agents)
            persona_json = json.dumps({"name": persona.name, "sentences": persona.sentences, "fields": persona.fields}, ensure_ascii=False)
            built.agent_rows.append((agent.id, agent.index, cfg.name, persona.name, persona_json, agent.activity, cfg.start_round, cfg.end_round))
    members: dict[str, list[str]] = {}
    for agent in built.agents:
        members.setdefault(agent.population, []).append(agent.id)
    built.stages = {
        pop.config.name: [(st.start_round, st.end_round, frozenset(a for name in st.authors for a in members.get(name, ())))
                          for st in pop.config.feed_stages]
        for pop in scenario.populations
    }
    return built


def activity_levels(seed: int, count: int, population_index: int, activity: Any) -> np.ndarray:
    """Each agent's activity level: infinite for ``always``, else Pareto draws (see :mod:`.activity`)."""
    if activity.model == "always":
        return np.full(count, np.inf)
    rng = np.random.default_rng([seed, 3, population_index])
    return sample_activity(rng, count, activity.alpha, activity.x_min)


def build_llm(scenario: ResolvedScenario, build_ctx: BuildContext, built: Assembly, provider: Any,
               on_llm_call: Callable[[LLMCallRecord], None], current_round: Callable[[], int]) -> LLMClient | None:
    """The run's LLM client: ``provider`` (else the scenario's), the configured middleware
    around it, the accounting link innermost; what it built is kept in ``built``."""
    if provider is None and scenario.llm is not None:
        provider = scenario.llm.spec.factory(scenario.llm.config, build_ctx)
    if provider is None:
        return None
    built.provider = provider
    configured = [link.spec.factory(link.config, build_ctx) for link in scenario.llm_middleware]
    built.llm_middleware = configured + built.llm_middleware
    accounting = Accounting(provider, on_llm_call, current_round, price=getattr(provider, "cost", None))
    built.accounting = accounting
    for link in built.llm_middleware:
        if hasattr(link, "bind_accounting"):
            link.bind_accounting(accounting)
    chain = [*built.llm_middleware, accounting]

    def on_parse_failure(request: Any, answer: str, kind: str) -> None:
        on_llm_call(LLMCallRecord(
            round=current_round(), agent_id=request.agent_id, purpose=request.purpose, provider=provider.name,
            model=provider.model, status="parse_failure", error=f"unparsable answer: {answer[:200]!r}", kind=kind,
            mode=request.mode, issue=current_issue(),
        ))

    return LLMClient(compose(provider, chain), model=provider.model, on_parse_failure=on_parse_failure)
