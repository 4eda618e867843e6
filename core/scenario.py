"""Scenarios: TOML files that say what a run is.

A scenario names the platform, recommender, LLM, embedder, clock, activity model, seed,
rounds and populations; per population, which component fills each agent slot (or ``auto``);
and a ``[plugins.NAME]`` section per plugin, validated against that plugin's config model.
``--set dotted.key=value`` overrides any key before validation (reading files and overrides:
:mod:`townsquare.launch.scenario_files`; this module validates and resolves).

Every problem is reported as one line naming the file, the key and what was expected
(:class:`townsquare.errors.ScenarioError`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ComponentError, ScenarioError
from .persona import name_problem
from .slots import check_resolved
from .specs import AGENT_SLOTS, ALL_SETTINGS, REQUIRED_AGENT_SLOTS, ComponentSpec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ComponentTable(BaseModel):
    """``[platform]``, ``[recommender]``, ``[llm]``...: ``name`` plus that component's settings."""

    model_config = ConfigDict(extra="allow")
    name: str

    def settings(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class ClockConfig(_Strict):
    start: datetime = datetime(2024, 1, 1, 8, 0)
    minutes_per_round: int = Field(60, gt=0)


class ActivityConfig(_Strict):
    """Activity levels are drawn from a Pareto distribution (RecAgent eq. 1, Zhou et al. §3.2.3).
    A level is the expected number of active sessions per simulated day; ``hourly`` (24
    weights from 0:00, scaled to mean 1) spreads them over the day (None: evenly)."""

    model: Literal["pareto", "always"] = "pareto"
    alpha: float = Field(2.0, gt=0)
    x_min: float = Field(1.0, gt=0)
    hourly: list[Annotated[float, Field(ge=0)]] | None = Field(None, min_length=24, max_length=24)


class LimitsConfig(_Strict):
    """Upper bounds on sizes, so a typo (``count = 1000000000``) is an error at once instead of
    a MemoryError minutes later. Raise them here when a study really is that large."""

    machinery_settings: ClassVar = ALL_SETTINGS
    max_agents: int = Field(100_000, gt=0)
    max_rounds: int = Field(100_000, gt=0)
    #: persona files (JSON Lines, Personachat) larger than this many MB are refused
    max_persona_file_mb: float = Field(100.0, gt=0)
    #: one persona's sentences and fields, as JSON, longer than this are refused (a persona is
    #: put into prompts; a 20 MB one is a mistake, not a character)
    max_persona_chars: int = Field(20_000, gt=0)
    #: persona and population names longer than this are refused
    max_name_length: int = Field(200, gt=0)


def limits_of(ctx: Any) -> LimitsConfig:
    """The ``[limits]`` of the scenario a component is built for (a ``BuildContext``); the
    defaults when it is built outside a run."""
    return getattr(getattr(ctx, "scenario", None), "limits", None) or LimitsConfig()


class EngineConfig(_Strict):
    #: where and how fast turns run, never what they do (the same event log on any backend)
    machinery_settings: ClassVar = ALL_SETTINGS
    concurrency: int = Field(64, gt=0)
    checkpoint_every: int = Field(1, gt=0)
    #: how many of the newest checkpoints to keep; 0 keeps every one (``townsquare branch``
    #: can start from any round that has a checkpoint)
    keep_checkpoints: int = Field(3, ge=0)
    #: where the agents' turns run: ``local`` (this process, under asyncio), ``ray`` (agents
    #: sharded over Ray actors; the same event log, see :mod:`townsquare.scaleout.ray_backend`),
    #: or a name another plugin offers (``townsquare_engine_backend``)
    backend: str = Field("local", pattern=r"^[a-z][a-z0-9_]*$")
    #: with ``backend = "ray"``: the cluster to join (``ray://HOST:10001``, ``auto``); None
    #: starts a local one, or joins the one this process already started
    ray_address: str | None = None
    #: with ``backend = "ray"``: how many shard actors (None: one per CPU of the cluster)
    shards: int | None = Field(None, gt=0)

    @field_validator("backend")
    @classmethod
    def _ray_installed(cls, value: str) -> str:
        import importlib.util

        if value == "ray" and importlib.util.find_spec("ray") is None:
            raise ValueError("Ray is not installed: pip install 'townsquare[ray]'")
        return value


class FeedStage(_Strict):
    """From ``start_round`` until ``end_round`` (exclusive; None: to the end) this population's
    feeds show only posts by the populations in ``authors`` (Zhou et al. §4.1: regular agents
    first browse initial agents' posts, then each other's)."""

    start_round: int = Field(0, ge=0)
    end_round: int | None = Field(None, ge=0)
    authors: list[str]


class PopulationConfig(_Strict):
    name: str
    count: int = Field(ge=1)
    personas: ComponentTable
    slots: dict[str, str] = Field(default_factory=dict)
    start_round: int = Field(0, ge=0)
    end_round: int | None = Field(None, ge=0)
    feed_stages: list[FeedStage] = Field(default_factory=list)
    #: this population's activity model, instead of the scenario's [activity]
    activity: ActivityConfig | None = None
    #: per-plugin settings for this population only, merged over [plugins.NAME]
    config: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("slots", mode="before")
    @classmethod
    def _flatten_slots(cls, value: Any) -> Any:
        """TOML dotted keys (``persona.knowledge = "x"``) and ``--set ...slots.persona.knowledge=x``
        arrive as nested tables: flatten them back to slot names."""
        if not isinstance(value, dict):
            return value
        flat: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(item, dict):
                for sub, inner in cls._flatten_slots(item).items():
                    flat[f"{key}.{sub}"] = inner
            else:
                flat[key] = item
        return flat


class ScenarioModel(_Strict):
    machinery_settings: ClassVar = frozenset({"name"})
    name: str = "run"
    seed: int = Field(0, ge=0, lt=2**63)
    rounds: int = Field(gt=0)
    limits: LimitsConfig = LimitsConfig()
    clock: ClockConfig = ClockConfig()
    activity: ActivityConfig = ActivityConfig()
    engine: EngineConfig = EngineConfig()
    # Left out, platform/recommender/embedder are ``auto``: the highest-priority enabled one.
    platform: ComponentTable | None = None
    recommender: ComponentTable | None = None
    embedder: ComponentTable | None = None
    llm: ComponentTable | None = None
    knowledge: ComponentTable | None = None
    # Left out: every enabled metric whose priority is above 0 (the defaults).
    metrics: list[str] | None = None
    interventions: list[str] = Field(default_factory=list)
    populations: list[PopulationConfig] = Field(min_length=1)
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)


