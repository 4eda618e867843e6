"""RecAgent's sensory memory (Wang et al., "Memory Module", sensory memory; Supplementary
Note A.1): slot ``memory.sensory``, component ``sensory_memory``.

Every observation the agent makes (entering the system, a page of recommendations, a watched
item and the feeling about it, a chat, a broadcast received) enters here first. Two steps,
asked of the LLM in one call: the observation is compressed into one informative sentence,
and the sentence is scored for importance, item-related content scoring higher than routine
events such as entering the system. The output is the paper's triplet M = <c, s, t>: the
record's ``text`` (c), ``importance`` (s, on a 1-10 scale) and ``created`` (t, the simulated
time), passed on to the next tier.

The paper keeps sensory memories only "a few hundred milliseconds": this tier keeps the last
``buffer`` records for inspection and checkpoints, but ``recall`` and ``since`` return nothing
(memory reading draws on short- and long-term memory only), so a record is never counted twice.
"Significant information is transferred to the short-term memory, while less important
information is discarded": records scoring below ``discard_below`` are dropped instead of
passed on. The paper gives no threshold; the default, 7 of 10, is the reference code's (it keeps
a record when ``score / 10 * 0.9 > 0.62``, i.e. a score of 7 or more). The prompt's scale
follows the paper's examples: experiences of and opinions about specific items (watching one,
feelings, ratings, chats or posts that name one) score 7-10, a bare list of items shown 4-6,
routine events such as entering the system 1-3; so what passes on is item-related.

When the LLM's answer cannot be parsed (after one repair), the raw observation is passed on
with ``default_importance`` (it is not discarded: no answer is no judgement) and a
``parse_failure`` is recorded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, MemoryRecord, MemorySpec, StepContext, hookimpl

from ..prompts import fill, load_prompts
from .record_store import RecordStore

log = structlog.get_logger("townsquare.plugins.recagent.sensory_memory")

IMPORTANCE_SCALE = 10.0
SCHEMA = {"type": "object", "properties": {"sentence": {"type": "string"}, "importance": {"type": "number"}},
          "required": ["sentence", "importance"]}


class SensoryMemoryConfig(BaseModel):
    """``[plugins.sensory_memory]`` settings."""

    model_config = ConfigDict(extra="forbid")

    buffer: int = Field(5, ge=0, description="recent compressed records kept for inspection")
    discard_below: float = Field(7.0, ge=0, le=IMPORTANCE_SCALE, description="drop records less important than this (the reference code's 7)")
    default_importance: float = Field(3.0, ge=1, le=IMPORTANCE_SCALE, description="importance when the LLM answer is unusable")
    prompts_file: str | None = None


def _answer(value: Any) -> tuple[str, float]:
    sentence = str(value["sentence"]).strip()
    if not sentence:
        raise ValueError("empty sentence")
    importance = float(value["importance"])
    if not 1 <= importance <= IMPORTANCE_SCALE:
        raise ValueError(f"importance {importance} outside 1-{IMPORTANCE_SCALE:g}")
    return " ".join(sentence.split()), importance


class SensoryMemory:
    def __init__(self, config: SensoryMemoryConfig | None = None, base_dir: str = "."):
        self.config = config or SensoryMemoryConfig()
        self.prompt = load_prompts("memory", {"sensory": frozenset({"name", "observation"})},
                                   self.config.prompts_file, base_dir)["sensory"]
        self.store = RecordStore("s")

    async def compress(self, ctx: StepContext, record: MemoryRecord) -> tuple[MemoryRecord, bool]:
        """The compressed, scored record, and whether the LLM's answer was usable."""
        llm = ctx.require_llm("sensory_memory")
        prompt = fill(self.prompt, name=ctx.agent.persona.name, observation=record.text)
        answer = await llm.json(prompt, SCHEMA, purpose="recagent.sensory", default=None, validate=_answer)
        text, importance = answer if answer is not None else (record.text, self.config.default_importance)
        compressed = replace(record, text=text, importance=importance, id=self.store.new_id(), created=record.created or ctx.now,
                             last_access=ctx.now, meta={**record.meta, "observation": record.text} if text != record.text else record.meta)
        return compressed, answer is not None

    async def remember(self, ctx: StepContext, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        passed = []
        for record in records:
            compressed, scored = await self.compress(ctx, record)
            self.store.records.append(compressed)
            if not scored or compressed.importance >= self.config.discard_below:
                passed.append(compressed)
            else:
                log.debug("sensory.discarded", agent=ctx.agent.id, importance=compressed.importance)
        if len(self.store.records) > self.config.buffer:
            del self.store.records[: len(self.store.records) - self.config.buffer]
        return passed

    async def recall(self, ctx: StepContext, query: str, k: int) -> list[MemoryRecord]:
        return []

    def since(self, when: Any) -> list[MemoryRecord]:
        return []

    def get_state(self) -> dict[str, Any]:
        return self.store.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.store.set_state(state)


def build_sensory_memory(config: SensoryMemoryConfig | None, ctx: BuildContext) -> SensoryMemory:
    return SensoryMemory(config, ctx.base_dir)


@hookimpl
def townsquare_register_memory():
    return [MemorySpec(
        "sensory_memory", build_sensory_memory, config_model=SensoryMemoryConfig, memory_kind="sensory", needs_llm=True,
        stand_in=False, description="RecAgent: compress each observation to one sentence and score its importance",
    )]
