"""A step's choices as data, so a person can take an agent's place (Wang et al., "Role
Playing"). Not a plugin.

The RecAgent policy never asks the LLM directly for a decision: it builds a :class:`Choice`
(what is being decided, the full prompt, the allowed answers or free text, the default) and
hands it to its ``decider``. :class:`LLMDecider` answers with the run's LLM (labels through
``LLMClient.choose``, which repairs once and then falls back to the default; free text through
``LLMClient.text``). :class:`PersonDecider` shows the choice to a person and returns their
answer (``townsquare run --play AGENT``: the policy's ``play`` seat).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Protocol

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


class PersonDecider:
    """A person answers each choice: ``read()`` returns a line or None at end of input,
    ``write(text)`` shows text. The person sees what the agent would be prompted with and the
    allowed answers; an answer may be a label or its number. End of input answers every
    remaining choice with its default."""

    person = True

    def __init__(self, read: Callable[[], str | None], write: Callable[[str], None]):
        self.read, self.write = read, write
        self.finished = False

    async def decide(self, ctx: StepContext, choice: Choice) -> str:
        self.write(f"\n=== round {ctx.round}, {ctx.now:%A %H:%M}: you are {ctx.agent.persona.name} ({ctx.agent.id}), deciding: {choice.key} ===")
        self.write(choice.prompt)
        if choice.options:
            self.write("choose: " + " | ".join(f"[{n}] {label}" for n, label in enumerate(choice.options, 1)))
        else:
            self.write("type your answer (a blank line: the default)")
        while not self.finished:
            line = self.read()
            if line is None:
                self.finished = True
                break
            line = line.strip()
            if not choice.options:
                return line or choice.default
            if line.isdigit() and 1 <= int(line) <= len(choice.options):
                return choice.options[int(line) - 1]
            if line in choice.options:
                return line
            self.write(f"  ? choose one of: {', '.join(choice.options)} (or its number)")
        return choice.default