# --------------------------------------------------------------------------- validating


def validate_scenario(data: dict[str, Any], source: str) -> ScenarioModel:
    try:
        model = strict_validate(ScenarioModel, data, source)
    except ValidationError as exc:
        raise _first_error(exc, source, ScenarioModel) from None
    check_bounds(model, source)
    return model


def strict_validate(model: type[BaseModel], data: Any, source: str, prefix: str = "") -> Any:
    """``model`` from scenario data without guessing: ``rounds = true``, ``count = "5"`` and
    ``smoothing = "yes"`` are errors, not 1, 5 and True (pydantic's strict mode as for JSON,
    so a date or a path may still be a string, as in a run's manifest); a number that is not
    finite (``x_min = inf``) is an error too, naming its key."""
    _check_finite(data, source, prefix)
    return model.model_validate_json(json.dumps(data, default=_json_value), strict=True)


def _check_finite(value: Any, source: str, key: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ScenarioError(source, key or "(top)", f"not a finite number (got {value!r})")
    if isinstance(value, dict):
        for name, item in value.items():
            _check_finite(item, source, f"{key}.{name}" if key else str(name))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, source, f"{key}[{i}]")


def _json_value(value: Any) -> Any:
    """TOML's dates and times as ISO text (what a manifest holds), anything else as text."""
    return value.isoformat() if isinstance(value, (datetime, date, time)) else str(value)


