"""The oracle model, FOR TESTS ONLY: deterministic rules that answer from the prompt alone.

A study's phenomenon is proven to travel through the agents' pathways when it comes out with
this model and vanishes when the pathway is ablated (DESIGN.md §7). The oracle acts as a careful
reader would: it answers each *purpose* a design asks (importance, plans, reactions, dialogue
turns, reflections, decisions, grades...) from the text of the request it is sent and nothing
else. It never sees the run's state, the agent's memory or the platform: its provider is built
from its settings only, and every rule is a function of an :class:`~.prompt_view.PromptView`.
If an agent "knows" something under the oracle, that knowledge was in its prompt.

It is not a language model and never a default: a run gets it only with ``--llm oracle`` (or
``[llm] name = "oracle"``), and the run logs a loud warning. It is registered by the testing
kit (``townsquare.testing.oracle``), not by the built-in plugins.

Rules live in one module per design (:mod:`.generic`, :mod:`.park` for Park et al.,
:mod:`.recagent` for Wang et al., :mod:`.social_agent` for Zhou et al.); each exposes ``RULES``, a dict from a purpose (or a
purpose prefix ending in ``.``/``*``) to ``rule(view) -> answer``; the most specific match wins
(see :mod:`.rules`). An answer is shaped to what the request demands (a label, JSON of the
schema, an answer prefix) by :func:`.rules.shape`, so a rule says *what* it means, not how the
backend has to spell it.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import ClassVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from ...llm import LLMRequest, LLMResponse
from ...markers import hookimpl
from ...prompt_cache import CHARS_PER_TOKEN
from ...specs import LLMProviderSpec
from .dispositions import Dispositions
from .prompt_view import PromptView
from .rules import RuleBook

log = structlog.get_logger("townsquare.testing")

#: the modules whose ``RULES`` the oracle answers with, most general first (later ones win a tie)
RULE_MODULES: tuple[str, ...] = (
    "townsquare.testing.oracle.generic",
    "townsquare.testing.oracle.park",
    "townsquare.testing.oracle.recagent",
    "townsquare.testing.oracle.personagym",
    "townsquare.testing.oracle.social_agent",
)


class OracleConfig(BaseModel):
    """``[llm]`` settings of the oracle (``--set llm.KEY=VALUE``): its dispositions (how it reads a
    prompt, :mod:`.dispositions`; defaults are its fixed rules' values) and a simulated latency."""

    model_config = ConfigDict(extra="forbid")
    machinery_settings: ClassVar[frozenset[str]] = frozenset({"latency_ms"})
    #: simulated latency of each answer (the oracle itself answers at once)
    latency_ms: float = Field(0.0, ge=0)
    #: importance of a memory holding news of a dated or timed event (a planning note: one more)
    news_importance: int = Field(8, ge=1, le=10)
    #: share of relays of someone else's news that keep its date, time and place
    relay_fidelity: float = Field(1.0, ge=0, le=1)
    #: how far a rating moves from the agent's own score toward the opinions it recalls
    conformity_weight: float = Field(0.5, ge=0, le=1)
    #: share of watch choices taken from the top of the page rather than from fixed interests
    follow_page: float = Field(0.0, ge=0, le=1)

    def dispositions(self) -> Dispositions:
        return Dispositions(news_importance=self.news_importance, relay_fidelity=self.relay_fidelity,
                            conformity_weight=self.conformity_weight, follow_page=self.follow_page)


def rule_book() -> RuleBook:
    """Every rule of :data:`RULE_MODULES`, in one book."""
    book = RuleBook()
    for name in RULE_MODULES:
        book.add(importlib.import_module(name).RULES)
    return book


class OracleLLM:
    """A provider that answers by rules read off the prompt. Not a language model: tests only."""

    name = "oracle"
    model = "oracle-rules"

    def __init__(self, config: OracleConfig | None = None, ctx: object = None):
        # ``ctx`` is accepted for the factory's signature and deliberately not kept: the oracle
        # must not read anything of the run but its prompts.
        self.config = config or OracleConfig()
        self.book = rule_book()
        self.dispositions = self.config.dispositions()
        self.calls = 0
        log.warning("llm.oracle", message="using the ORACLE TEST MODEL: rules that read the prompt, not a language model")

    def describe(self) -> dict:
        """Every structured answer is shaped to its request by the rules (mode ``rules``)."""
        return {"name": self.name, "model": self.model,
                "structured": {"labels": ["rules"], "json": ["rules"], "prefixes": ["rules"]}}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        if self.config.latency_ms:
            await asyncio.sleep(self.config.latency_ms / 1000)
        text = self.book.answer(PromptView.of(request, self.dispositions))
        # tokens as ``townsquare estimate`` counts them (characters / 4), so a forecast can be held against an oracle run
        prompt_tokens = -(-sum(len(m.content) for m in request.messages) // CHARS_PER_TOKEN)
        structured = bool(request.labels or request.json_schema is not None or request.answer_prefixes)
        return LLMResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=-(-len(text) // CHARS_PER_TOKEN),
                           model=self.model, provider=self.name, meta={"mode": "rules"} if structured else {})


@hookimpl
def townsquare_register_llm_providers():
    return [LLMProviderSpec("oracle", OracleLLM, config_model=OracleConfig,
                            description="TEST ONLY: rules that answer from the prompt alone (pathway proofs)")]
