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
from ..activity import active_probabilities, hour_weight, pareto_inverse_cdf
from ..components import (
    Agent, BuildContext, Component, DuplicateCheck, EngagementLog, ObservesResults, ObservesRounds, PersonaContext, PersonaKnowledge, Planner, Policy,
    Reflector, Services, StepContext,
)
from .data_paths import MARKER as DATASET_MARKER
from .data_paths import DatasetMissing, data_home, data_path, dataset_folder, installed_dataset
from ..embedding import Embedder, EmbeddingCache, normalize_rows
from ..errors import ComponentError, PluginError, RunStopped, ScenarioError, TownsquareError, UsageError
from .files import parse_json_list, read_json_lines, read_user_csv, read_user_text
from .items import Item, ItemInteractions, ItemRecommender
from ..knowledge import KnowledgeItem, KnowledgeSource
from ..lifecycle import RunInfo, RunSummary
from ..llm import (
    KEPT, Answer, Handler, LLMCallRecord, LLMClient, LLMProvider, LLMRequest, LLMResponse, Message, ParseFailure, current_issue, not_text,
)
from ..llm_answers import AnswerFormat, match_label, match_prefix
from ..llm_modes import MODES, answers_in_db, choose_modes, is_constrained, mode_for, provider_capabilities, request_kind, structured_modes
from ..llm_faults import LLMFatal, LLMFault, classify
from .backoff import backoff_delay
from ..markers import hookimpl
from .memory_export import memory_rows
from .movielens import MovieLens, Rating, genres_of, load_movielens_data, movielens_layout
from ..memory import MEMORY_TIERS, Memory, MemoryChain, MemoryRecord, MemoryRetrieval, agent_memory, retrieval_of
from ..interventions import Intervention, RunSeams
from ..metrics import Metric, RoundView
from ..persona import Persona, PersonaSource, name_problem
from .persona_pool import cycle_personas
from ..platform import AccountView, Platform, PostView, platform_actions
from .cache_share import DEFAULT_CACHED_PRICE_RATIO, cache_line
from .prompt_files import fill_prompt, load_answers, load_prompts
from ..recommender import Recommender
from ..scenario import LimitsConfig, limits_of
from ..secrets import redact_text
from ..state import json_encoder
from .secret_files import read_secret_file, resolve_secrets
from .endpoint import EndpointConfig
from .similarity_rule import SimilarityRule, SimilarityRuleConfig
from .stats import Interval, TTest, holm, t_quantile, kendall_tau, mean_interval, paired_test, share_interval, spearman, two_stage_bootstrap
from ..slots import SLOT_PROTOCOLS
from .follow_graph import follow_edges
from .function_words import FUNCTION_WORDS
from .llm_calls import NOT_A_CALL, llm_by_purpose, llm_totals
from ..specs import (
    AGENT_SLOTS, ALL_SETTINGS, AnswerPrior, ComponentSpec, EmbedderSpec, InterventionSpec, KnowledgeSourceSpec, LLMMiddlewareSpec,
    LLMProviderSpec, MemorySpec,
    MetricSpec, PersonaComponentSpec, PersonaSourceSpec, PlannerSpec, PlatformSpec, PolicySpec, RecommenderSpec,
    ReflectorSpec, ValidationDimensionSpec, machinery_fields,
)

__all__ = [
    "AGENT_SLOTS", "ALL_SETTINGS", "KEPT", "DATASET_MARKER", "FUNCTION_WORDS", "NOT_A_CALL", "DEFAULT_CACHED_PRICE_RATIO", "MEMORY_TIERS",
    "MODES", "SLOT_PROTOCOLS", "SOCIAL_ACTIONS", "WRITE_ACTIONS",
    "AccountView", "Action", "Answer", "AnswerFormat", "AnswerPrior", "ActionResult", "Agent", "BuildContext", "Component", "ComponentError", "ComponentSpec",
    "DatasetMissing",
    "DuplicateCheck", "Embedder", "EmbedderSpec", "EndpointConfig", "EngagementLog", "EmbeddingCache", "Handler", "Item", "ItemInteractions", "LLMFatal", "LLMFault", "LimitsConfig",
    "Intervention", "InterventionSpec", "ItemRecommender", "KnowledgeItem", "KnowledgeSource",
    "KnowledgeSourceSpec", "LLMCallRecord", "LLMClient", "LLMMiddlewareSpec", "LLMProvider", "LLMProviderSpec",
    "LLMRequest", "LLMResponse", "Memory", "MemoryChain", "MemoryRecord", "MemoryRetrieval", "MemorySpec", "Message",
    "Metric", "MetricSpec", "MovieLens", "ObservesResults", "ObservesRounds", "ParseFailure", "Persona", "PersonaComponentSpec", "PersonaContext",
    "PersonaKnowledge", "PersonaSource", "PersonaSourceSpec", "Planner", "PlannerSpec", "Platform", "PlatformSpec",
    "PluginError", "Policy", "PolicySpec", "PostView", "Rating", "Recommender", "RecommenderSpec", "Reflector", "ReflectorSpec", "RoundView", "RunSeams",
    "Interval", "TTest", "holm", "t_quantile", "kendall_tau", "mean_interval", "paired_test", "share_interval", "spearman",
    "two_stage_bootstrap",
    "RunInfo", "RunStopped", "RunSummary", "ScenarioError", "Services", "SimilarityRule", "SimilarityRuleConfig", "StepContext", "TownsquareError",
    "UsageError", "ValidationDimensionSpec", "active_probabilities", "agent_memory", "answers_in_db", "backoff_delay", "cache_line", "choose_modes",
    "classify", "current_issue", "cycle_personas", "data_home", "data_path",
    "dataset_folder", "fill_prompt", "follow_edges", "genres_of", "hookimpl", "hour_weight", "installed_dataset", "is_constrained", "json_encoder", "memory_rows", "limits_of",
    "llm_by_purpose", "llm_totals", "load_answers", "load_movielens_data", "machinery_fields", "load_prompts", "match_label", "match_prefix",
    "mode_for", "movielens_layout", "name_problem",
    "normalize_rows", "not_text", "pareto_inverse_cdf", "parse_json_list", "provider_capabilities", "request_kind", "structured_modes",
    "platform_actions", "read_json_lines", "read_secret_file", "read_user_csv", "read_user_text", "redact_text", "resolve_secrets", "retrieval_of",
]
