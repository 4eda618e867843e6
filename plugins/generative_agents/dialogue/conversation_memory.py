"""What an agent keeps of a conversation (Park et al. §4.3.2, §5; the reference code's
``perceive`` and ``reflect``): slot ``memory.sensory``, component ``conversation_memory``.

When a conversation ends, each side hands it to this component (:meth:`ConversationMemory.keep`),
which writes into the agent's memory, through the whole chain (Park's stream keeps everything):

* one ``chat`` record that says what the conversation was about (one call: the reference code's
  conversation summary, which is also what its agents' schedules show while they talk);
* one ``chat`` record per utterance (``Isabella Rodriguez said to Maria Lopez: ...``), so that a
  long conversation is recalled in parts and no prompt budget has to hold a whole transcript;
* a **planning thought** (``For Maria Lopez's planning: ...``) and a **memo** (what the agent
  takes away), each a ``reflection`` whose evidence is the conversation's record: the reference
  code's ``generate_planning_thought_on_convo`` and ``generate_memo_on_convo`` (the paper gives
  neither; ``planning_thought`` and ``memo`` switch them off). The planning thought is asked for
  as a JSON list of notes (:data:`PLANNING_SCHEMA`), empty when the conversation settled nothing;
  a thought or memo that says nothing (:func:`~..memory.memory_text.says_nothing`: "Nothing to
  plan for.", "None.") is not stored, so no memory fills with identical empty notes that crowd
  recall (``empty_thoughts`` counts the ones left out).

Record ids are set here (``chat-<time>-<partner>`` and ``.1``, ``.2``... for the utterances) so
that the thoughts can cite the conversation. The tier itself stores nothing and passes every
record on unchanged (it sits first in the chain); ``recall`` and ``since`` give nothing.

This is the component that stores the dialogue's memories: with ``-p no:conversation_memory``
the slot is empty, agents still talk (each turn sees the dialogue so far) but neither side
remembers the conversation afterwards, so nothing said travels beyond it.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, Sequence, runtime_checkable

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import MemoryRecord, MemorySpec, hookimpl

from ..memory.memory_text import says_nothing
from ..planning.agent_summary import memory_of
from ..prompt_files import fill, prompts_for

log = structlog.get_logger("townsquare.plugins.generative_agents.conversation_memory")

REQUIRED: dict[str, frozenset[str]] = {
    "about": frozenset({"name", "other", "transcript"}),
    "planning": frozenset({"name", "other", "transcript"}),
    "memo": frozenset({"name", "other", "transcript"}),
}
#: the planning thought's answer: what to remember while planning, one sentence a note, none
#: when the conversation settled nothing
PLANNING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"notes": {"type": "array", "items": {"type": "string"}, "maxItems": 5}},
    "required": ["notes"],
}


#: how a planning thought's record begins (the reference code's "For <name>'s planning: ...")
PLANNING_PREFIX = "For {name}'s planning: "


def planning_note(records: Sequence[MemoryRecord], name: str) -> str:
    """The note for planning among a conversation's ``records`` (what :meth:`ConversationMemory.keep`
    returned), without its prefix; "" when the conversation left none."""
    prefix = PLANNING_PREFIX.format(name=name)
    return next((r.text.removeprefix(prefix) for r in records if r.meta.get("thought") == "planning"), "")


def read_notes(value: Any) -> list[str]:
    """The notes of a planning-thought answer that say something, each on one line."""
    if not isinstance(value, dict) or not isinstance(value.get("notes"), list):
        raise ValueError('expected {"notes": ["...", ...]} (an empty list when there is nothing to plan for)')
    notes = [" ".join(n.split()) for n in value["notes"] if isinstance(n, str)]
    return [n if n.endswith((".", "!", "?")) else n + "." for n in notes if not says_nothing(n)]


@runtime_checkable
class KeepsConversations(Protocol):
    """A component that turns a finished conversation into the agent's memories."""

    async def keep(self, ctx: Any, other_id: str, other: str, transcript: Any) -> list[MemoryRecord]: ...


def conversation_memory_of(agent: Any) -> KeepsConversations | None:
    """The agent's component that keeps its conversations, if one fills a slot."""
    return next((c for c in agent.components.values() if isinstance(c, KeepsConversations)), None)


