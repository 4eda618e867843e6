"""The declared plugin API: what plugins import, and the stable surface of townsquare.

Plugins (built-in and third-party) import from here, never from the kernel's other modules::

    from townsquare.api import hookimpl, PolicySpec, Action, StepContext, MemoryRecord

The kernel's inside may change between versions; the names below keep their meaning. This
module only declares: it re-exports the kernel's records, protocols and ports (the slots'
protocols, the LLM port, the :class:`World` a run is assembled into and the :class:`Turns`
contract a backend implements) and holds no helper. Helpers that designs share are in
:mod:`townsquare.lib`; plugins that add commands (``townsquare_register_commands``) also use
:mod:`townsquare.api.commands`; ``townsquare.testing`` is the kit for plugin tests.
"""

from __future__ import annotations

from ..actions import SOCIAL_ACTIONS, WRITE_ACTIONS, Action, ActionResult
from ..activity import active_probabilities, hour_weight, pareto_inverse_cdf
from ..agent_host import AgentHost, restore_agent, stop_reason
from ..components import (
    Agent, BuildContext, Component, ObservesResults, ObservesRounds, PersonaContext, PersonaKnowledge, PlannedTurn, Planner, Policy,
    Reflector, Services, StepContext,
)
from ..engine import COLLECTOR_THRESHOLDS
from ..embedding import Embedder, EmbeddingCache, normalize_rows
from ..errors import ComponentError, PluginError, RunStopped, ScenarioError, TownsquareError, UsageError
from ..knowledge import KnowledgeItem, KnowledgeSource
from ..lifecycle import RunInfo, RunSummary
from ..llm import (
    KEPT, Answer, Handler, LLMCallRecord, LLMClient, LLMProvider, LLMRequest, LLMResponse, Message, ParseFailure, current_issue, not_text,
)
from ..llm_journal import LLMJournal
from ..llm_answers import AnswerFormat, match_label, match_prefix
from ..llm_modes import MODES, answers_in_db, choose_modes, is_constrained, mode_for, provider_capabilities, request_kind, structured_modes
from ..llm_faults import LLMFatal, LLMFault, classify
from ..markers import hookimpl
from ..memory import MEMORY_TIERS, Memory, MemoryChain, MemoryRecord, MemoryRetrieval, agent_memory, retrieval_of
from ..interventions import Intervention, RunSeams
from ..metrics import Metric, RoundView
from ..persona import Persona, PersonaSource, name_problem
from ..process_usage import process_usage
from ..platform import AccountView, Platform, PostView, platform_actions
from ..recommender import Recommender
from ..scenario import LimitsConfig, limits_of
from ..secrets import redact_text
from ..state import json_encoder
from ..slots import SLOT_PROTOCOLS
from ..turns import Turns, TurnsBackend
from ..world import World
from ..specs import (
    AGENT_SLOTS, ALL_SETTINGS, ComponentSpec, EmbedderSpec, InterventionSpec, KnowledgeSourceSpec, LLMMiddlewareSpec,
    LLMProviderSpec, MemorySpec, MetricSpec, PersonaComponentSpec, PersonaSourceSpec, PlannerSpec, PlatformSpec, PolicySpec, RecommenderSpec,
    ReflectorSpec, ValidationDimensionSpec, machinery_fields,
)

__all__ = [
    "AGENT_SLOTS", "ALL_SETTINGS", "COLLECTOR_THRESHOLDS", "KEPT", "MEMORY_TIERS", "MODES", "SLOT_PROTOCOLS",
    "SOCIAL_ACTIONS", "WRITE_ACTIONS", "AccountView", "Action", "ActionResult", "active_probabilities", "Agent",
    "agent_memory", "AgentHost", "Answer", "AnswerFormat", "answers_in_db", "BuildContext", "choose_modes",
    "classify", "Component", "ComponentError", "ComponentSpec", "current_issue", "Embedder", "EmbedderSpec",
    "EmbeddingCache", "Handler", "hookimpl", "hour_weight", "Intervention", "InterventionSpec", "is_constrained",
    "json_encoder", "KnowledgeItem", "KnowledgeSource", "KnowledgeSourceSpec", "limits_of", "LimitsConfig", "LLMCallRecord",
    "LLMClient", "LLMFatal", "LLMFault", "LLMJournal", "LLMMiddlewareSpec", "LLMProvider", "LLMProviderSpec", "LLMRequest",
    "LLMResponse", "machinery_fields", "match_label", "match_prefix", "Memory", "MemoryChain", "MemoryRecord",
    "MemoryRetrieval", "MemorySpec", "Message", "Metric", "MetricSpec", "mode_for", "name_problem", "normalize_rows",
    "not_text", "ObservesResults", "ObservesRounds", "pareto_inverse_cdf", "ParseFailure", "Persona",
    "PersonaComponentSpec", "PersonaContext", "PersonaKnowledge", "PersonaSource", "PersonaSourceSpec", "PlannedTurn",
    "Planner", "PlannerSpec", "Platform", "platform_actions", "PlatformSpec", "PluginError", "Policy", "PolicySpec",
    "PostView", "process_usage", "provider_capabilities", "Recommender", "RecommenderSpec", "redact_text", "Reflector",
    "ReflectorSpec", "request_kind", "restore_agent", "retrieval_of", "RoundView", "RunInfo", "RunSeams", "RunStopped",
    "RunSummary", "ScenarioError", "Services", "StepContext", "stop_reason", "structured_modes", "TownsquareError", "Turns",
    "TurnsBackend", "UsageError", "ValidationDimensionSpec", "World",
]
