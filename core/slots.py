"""Slot protocols, checked when a run is built, and the lifecycle calls components may observe.

Every slot has a declared protocol (:data:`SLOT_PROTOCOLS`). When the engine builds a
component it checks the object against its slot's protocol and against what the components
beside it *require* of their siblings (``ComponentSpec.requires``: Zhou et al.'s policy needs
``memory.short_term`` to be a ``DuplicateCheck`` and an ``EngagementLog``, protocols its
package declares). A missing method is one line naming the
component, its plugin, the slot and the method, exit status 2, before the first round::

    populations[0] (users): component 'my_memory' (plugin 'mymem') in slot memory.short_term
    lacks post_similarity() of DuplicateCheck, which policy 'social_agent' requires

A required slot left empty (``memory.short_term = "none"``, an ablation) is allowed: the
feature that needs it is off, and the run says so once per population (``slot.feature_off``).

Every memory tier implements :class:`~townsquare.memory.Memory` (remember, recall, since), so
any policy that reads the tiers through ``agent_memory`` runs with any memory design; what a
policy needs beyond that (Zhou's duplicate check) it declares in ``requires``.

Lifecycle: a run-wide component (platform, recommender, metric, intervention, LLM middleware) or an agent
component that defines ``on_round_start(round, now)`` (plain or ``async``) is called at the
start of every round, after the ``townsquare_on_round_start`` hook, with the round number and
the round's simulated time as a ``datetime``. An age-based recommender reads ``now`` there
instead of from a global.
"""

from __future__ import annotations

import functools
import inspect
from datetime import datetime
from typing import Any, Iterable

import structlog

from .components import Component, PersonaContext, PersonaKnowledge, Planner, Policy, Reflector
from .errors import ComponentError
from .memory import MEMORY_TIERS, Memory, MemoryRetrieval
from .interventions import Intervention
from .metrics import Metric
from .platform import Platform
from .recommender import Recommender

log = structlog.get_logger("townsquare.slots")

#: slot -> the protocol every component in it implements
SLOT_PROTOCOLS: dict[str, type] = {
    "persona.context": PersonaContext,
    "persona.knowledge": PersonaKnowledge,
    **{tier: Memory for tier in MEMORY_TIERS},
    "memory.retrieval": MemoryRetrieval,
    "planner": Planner,
    "reflector": Reflector,
    "policy": Policy,
    "platform": Platform,
    "recommender": Recommender,
    "metric": Metric,
    "intervention": Intervention,
}

_PROTOCOL_BASES = {"Protocol", "Generic", "object"}
_members_cache: dict[type, tuple[str, ...]] = {}


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The public methods and attributes a protocol declares, its bases' included, in
    declaration order."""
    cached = _members_cache.get(protocol)
    if cached is not None:
        return cached
    names: dict[str, None] = {}
    for klass in reversed(protocol.__mro__):
        if klass.__name__ in _PROTOCOL_BASES or not getattr(klass, "_is_protocol", False):
            continue
        for name in (*getattr(klass, "__annotations__", {}), *vars(klass)):
            if not name.startswith("_"):
                names[name] = None
    _members_cache[protocol] = tuple(names)
    return _members_cache[protocol]


_class_cache: dict[tuple[type, type], list[str]] = {}


def missing_members(component: Any, protocol: type) -> list[str]:
    """The members of ``protocol`` that ``component`` lacks (a method must be callable).
    ``component`` may be a class: then only methods and properties are checked (instance
    attributes appear only once it is built)."""
    if not inspect.isclass(component):
        # An agent's components share a few classes: check the class once, and the instance
        # itself only where the class falls short (a method set in __init__, a plain attribute).
        key = (type(component), protocol)
        if key not in _class_cache:
            _class_cache[key] = _missing(type(component), protocol)
        if not _class_cache[key] and _methods_only(protocol):
            return []
    return _missing(component, protocol)


@functools.lru_cache(maxsize=None)
def _methods_only(protocol: type) -> bool:
    """True when every member of ``protocol`` is a method or property (a class can answer)."""
    return all(_is_method(protocol, name) for name in protocol_members(protocol))


def _is_method(protocol: type, name: str) -> bool:
    declared = inspect.getattr_static(protocol, name, None)
    return inspect.isfunction(declared) or isinstance(declared, property)


def _missing(component: Any, protocol: type) -> list[str]:
    missing = []
    is_class = inspect.isclass(component)
    for name in protocol_members(protocol):
        if is_class and not _is_method(protocol, name):
            continue
        if not hasattr(component, name):
            missing.append(name)
        elif inspect.isfunction(inspect.getattr_static(protocol, name, None)) and not callable(getattr(component, name)):
            missing.append(name)
    return missing


def _describe(name: str, plugin: str) -> str:
    return f"component {name!r} (plugin {plugin!r})" if plugin else f"component {name!r}"


def check_component(component: Any, slot: str, spec: Any, where: str = "", protocols: Iterable[type] = ()) -> None:
    """Raise :class:`ComponentError` when ``component`` (built from ``spec`` for ``slot``)
    lacks a method of its slot's protocol or of ``protocols``."""
    prefix = f"{where}: " if where else ""
    # a spec may name the protocol its components implement instead of the slot's (an item recommender)
    for protocol in (getattr(spec, "protocol", None) or SLOT_PROTOCOLS.get(slot, Component), *protocols):
        missing = missing_members(component, protocol)
        if missing:
            raise ComponentError(
                f"{prefix}{_describe(spec.name, spec.plugin)} in slot {slot} lacks {missing[0]}() of {protocol.__name__}"
            )


