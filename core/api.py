"""The declared plugin API: what plugins import, and the stable surface of townsquare.

Plugins (built-in and third-party) import from here, never from the kernel's other modules::

    from townsquare.api import hookimpl, PolicySpec, Action, StepContext, MemoryRecord

The kernel's inside may change between versions; the names below keep their meaning.
"""

from __future__ import annotations

from .actions import SOCIAL_ACTIONS, WRITE_ACTIONS, Action, ActionResult
from .components import (
    Agent, BuildContext, Component, DuplicateCheck, EngagementLog, ObservesResults, ObservesRounds, PersonaContext, PersonaKnowledge, Planner, Policy,
    Reflector, Services, StepContext,
)
from .embedding import Embedder, EmbeddingCache, normalize_rows
from .errors import ComponentError, PluginError, RunStopped, ScenarioError, TownsquareError, UsageError
from .files import read_user_csv, read_user_text
from .items import Item, ItemInteractions, ItemRecommender
from .knowledge import KnowledgeItem, KnowledgeSource
from .lifecycle import RunInfo, RunSummary
from .llm import Handler, LLMCallRecord, LLMClient, LLMProvider, LLMRequest, LLMResponse, Message, ParseFailure
from .markers import hookimpl
from .memory_export import memory_rows
from .memory import MEMORY_TIERS, Memory, MemoryChain, MemoryRecord, MemoryRetrieval, agent_memory, retrieval_of
from .metrics import Metric, RoundView
from .persona import Persona, PersonaSource, cycle_personas
from .platform import AccountView, Platform, PostView, platform_actions
from .recommender import Recommender
from .slots import SLOT_PROTOCOLS
from .specs import (
    AGENT_SLOTS, ComponentSpec, EmbedderSpec, KnowledgeSourceSpec, LLMMiddlewareSpec, LLMProviderSpec, MemorySpec,
    MetricSpec, PersonaComponentSpec, PersonaSourceSpec, PlannerSpec, PlatformSpec, PolicySpec, RecommenderSpec,
    ReflectorSpec,
)

__all__ = [
    "AGENT_SLOTS", "MEMORY_TIERS", "SLOT_PROTOCOLS", "SOCIAL_ACTIONS", "WRITE_ACTIONS",
    "AccountView", "Action", "ActionResult", "Agent", "BuildContext", "Component", "ComponentError", "ComponentSpec",
    "DuplicateCheck", "Embedder", "EmbedderSpec", "EngagementLog", "EmbeddingCache", "Handler", "Item", "ItemInteractions",
    "ItemRecommender", "KnowledgeItem", "KnowledgeSource",
    "KnowledgeSourceSpec", "LLMCallRecord", "LLMClient", "LLMMiddlewareSpec", "LLMProvider", "LLMProviderSpec",
    "LLMRequest", "LLMResponse", "Memory", "MemoryChain", "MemoryRecord", "MemoryRetrieval", "MemorySpec", "Message",
    "Metric", "MetricSpec", "ObservesResults", "ObservesRounds", "ParseFailure", "Persona", "PersonaComponentSpec", "PersonaContext",
    "PersonaKnowledge", "PersonaSource", "PersonaSourceSpec", "Planner", "PlannerSpec", "Platform", "PlatformSpec",
    "PluginError", "Policy", "PolicySpec", "PostView", "Recommender", "RecommenderSpec", "Reflector", "ReflectorSpec", "RoundView",
    "RunInfo", "RunStopped", "RunSummary", "ScenarioError", "Services", "StepContext", "TownsquareError",
    "UsageError", "agent_memory", "cycle_personas", "hookimpl", "memory_rows", "normalize_rows", "platform_actions", "read_user_csv", "read_user_text", "retrieval_of",
]