def conversation_minutes(transcript_text: str) -> int:
    """How long a conversation took, in minutes: the reference code's ``generate_convo``
    (characters / 8 / 30, rounded up; the paper gives no number), at least 1."""
    return max(1, math.ceil((len(transcript_text) // 8) / 30))


class ConversationMemoryConfig(BaseModel):
    """``[plugins.conversation_memory]`` settings."""

    model_config = ConfigDict(extra="forbid")

    #: store a planning thought on each conversation (the reference code's; not in the paper)
    planning_thought: bool = True
    #: store a memo on each conversation (the reference code's; not in the paper)
    memo: bool = True
    #: characters of the transcript one prompt shows (the latest turns are kept)
    transcript_chars: int = Field(2000, ge=200)
    #: characters of one utterance record
    utterance_chars: int = Field(400, ge=50)
    max_tokens: int = Field(120, gt=0)
    prompts_file: str | None = None


class ConversationMemory:
    """See the module docstring."""

    def __init__(self, config: ConversationMemoryConfig | None = None, prompts: dict[str, str] | None = None):
        self.config = config or ConversationMemoryConfig()
        self.prompts = prompts or {}
        self.kept = 0
        self.empty_thoughts = 0

    # ------------------------------------------------------------------ the Memory protocol (a pass-through tier)

    async def remember(self, ctx: Any, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        return list(records)

    async def recall(self, ctx: Any, query: str, k: int) -> list[MemoryRecord]:
        return []

    def since(self, when: Any) -> list[MemoryRecord]:
        return []

    # ------------------------------------------------------------------ conversations

    async def keep(self, ctx: Any, other_id: str, other: str, transcript: Any) -> list[MemoryRecord]:
        """Write the conversation into the agent's memory (see the module docstring); returns
        the records written."""
        memory = memory_of(ctx.agent)
        if not memory or not transcript.turns:
            return []
        cfg, name = self.config, ctx.agent.persona.name
        text = transcript.text()[-cfg.transcript_chars:]
        values = dict(name=name, other=other, transcript=text)
        key = f"chat-{ctx.now:%Y%m%dT%H%M}-{other_id}"
        llm = getattr(ctx, "llm", None)
        about = ""
        if llm is not None:
            about = " ".join((await llm.text(fill(self.prompts["about"], **values), purpose="conversation.about",
                                             max_tokens=cfg.max_tokens)).split())
        about = about or f"a conversation about {transcript.topic[:200]}"
        meta = {"with": other_id, "conversation": key, "turns": len(transcript.turns), "ended": transcript.ended}
        records = [MemoryRecord(f"{name} talked with {other}: {about}", kind="chat", created=ctx.now, last_access=ctx.now,
                                meta=dict(meta), id=key)]
        for i, turn in enumerate(transcript.turns, 1):
            listener = other if turn.name == name else name
            records.append(MemoryRecord(f"{turn.name} said to {listener}: {turn.text[: cfg.utterance_chars]}", kind="chat",
                                        created=ctx.now, last_access=ctx.now, meta=dict(meta, turn=i), id=f"{key}.{i}"))
        if llm is not None:
            for purpose, thought in (("planning", await self._planning(llm, values)), ("memo", await self._memo(llm, values))):
                if thought is None:
                    continue
                if says_nothing(thought):
                    self.empty_thoughts += 1
                    continue
                prefix = PLANNING_PREFIX.format(name=name) if purpose == "planning" else f"{name} "
                records.append(MemoryRecord(prefix + thought, kind="reflection", created=ctx.now, last_access=ctx.now,
                                            evidence=(key,), meta={"with": other_id, "conversation": key, "thought": purpose},
                                            id=f"{key}.{purpose}"))
        await memory.remember(ctx, records)
        self.kept += 1
        return records

    async def _planning(self, llm: Any, values: dict[str, str]) -> str | None:
        """The planning thought's notes as one text ("" when there are none); None when switched off."""
        if not self.config.planning_thought:
            return None
        notes = await llm.json(fill(self.prompts["planning"], **values), PLANNING_SCHEMA, purpose="conversation.planning",
                               default=[], validate=read_notes, max_tokens=self.config.max_tokens)
        return " ".join(notes)

    async def _memo(self, llm: Any, values: dict[str, str]) -> str | None:
        if not self.config.memo:
            return None
        return " ".join((await llm.text(fill(self.prompts["memo"], **values), purpose="conversation.memo",
                                        max_tokens=self.config.max_tokens)).split())

    def get_state(self) -> dict[str, Any]:
        return {"kept": self.kept, "empty_thoughts": self.empty_thoughts}

    def set_state(self, state: dict[str, Any]) -> None:
        self.kept = int(state.get("kept", 0))
        self.empty_thoughts = int(state.get("empty_thoughts", 0))


def build_conversation_memory(config: ConversationMemoryConfig | None, ctx: Any) -> ConversationMemory:
    config = config or ConversationMemoryConfig()
    return ConversationMemory(config, prompts_for("conversation", REQUIRED, config, ctx))


@hookimpl
def townsquare_register_memory():
    return [
        MemorySpec(
            "conversation_memory", build_conversation_memory, config_model=ConversationMemoryConfig, memory_kind="sensory",
            needs_llm=True, stand_in=False,
            description="Park et al.: a finished conversation becomes memories (what it was about, each utterance, "
                        "a planning thought and a memo); stores the dialogue's memories",
        )
    ]