def check_bounds(model: ScenarioModel, source: str) -> None:
    """Sizes within ``[limits]`` and round ranges that make sense, each a one-line error."""
    limits = model.limits
    raise_it = "raise it in the scenario's [limits] table if you mean it"
    if model.rounds > limits.max_rounds:
        raise ScenarioError(source, "rounds", f"{model.rounds} is above limits.max_rounds = {limits.max_rounds} ({raise_it})")
    total = sum(pop.count for pop in model.populations)
    if total > limits.max_agents:
        raise ScenarioError(source, "populations", f"{total} agents in all is above limits.max_agents = {limits.max_agents} ({raise_it})")
    for i, pop in enumerate(model.populations):
        key = f"populations[{i}]"
        problem = name_problem(pop.name, limits.max_name_length)
        if problem:
            raise ScenarioError(source, f"{key}.name", problem)
        spans = [(key, pop.start_round, pop.end_round)]
        spans += [(f"{key}.feed_stages[{s}]", st.start_round, st.end_round) for s, st in enumerate(pop.feed_stages)]
        for where, start, end in spans:
            if start >= model.rounds:
                raise ScenarioError(source, f"{where}.start_round", f"{start} is past the last round ({model.rounds - 1}; rounds count from 0)")
            if end is not None and end <= start:
                raise ScenarioError(source, f"{where}.end_round", f"{end} is not after start_round {start} (end_round is exclusive)")


def _first_error(exc: ValidationError, source: str, model: type[BaseModel] | None = None, prefix: str = "") -> ScenarioError:
    err = exc.errors()[0]
    key = prefix + _format_loc(err["loc"])
    if err["type"] == "extra_forbidden":
        problem = "unknown key"
        allowed = _allowed_keys(model, err["loc"][:-1]) if model else None
        if allowed:
            problem += f" (expected one of: {', '.join(allowed)})"
    elif err["type"] == "missing":
        problem = "missing required key"
    else:
        problem = f"{err['msg'][0].lower()}{err['msg'][1:]} (got {err.get('input')!r})"
    return ScenarioError(source, key, problem)


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field_info = getattr(current, "model_fields", {}).get(part)
        if field_info is None:
            return None
        annotation = field_info.annotation
        args = getattr(annotation, "__args__", ())
        candidates = [annotation, *args]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if current is None:
            return None
    return sorted(getattr(current, "model_fields", {}))


# --------------------------------------------------------------------------- resolution


@dataclass
class Choice:
    """A component chosen for a slot, with its validated config."""

    slot: str
    spec: ComponentSpec
    config: Any


@dataclass
class ResolvedPopulation:
    config: PopulationConfig
    personas: Choice
    slots: dict[str, Choice]


@dataclass
class ResolvedScenario:
    model: ScenarioModel
    source: str
    base_dir: str
    data: dict[str, Any]
    platform: Choice
    recommender: Choice
    embedder: Choice
    llm: Choice | None
    knowledge: Choice | None
    metrics: list[Choice]
    populations: list[ResolvedPopulation]
    interventions: list[Choice] = field(default_factory=list)
    llm_middleware: list[Choice] = field(default_factory=list)
    #: True when the scenario has no [llm] table and the provider was chosen automatically.
    llm_auto: bool = False
    #: the installed datasets ``data:`` paths name, with what their install recorded (for the manifest)
    datasets: dict[str, Any] = field(default_factory=dict)

    def slot_table(self) -> list[dict[str, str]]:
        rows = []
        for scope, choice in (("run", self.platform), ("run", self.recommender), ("run", self.embedder), ("run", self.llm), ("run", self.knowledge)):
            if choice is not None:
                rows.append({"scope": scope, "slot": choice.slot, "component": choice.spec.name, "plugin": choice.spec.plugin})
        for link in self.llm_middleware:
            rows.append({"scope": "run", "slot": "llm_middleware", "component": link.spec.name, "plugin": link.spec.plugin})
        for metric in self.metrics:
            rows.append({"scope": "run", "slot": "metric", "component": metric.spec.name, "plugin": metric.spec.plugin})
        for intervention in self.interventions:
            rows.append({"scope": "run", "slot": "intervention", "component": intervention.spec.name, "plugin": intervention.spec.plugin})
        for pop in self.populations:
            name = pop.config.name
            rows.append({"scope": name, "slot": "personas", "component": pop.personas.spec.name, "plugin": pop.personas.spec.plugin})
            for slot in AGENT_SLOTS:
                choice = pop.slots.get(slot)
                rows.append({
                    "scope": name, "slot": slot,
                    "component": choice.spec.name if choice else "-",
                    "plugin": choice.spec.plugin if choice else "-",
                })
        return rows


