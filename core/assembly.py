"""Assembling a run: from a resolved scenario to the services, platform, metrics and agents.

:func:`assemble` builds, in this order, the embedder, the LLM client (provider, configured
middleware, the accounting link), the knowledge source, the recommender, the platform and
the metrics, checks the run-wide slots, then every population: its personas, each agent with
its slot components (checked against the slot protocols) and its platform account. The round
loop (:mod:`townsquare.engine`) plays the result; it builds nothing itself.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .activity import sample_activity
from .components import Agent, BuildContext, Services
from .embedding import EmbeddingCache
from .errors import ComponentError
from .llm import Accounting, LLMCallRecord, LLMClient, compose, current_issue
from .persona import Persona
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
    #: population -> [(start_round, end_round, authors)]: whose posts its feeds may show
    stages: dict[str, list[tuple[int, int | None, frozenset[str]]]]
    llm_middleware: list[Any] = field(default_factory=list)
    #: the scenario's interventions, by name (:mod:`townsquare.interventions`)
    interventions: list[tuple[str, Any]] = field(default_factory=list)
    provider: Any = None
    accounting: Accounting | None = None
    #: every agent's random numbers (:mod:`townsquare.random_streams`)
    streams: RandomStreams | None = None
    #: whether only some agents' components were built (``assemble(components=False)`` or ``held``)
    partial: bool = False
    #: how many agents the run has, and each one's activity level by index (whether or not it was built)
    population: int = 0
    levels: Any = None


async def assemble(
    scenario: ResolvedScenario,
    run_path: str,
    *,
    llm_provider: Any = None,
    llm_middleware: list[Any] = (),  # type: ignore[assignment]
    on_llm_call: Callable[[LLMCallRecord], None],
    current_round: Callable[[], int],
    components: bool = True,
    held: dict[int, Persona] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> Assembly:
    """Build everything ``scenario`` names. ``llm_provider`` replaces the scenario's provider
    (replay, estimate); ``llm_middleware`` links go inside the configured ones; ``on_llm_call``
    hears every call and parse failure (building components may call the LLM already).

    Which agents are built (see :mod:`townsquare.scaleout.ray_backend`):

    * by default every agent, with its components and its platform account;
    * ``components=False`` (the Ray driver, whose shards hold the agents): every agent with its
      persona and account but no components, unless the platform hands agents to each other
      (one with ``members``: RecAgent's chat, the town), where every agent is built;
    * ``held`` (a Ray shard's own agents: index -> the persona the driver loaded): only these
      agents, with components; no persona source runs and no account is registered (the
      platform's state comes from the driver).

    The ``agents`` table's rows come from :func:`agent_rows`. ``on_phase(text)`` hears what is
    being built (a display's progress: loading the model, a population's personas and agents).

    ``built.partial`` says whether only some agents' components were built."""
    model = scenario.model
    seed = model.seed
    phase = on_phase or (lambda text: None)

    def ctx(services: Services | None = None, **extra: Any) -> BuildContext:
        return BuildContext(services=services, seed=seed, base_dir=scenario.base_dir, scenario=model, **extra)

    embedder = EmbeddingCache(scenario.embedder.spec.factory(scenario.embedder.config, ctx()))
    services = Services(platform=None, embedder=embedder, run_dir=run_path)  # type: ignore[arg-type]
    built = Assembly(services=services, metrics=[], agents=[], stages={}, llm_middleware=list(llm_middleware))
    services.llm = build_llm(scenario, ctx(services), built, llm_provider, on_llm_call, current_round)
    load = getattr(built.provider, "load", None)
    if callable(load) and on_phase is not None:  # a local model: load it now, said, not inside the first call
        phase(f"loading the model ({built.provider.name}: {built.provider.model})")
        await asyncio.to_thread(load)
    if scenario.knowledge:
        services.knowledge = scenario.knowledge.spec.factory(scenario.knowledge.config, ctx(services))
    services.recommender = scenario.recommender.spec.factory(scenario.recommender.config, ctx(services))
    services.platform = scenario.platform.spec.factory(scenario.platform.config, ctx(services))
    built.metrics = [(m.spec.name, m.spec.factory(m.config, ctx(services))) for m in scenario.metrics]
    built.interventions = [(i.spec.name, i.spec.factory(i.config, ctx(services))) for i in scenario.interventions]
    check_run_wide(scenario, services, built.metrics, built.interventions)
    noted: set = set()

    if not components and hasattr(services.platform, "members"):
        components = True
    built.partial = not components or held is not None
    built.population = total = sum(pop.config.count for pop in scenario.populations)
    built.streams = streams = RandomStreams(seed, total)
    built.levels = np.empty(total, dtype=np.float64)
    index = 0
    for p, pop in enumerate(scenario.populations):
        cfg = pop.config
        levels = activity_levels(seed, cfg.count, p, cfg.activity or model.activity)
        built.levels[index:index + cfg.count] = levels
        if held is not None:
            personas = [held.get(index + k) for k in range(cfg.count)]
        else:
            phase(f"personas of population {cfg.name!r} ({cfg.count}, {pop.personas.spec.name})")
            personas = await load_personas(pop, p, ctx(services, population=cfg.name), seed)
        if components:
            phase(f"agents of population {cfg.name!r}")
        ids = population_ids(cfg)
        for k, persona in enumerate(personas):
            if persona is None:  # another shard's agent
                index += 1
                continue
            agent = Agent(id=ids[k], index=index, population=cfg.name, persona=persona, activity=float(levels[k]),
                          rng=streams.view(index), start_round=cfg.start_round, end_round=cfg.end_round)
            index += 1
            built.agents.append(agent)
            if components:
                for slot in AGENT_SLOTS:
                    choice = pop.slots.get(slot)
                    if choice is not None:
                        agent.components[slot] = choice.spec.factory(choice.config, ctx(services, agent=agent, population=cfg.name))
                check_agent(agent, pop.slots, f"populations[{p}] ({cfg.name})", noted)
            if held is None:
                await services.platform.register_account(agent.id, persona.name, " ".join(persona.sentences[:2]))
    named = {name for pop in scenario.populations for st in pop.config.feed_stages for name in st.authors}
    members = {pop.config.name: population_ids(pop.config) for pop in scenario.populations if pop.config.name in named}
    built.stages = {
        pop.config.name: [(st.start_round, st.end_round, frozenset(a for name in st.authors for a in members.get(name, ())))
                          for st in pop.config.feed_stages]
        for pop in scenario.populations
    }
    return built


def agent_rows(agents: Iterable[Agent]) -> Iterator[tuple]:
    """The ``agents`` table's rows, made one at a time as the store takes them (a million
    persona texts are not held at once)."""
    for agent in agents:
        persona = agent.persona
        # field order is kept: Persona.text follows it, and the report rebuilds the text
        # Persona.to_dict's fields, without dataclasses.asdict's deep copy (a million agents)
        persona_json = json.dumps({"name": persona.name, "sentences": persona.sentences, "fields": persona.fields}, ensure_ascii=False)
        yield (agent.id, agent.index, agent.population, persona.name, persona_json, agent.activity, agent.start_round, agent.end_round)


async def load_personas(pop: Any, p: int, build_ctx: BuildContext, seed: int) -> list[Persona]:
    """Population ``p``'s personas from its persona source (exactly ``count`` of them)."""
    cfg = pop.config
    source = pop.personas.spec.factory(pop.personas.config, build_ctx)
    personas = source.load(cfg.count, np.random.default_rng([seed, 1, p]))
    if inspect.isawaitable(personas):
        personas = await personas
    if len(personas) != cfg.count:
        raise ComponentError(f"populations[{p}].personas: source {pop.personas.spec.name!r} gave {len(personas)} personas, expected {cfg.count}")
    return personas


def population_ids(cfg: Any) -> list[str]:
    """The ids of a population's agents: ``NAME-0001``, ... (at least 4 digits)."""
    width = max(4, len(str(cfg.count)))
    return [f"{cfg.name}-{k + 1:0{width}d}" for k in range(cfg.count)]


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

    return LLMClient(compose(provider, chain), model=provider.model, on_parse_failure=on_parse_failure, current_round=current_round)
