"""The declared plugin API: what plugins import, and the stable surface of townsquare.

Plugins (built-in and third-party) import from here, never from the kernel's other modules::

    from townsquare.api import hookimpl, PolicySpec, Action, StepContext, MemoryRecord

The kernel's inside may change between versions; the names below keep their meaning.
Plugins that add commands (``townsquare_register_commands``) also use
:mod:`townsquare.api.commands`: the command-line options every command shares, and reading,
running and replaying run directories. ``townsquare.testing`` is the kit for plugin tests.
"""

from __future__ import annotations

from ..actions import SOCIAL_ACTIONS, WRITE_ACTIONS, Action, ActionResult
from ..agent_host import AgentHost, restore_agent, stop_reason
from ..components import (
    Agent, BuildContext, Component, ObservesResults, ObservesRounds, PersonaContext, PersonaKnowledge, Planner, Policy,
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
from ..slots import SLOT_PROTOCOLS
from ..turns import Turns, TurnsBackend
from ..world import World
from ..specs import (
    AGENT_SLOTS, ALL_SETTINGS, ComponentSpec, EmbedderSpec, InterventionSpec, KnowledgeSourceSpec, LLMMiddlewareSpec, LLMProviderSpec, MemorySpec,
    MetricSpec, PersonaComponentSpec, PersonaSourceSpec, PlannerSpec, PlatformSpec, PolicySpec, RecommenderSpec,
    ReflectorSpec, machinery_fields,
)

__all__ = [
    "AgentHost", "COLLECTOR_THRESHOLDS", "LLMJournal", "Turns", "TurnsBackend", "World", "process_usage", "restore_agent", "stop_reason",
    "AGENT_SLOTS", "ALL_SETTINGS", "KEPT", "MEMORY_TIERS", "MODES", "SLOT_PROTOCOLS", "SOCIAL_ACTIONS", "WRITE_ACTIONS",
    "AccountView", "Action", "Answer", "AnswerFormat", "ActionResult", "Agent", "BuildContext", "Component", "ComponentError", "ComponentSpec",
    
    "Embedder", "EmbedderSpec", "EmbeddingCache", "Handler", "LLMFatal", "LLMFault", "LimitsConfig",
    "Intervention", "InterventionSpec", "KnowledgeItem", "KnowledgeSource",
    "KnowledgeSourceSpec", "LLMCallRecord", "LLMClient", "LLMMiddlewareSpec", "LLMProvider", "LLMProviderSpec",
    "LLMRequest", "LLMResponse", "Memory", "MemoryChain", "MemoryRecord", "MemoryRetrieval", "MemorySpec", "Message",
    "Metric", "MetricSpec", "ObservesResults", "ObservesRounds", "ParseFailure", "Persona", "PersonaComponentSpec", "PersonaContext",
    "PersonaKnowledge", "PersonaSource", "PersonaSourceSpec", "Planner", "PlannerSpec", "Platform", "PlatformSpec",
    "PluginError", "Policy", "PolicySpec", "PostView", "Recommender", "RecommenderSpec", "Reflector", "ReflectorSpec", "RoundView", "RunSeams",
    
    "RunInfo", "RunStopped", "RunSummary", "ScenarioError", "Services", "StepContext", "TownsquareError",
    "UsageError", "agent_memory", "answers_in_db", "choose_modes", "classify", "current_issue", 
    "hookimpl", "is_constrained", "limits_of",
    "machinery_fields", "match_label", "match_prefix", "mode_for", "name_problem",
    "normalize_rows", "not_text", "provider_capabilities", "request_kind", "structured_modes",
    "platform_actions", "redact_text", "retrieval_of",
]