def _pick_slot(registry: Any, plugins: Any, source: str, key: str, slot: str, wanted: str) -> ComponentSpec | None:
    """The component a population names for ``slot``: a name, ``auto`` or ``none``."""
    if wanted == "none":
        if slot in REQUIRED_AGENT_SLOTS:
            raise ScenarioError(source, f"{key}.slots.{slot}", f"slot {slot} cannot be 'none'")
        return None
    if wanted == "auto":
        spec = registry.auto(slot)
        if spec is None and slot in REQUIRED_AGENT_SLOTS:
            raise ScenarioError(source, f"{key}.slots.{slot}", f"no enabled plugin provides a component for {slot}")
        return spec
    try:
        return registry.get(slot, wanted)
    except ComponentError as exc:  # the message says which plugins are disabled or failed
        raise ScenarioError(source, f"{key}.slots.{slot}", str(exc)) from None


#: how a scenario value names a path in an installed dataset (``townsquare_resolve_data_references``)
DATA_PREFIX = "data:"


def first_data_reference(value: Any, key: str = "") -> str | None:
    """The key of the first string in scenario ``value`` that starts with ``data:``, or None."""
    if isinstance(value, dict):
        keys = (first_data_reference(v, f"{key}.{k}" if key else str(k)) for k, v in value.items())
    elif isinstance(value, list):
        keys = (first_data_reference(v, f"{key}[{i}]") for i, v in enumerate(value))
    else:
        return key if isinstance(value, str) and value.startswith(DATA_PREFIX) else None
    return next((k for k in keys if k is not None), None)


