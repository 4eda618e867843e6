"""RecAgent's memory reflection (Wang et al., "Memory Module", memory reflection): slot
``reflector``, component ``recagent_reflection``. Disable the plugin for the paper's
"w/o reflection" variant.

Reflection happens only in long-term memory: every round this component asks the agent's
``memory.long_term`` tier to reflect (:meth:`.long_term_memory.LongTermMemory.reflect`: insights
once enough importance has accumulated, then near-duplicates merged). It returns no actions.
Without a long-term tier it does nothing.
"""

from __future__ import annotations

from typing import Any

from townsquare.api import Action, BuildContext, ReflectorSpec, StepContext, hookimpl


class RecAgentReflection:
    async def reflect(self, ctx: StepContext) -> list[Action]:
        tier = ctx.agent.components.get("memory.long_term")
        if tier is not None and hasattr(tier, "reflect"):
            await tier.reflect(ctx)
        return []

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_recagent_reflection(config: None, ctx: BuildContext) -> RecAgentReflection:
    return RecAgentReflection()


@hookimpl
def townsquare_register_reflectors():
    return [ReflectorSpec("recagent_reflection", build_recagent_reflection, needs_llm=True, stand_in=False,
                          description="RecAgent: reflection over long-term memory, merging near-duplicates")]
