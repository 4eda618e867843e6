"""Typed records that registration hooks return.

A plugin tells the kernel about a component by returning a record: its ``name`` (what a
scenario writes), a ``factory`` that builds it, and an optional pydantic ``config_model`` for
its settings. The plugin manager stamps ``plugin`` (the canonical plugin name) on each record,
so a clash of names can name both plugins and the slot table can say who provides what.

``priority`` orders the implementers of one slot when a scenario writes ``auto``: the highest
priority among enabled plugins wins. Paper defaults use 100, alternatives 0.

Factories take ``(config, ctx)``: ``config`` is an instance of ``config_model`` (or ``None``
when the record has no model) and ``ctx`` a :class:`townsquare.components.BuildContext`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

#: Agent slots, in the order components are built. See DESIGN.md, "Slots".
AGENT_SLOTS: tuple[str, ...] = (
    "persona.context",
    "persona.knowledge",
    "memory.sensory",
    "memory.short_term",
    "memory.long_term",
    "memory.stream",
    "memory.retrieval",
    "planner",
    "reflector",
    "policy",
)

#: Slots a population cannot leave empty.
REQUIRED_AGENT_SLOTS: frozenset[str] = frozenset({"policy"})

#: ``machinery_settings: ClassVar = ALL_SETTINGS``: every field of the model only steers the machinery
ALL_SETTINGS: frozenset[str] = frozenset({"*"})


def machinery_fields(model: Any) -> frozenset[str]:
    """The fields of settings model ``model`` that only steer the machinery (budgets, concurrency,
    endpoints, keys, timeouts, progress), as its class declares them once, in the class variable
    ``machinery_settings`` (field names, or :data:`ALL_SETTINGS`). Every other field changes
    what agents do, the safe default: ``resume`` refuses to change it (docs/plugins.md)."""
    declared = frozenset(getattr(model, "machinery_settings", ()) or ())
    return frozenset(getattr(model, "model_fields", {})) if "*" in declared else declared


@dataclass
class ComponentSpec:
    """A component a plugin provides: what a scenario names, and how to build it."""

    #: what a scenario writes to choose it; unique within its slot
    name: str
    #: ``factory(config, ctx)`` builds the component (see the module docstring)
    factory: Callable[..., Any]
    #: a pydantic model for its settings (``[plugins.NAME]``, see docs/plugins.md "Settings")
    config_model: type | None = None
    #: one line for ``townsquare plugins`` and the docs
    description: str = ""
    #: ``auto`` picks the highest priority (paper defaults 100, alternatives 0)
    priority: int = 0
    #: True when the component calls the LLM: a scenario without an [llm] table then gets the
    #: highest-priority provider (the offline local model when installed), announced at start.
    needs_llm: bool = False
    #: True when the component reads the run's knowledge source: without a [knowledge] table a
    #: slot filled automatically falls back to a component that does not, and naming this
    #: component explicitly is an error.
    needs_knowledge: bool = False
    #: False: built for one design only (RecAgent's memory tiers), so never chosen as the
    #: fallback for another policy's disabled preferred component; named or preferred, it is used.
    stand_in: bool = True
    #: What this component needs of its sibling slots beyond their slot protocol:
    #: ``{slot: (Protocol, ...)}``. Checked when the agent is built: a filled slot whose
    #: component lacks a method is an error naming both; an empty slot turns the feature off
    #: (logged once as ``slot.feature_off``). See :mod:`townsquare.slots`.
    requires: dict[str, tuple[type, ...]] = field(default_factory=dict)
    #: the canonical plugin name, stamped by the plugin manager
    plugin: str = field(default="", compare=False)

    #: The kind of component; each subclass sets it. Names are unique within a kind.
    kind: ClassVar[str] = "component"

    @property
    def slot(self) -> str:
        return self.kind


@dataclass
class PlatformSpec(ComponentSpec):
    """Where agents act: the in-memory platform, a Mastodon server, a recommender sandbox."""

    kind: ClassVar[str] = "platform"


@dataclass
class RecommenderSpec(ComponentSpec):
    """Ranks candidate posts or items into a feed. ``protocol``: what its components implement
    instead of :class:`townsquare.recommender.Recommender` (an item recommender of the
    ``recsys`` platform: :class:`townsquare.lib.items.ItemRecommender`)."""

    protocol: type | None = None
    kind: ClassVar[str] = "recommender"


@dataclass
class MemorySpec(ComponentSpec):
    """A memory component. ``memory_kind`` is one of sensory, short_term, long_term, stream,
    retrieval (a retrieval scorer that memory components consult)."""

    memory_kind: str = "stream"
    kind: ClassVar[str] = "memory"

    @property
    def slot(self) -> str:
        return f"memory.{self.memory_kind}"


@dataclass
class PersonaComponentSpec(ComponentSpec):
    """A persona component. ``persona_kind`` is ``context`` (what of the persona a prompt shows)
    or ``knowledge`` (what outside knowledge the agent may use)."""

    persona_kind: str = "context"
    kind: ClassVar[str] = "persona"

    @property
    def slot(self) -> str:
        return f"persona.{self.persona_kind}"


@dataclass
class PersonaSourceSpec(ComponentSpec):
    """Where a population's personas come from (inline TOML, JSONL, a dataset loader...).
    The factory returns a :class:`townsquare.persona.PersonaSource`."""

    kind: ClassVar[str] = "persona_source"


@dataclass
class PlannerSpec(ComponentSpec):
    kind: ClassVar[str] = "planner"


@dataclass
class ReflectorSpec(ComponentSpec):
    kind: ClassVar[str] = "reflector"


@dataclass
class PolicySpec(ComponentSpec):
    """Decides an agent's actions each time it is active.

    ``uses`` names the other slots the policy works with, each with its preferred component
    (None: the highest-priority one). A slot a scenario leaves out is filled only if the policy
    uses it: with the preferred component, or, when that one is disabled, the highest-priority
    enabled one (the documented fallback). Slots the policy does not use stay empty unless the
    scenario names a component or writes ``auto``.
    """

    uses: dict[str, str | None] = field(default_factory=dict)
    #: False: a preferred component that is disabled leaves its slot empty instead of falling
    #: back (RecAgent's "w/o short": ``-p no:short_term_memory`` must not bring in another tier).
    stand_ins: bool = True
    kind: ClassVar[str] = "policy"


@dataclass
class LLMProviderSpec(ComponentSpec):
    """A chat-completion backend. The factory returns a :class:`townsquare.llm.LLMProvider`."""

    kind: ClassVar[str] = "llm"


@dataclass
class LLMMiddlewareSpec(ComponentSpec):
    """A link in the chain around every LLM provider (cache, budget, retries, concurrency).

    ``order`` places it: lower is further out. The built-ins use cache 10, budget 20,
    retries 30, concurrency 40; the kernel's accounting is always innermost. The factory
    returns an object with ``async __call__(request, call_next)`` and, optionally,
    ``get_state``/``set_state`` (saved in checkpoints), ``aclose`` and
    ``bind_accounting(accounting)`` (called once the chain is built, with the run's
    :class:`townsquare.llm.Accounting`: a cache records its answers through it, a budget
    observes it).
    """

    order: int = 50
    kind: ClassVar[str] = "llm_middleware"


@dataclass
class EmbedderSpec(ComponentSpec):
    """Turns texts into vectors. The factory returns a :class:`townsquare.embedding.Embedder`."""

    kind: ClassVar[str] = "embedder"


@dataclass
class KnowledgeSourceSpec(ComponentSpec):
    """An external knowledge base agents may draw on (see the knowledge boundary)."""

    kind: ClassVar[str] = "knowledge"


@dataclass
class MetricSpec(ComponentSpec):
    """A measurement taken at round ends. The factory returns a :class:`townsquare.metrics.Metric`."""

    kind: ClassVar[str] = "metric"


@dataclass
class InterventionSpec(ComponentSpec):
    """A run-wide change at the start of chosen rounds. The factory returns a
    :class:`townsquare.interventions.Intervention`."""

    kind: ClassVar[str] = "intervention"


@dataclass
class ValidationDimensionSpec(ComponentSpec):
    """What ``townsquare validate`` measures alike on runs and on a trace of real people. The
    factory returns a dimension (:class:`townsquare.lib.validation.Dimension`)."""

    kind: ClassVar[str] = "validation_dimension"


#: registration hook name -> record type it returns
REGISTRATION_HOOKS: dict[str, type[ComponentSpec]] = {
    "townsquare_register_platforms": PlatformSpec,
    "townsquare_register_recommenders": RecommenderSpec,
    "townsquare_register_memory": MemorySpec,
    "townsquare_register_persona_components": PersonaComponentSpec,
    "townsquare_register_persona_sources": PersonaSourceSpec,
    "townsquare_register_planners": PlannerSpec,
    "townsquare_register_reflectors": ReflectorSpec,
    "townsquare_register_policies": PolicySpec,
    "townsquare_register_llm_providers": LLMProviderSpec,
    "townsquare_register_llm_middleware": LLMMiddlewareSpec,
    "townsquare_register_embedders": EmbedderSpec,
    "townsquare_register_knowledge_sources": KnowledgeSourceSpec,
    "townsquare_register_metrics": MetricSpec,
    "townsquare_register_interventions": InterventionSpec,
    "townsquare_register_validation_dimensions": ValidationDimensionSpec,
}