def resolve_datasets(data: dict[str, Any], source: str, plugins: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``data`` with its ``data:`` paths resolved, and the datasets they name, by the plugin that
    answers ``townsquare_resolve_data_references`` (the built-in ``data``)."""
    answer = plugins.hook.townsquare_resolve_data_references(data=data, source=source)
    if answer is not None:
        return answer
    key = first_data_reference(data)
    if key is not None:
        raise ScenarioError(source, key, "a data: path needs the 'data' plugin, which is not loaded (is it disabled with -p no:data?)")
    return data, {}


def resolve(data: dict[str, Any], source: str, base_dir: str, plugins: Any) -> ResolvedScenario:
    """``data`` (a scenario's content, overrides applied) checked and resolved against the loaded
    ``plugins``: every slot filled with its component and that component's validated settings.
    ``base_dir``: where the scenario's relative paths start."""
    with_paths, datasets = resolve_datasets(data, source, plugins)
    model = validate_scenario(with_paths, source)
    _check_plugin_sections(model, plugins, source)
    chooser = _Chooser(plugins.registry, dict(model.plugins), source)
    choose = chooser.choose
    platform = choose("platform", "platform", model.platform)
    recommender = choose("recommender", "recommender", model.recommender)
    embedder = choose("embedder", "embedder", model.embedder)
    llm = choose("llm", "llm", model.llm) if model.llm else None
    knowledge = choose("knowledge", "knowledge", model.knowledge) if model.knowledge else None
    registry = plugins.registry
    if model.metrics is None:
        default_metrics = sorted(s.name for s in registry.by_slot.get("metric", {}).values() if s.priority > 0)
        metrics = [choose("metric", "metrics", ComponentTable(name=m)) for m in default_metrics]
    else:
        metrics = [choose("metric", f"metrics[{i}]", ComponentTable(name=m)) for i, m in enumerate(model.metrics)]
    # a listed intervention whose plugin is disabled (-p no:NAME) is left out: the ablation
    interventions = [choose("intervention", f"interventions[{i}]", ComponentTable(name=n)) for i, n in enumerate(model.interventions)
                     if registry.inactive.get(n) != "disabled" or n in registry.by_slot.get("intervention", {})]
    populations: list[ResolvedPopulation] = []
    for i, pop in enumerate(model.populations):
        if any(p.config.name == pop.name for p in populations):
            raise ScenarioError(source, f"populations[{i}].name", f"duplicate population name {pop.name!r}")
        populations.append(_population(chooser, plugins, model, i, pop))

    llm_auto = False
    needs_llm = [c.spec for p in populations for c in (p.personas, *p.slots.values()) if c.spec.needs_llm]
    if llm is None and needs_llm:
        if registry.auto("llm") is None:
            raise ScenarioError(source, "llm", f"component {needs_llm[0].name!r} needs an LLM and none is installed: "
                                "add an [llm] table, use --llm openai:MODEL, or pip install 'townsquare[local]'")
        llm, llm_auto = choose("llm", "llm", None), True
    middleware = []
    if llm is not None:
        links = sorted(registry.by_slot.get("llm_middleware", {}).values(), key=lambda s: (s.order, s.name))
        middleware = [Choice("llm_middleware", spec, chooser.config_for(spec, registry.section_key(spec), {})) for spec in links]

    resolved = ResolvedScenario(
        model=model, source=source, base_dir=base_dir, data=data, datasets=datasets,
        platform=platform, recommender=recommender, embedder=embedder, llm=llm, knowledge=knowledge,
        metrics=metrics, populations=populations, llm_middleware=middleware, llm_auto=llm_auto, interventions=interventions,
    )
    check_resolved(resolved)  # slot protocols of class factories, before anything is written
    return resolved


def _check_plugin_sections(model: ScenarioModel, plugins: Any, source: str) -> None:
    """Every ``[plugins.NAME]`` names an installed plugin, and a loaded one's section is valid."""
    for name, section in model.plugins.items():
        info = plugins.infos.get(name)
        if info is None:
            raise ScenarioError(source, f"plugins.{name}", f"no plugin named {name!r} is installed (installed: {', '.join(sorted(plugins.infos))})")
        problem = plugins.registry.check_section(name, section) if info.status == "loaded" else None
        if problem:
            raise ScenarioError(source, f"plugins.{name}", problem)


class _Chooser:
    """Picks a slot's component by name (or ``auto``) and validates its settings: the
    ``[plugins.NAME]`` section, a population's ``config``, then the table's own keys."""

    def __init__(self, registry: Any, sections: dict[str, Any], source: str):
        self.registry, self.sections, self.source = registry, sections, source

    def config_for(self, spec: ComponentSpec, key: str, settings: dict[str, Any], population: PopulationConfig | None = None) -> Any:
        registry, source = self.registry, self.source
        local = registry.settings_for(spec, population.config) if population else {}
        merged = {**registry.settings_for(spec, self.sections), **local, **settings}
        if spec.config_model is None:
            if settings:
                raise ScenarioError(source, f"{key}.{next(iter(settings))}", f"{spec.slot} {spec.name!r} takes no settings")
            return None
        section = registry.section_key(spec) if not settings else key
        try:
            return strict_validate(spec.config_model, merged, source, section)
        except ValidationError as exc:
            raise _first_error(exc, source, spec.config_model, prefix=f"{section}.") from None

    def choose(self, slot: str, key: str, table: ComponentTable | None, population: PopulationConfig | None = None) -> Choice:
        table = table or ComponentTable(name="auto")
        if table.name == "auto":
            spec = self.registry.auto(slot)
            if spec is None:
                raise ScenarioError(self.source, f"{key}.name", f"no enabled plugin provides a component for {slot}")
        else:
            try:
                spec = self.registry.get(slot, table.name)
            except ComponentError as exc:
                raise ScenarioError(self.source, f"{key}.name", str(exc)) from None
        return Choice(slot, spec, self.config_for(spec, key, table.settings(), population))


def _population(chooser: _Chooser, plugins: Any, model: ScenarioModel, i: int, pop: PopulationConfig) -> ResolvedPopulation:
    """Population ``i``: its persona source and every agent slot's component (a name, ``none``,
    ``auto``; a slot left out: :func:`slot_fallback`)."""
    registry, source, key = chooser.registry, chooser.source, f"populations[{i}]"
    unknown = set(pop.slots) - set(AGENT_SLOTS)
    if unknown:
        raise ScenarioError(source, f"{key}.slots.{sorted(unknown)[0]}", f"unknown slot (expected one of: {', '.join(AGENT_SLOTS)})")
    personas = chooser.choose("persona_source", f"{key}.personas", pop.personas, pop)
    slots: dict[str, Choice] = {}
    policy_spec = _pick_slot(registry, plugins, source, key, "policy", pop.slots.get("policy", "auto"))
    for slot in AGENT_SLOTS:
        if slot == "policy":
            spec = policy_spec
        elif slot in pop.slots and pop.slots[slot] != "auto":
            spec = _pick_slot(registry, plugins, source, key, slot, pop.slots[slot])
            if spec is not None and spec.needs_knowledge and model.knowledge is None:
                raise ScenarioError(source, f"{key}.slots.{slot}", f"{spec.name!r} needs a knowledge source: add a [knowledge] table")
        else:
            spec = slot_fallback(registry, slot, policy_spec, named_auto=slot in pop.slots, knowledge=model.knowledge is not None)
        if spec is not None:
            slots[slot] = Choice(slot, spec, chooser.config_for(spec, registry.section_key(spec), {}, pop))
    names = {p.name for p in model.populations}
    for s_i, stage in enumerate(pop.feed_stages):
        unknown_authors = [a for a in stage.authors if a not in names]
        if unknown_authors:
            raise ScenarioError(source, f"{key}.feed_stages[{s_i}].authors", f"no population named {unknown_authors[0]!r} (populations: {', '.join(sorted(names))})")
    for plugin_name in pop.config:
        if plugin_name not in plugins.infos:
            raise ScenarioError(source, f"{key}.config.{plugin_name}", f"no plugin named {plugin_name!r} is installed")
    return ResolvedPopulation(pop, personas, slots)


def slot_fallback(registry: Any, slot: str, policy_spec: ComponentSpec | None, *, named_auto: bool, knowledge: bool) -> ComponentSpec | None:
    """The component of an agent slot the scenario leaves to the policy (``named_auto``: it says
    ``auto``): the policy's preferred one (``uses``), else, when that one is disabled or needs a
    knowledge source the scenario lacks (and the policy accepts stand-ins), the documented
    fallback: the enabled stand-ins (or, for ``auto``, any component) by priority, then name. None
    when the policy uses no component there and the scenario names none."""
    uses = getattr(policy_spec, "uses", {})
    if slot not in uses and not named_auto:
        return None
    preferred = uses.get(slot)
    candidates = [registry.by_slot.get(slot, {}).get(preferred)] if preferred else []
    if not preferred or getattr(policy_spec, "stand_ins", True):
        candidates += sorted((c for c in registry.by_slot.get(slot, {}).values() if c.stand_in or named_auto),
                             key=lambda c: (-c.priority, c.name))
    return next((c for c in candidates if c is not None and (knowledge or not c.needs_knowledge)), None)