def check_agent(agent: Any, choices: dict[str, Any], where: str, noted: set | None = None) -> None:
    """Check an agent's built components: each against its slot's protocol, and each slot
    against what the other components' specs ``require`` of it. ``choices`` maps slot ->
    the scenario's choice (``.spec``). Empty required slots are logged once per ``noted`` set."""
    for slot, component in agent.components.items():
        check_component(component, slot, choices[slot].spec, where)
    for slot, choice in choices.items():
        for needed_slot, protocols in (getattr(choice.spec, "requires", None) or {}).items():
            target = agent.components.get(needed_slot)
            if target is None:
                key = (where, slot, needed_slot)
                if noted is not None and key not in noted:
                    noted.add(key)
                    log.warning("slot.feature_off", where=where, component=choice.spec.name, slot=needed_slot,
                                needs=", ".join(p.__name__ for p in protocols))
                continue
            _check_required(target, choices[needed_slot].spec, needed_slot, protocols, slot, choice.spec, where)


def check_resolved(scenario: Any) -> None:
    """Check the components a resolved scenario will build whose factory is a class, before
    anything is built or written: the same errors as at build time, only earlier. Components
    built by factory functions are checked when they are built."""
    for i, pop in enumerate(scenario.populations):
        where = f"populations[{i}] ({pop.config.name})"
        classes = {slot: choice.spec.factory for slot, choice in pop.slots.items() if inspect.isclass(choice.spec.factory)}
        for slot, cls in classes.items():
            check_component(cls, slot, pop.slots[slot].spec, where)
        for slot, choice in pop.slots.items():
            for needed_slot, protocols in (getattr(choice.spec, "requires", None) or {}).items():
                if needed_slot in classes:
                    _check_required(classes[needed_slot], pop.slots[needed_slot].spec, needed_slot, protocols, slot, choice.spec, where)
    for key, choice in (("platform", scenario.platform), ("recommender", scenario.recommender)):
        if inspect.isclass(choice.spec.factory):
            check_component(choice.spec.factory, key, choice.spec, key)
    for slot, choices in (("metric", scenario.metrics), ("intervention", scenario.interventions)):
        for choice in choices:
            if inspect.isclass(choice.spec.factory):
                check_component(choice.spec.factory, slot, choice.spec, f"{slot}s")


def _check_required(target: Any, spec: Any, slot: str, protocols: Iterable[type], by_slot: str, by_spec: Any, where: str) -> None:
    for protocol in protocols:
        missing = missing_members(target, protocol)
        if missing:
            raise ComponentError(
                f"{where}: {_describe(spec.name, spec.plugin)} in slot {slot} lacks {missing[0]}() "
                f"of {protocol.__name__}, which {by_slot} {by_spec.name!r} requires"
            )


def check_run_wide(scenario: Any, services: Any, metrics: list[tuple[str, Any]], interventions: list[tuple[str, Any]]) -> None:
    """Check the run-wide components (platform, recommender, metrics, interventions) against their slots."""
    check_component(services.platform, "platform", scenario.platform.spec, "platform")
    check_component(services.recommender, "recommender", scenario.recommender.spec, "recommender")
    for choice, (_, metric) in zip(scenario.metrics, metrics):
        check_component(metric, "metric", choice.spec, "metrics")
    for choice, (_, intervention) in zip(scenario.interventions, interventions):
        check_component(intervention, "intervention", choice.spec, "interventions")


# --------------------------------------------------------------------------- lifecycle


def round_observers(components: Iterable[Any]) -> list[Any]:
    """The bound ``on_round_start`` methods of ``components`` that define one."""
    found = []
    for component in components:
        method = getattr(component, "on_round_start", None)
        if callable(method):
            found.append(method)
    return found


async def notify_round_start(observers: Iterable[Any], round: int, now: datetime) -> None:
    """Call every observer's ``on_round_start(round, now)`` (awaiting coroutine ones), in order."""
    for observer in observers:
        result = observer(round, now)
        if inspect.isawaitable(result):
            await result
