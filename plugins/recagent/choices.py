"""A step's choices as data, so a person can take an agent's place (Wang et al., "Role
Playing"). Not a plugin.

The RecAgent policy never asks the LLM directly for a decision: it builds a :class:`Choice`
(what is being decided, the full prompt, the allowed answers or free text, the default) and
hands it to its ``decider``. :class:`LLMDecider` answers with the run's LLM (labels through
``LLMClient.choose``, which repairs once and then falls back to the default; free text through
``LLMClient.text``). A role-play front end replaces the decider with one that shows the
choice to a person and returns their answer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from townsquare.api import StepContext


@dataclass(frozen=True)
class Choice:
    """``key`` names the decision (activity, page, search_query, feeling, rating, social,
    partner, chat_turn, broadcast); ``options`` are the allowed answers (empty: free text)."""

    key: str
    prompt: str
    options: tuple[str, ...] = ()
    default: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["options"] = list(self.options)
        return data


class Decider(Protocol):
    async def decide(self, ctx: StepContext, choice: Choice) -> str: ...


class LLMDecider:
    async def decide(self, ctx: StepContext, choice: Choice) -> str:
        llm = ctx.require_llm("recagent_policy")
        purpose = f"recagent.{choice.key}"
        if choice.options:
            return await llm.choose(choice.prompt, choice.options, purpose=purpose, default=choice.default)
        answer = " ".join((await llm.text(choice.prompt, purpose=purpose)).split())
        return answer or choice.default
