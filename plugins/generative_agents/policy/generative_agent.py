"""A generative agent on a social platform: slot ``policy``, component
``generative_agent``.

Park et al.'s loop (perceive -> retrieve -> act, §4) applied to a feed. Each time the agent is
active:

1. **Perceive**: it reads ``feed_size`` posts of its home timeline (one ``browse``) and each
   post becomes an ``observation`` record ("<author> posted: <text>"), remembered through the
   agent's memory chain (:func:`townsquare.api.agent_memory`): Park's stream, Zhou et al.'s
   action memory, or any design that implements the protocol.
2. **Retrieve and decide**: per post, the memory recalls the ``recall_k`` records best for the
   post's text (the post's own observation left out), and one labelled decision picks
   ``like`` / ``reblog`` / ``comment`` / ``ignore`` (``LLMClient.choose``: one repair request,
   then ``ignore``). A comment's text is then written from the same inputs. The agent's own
   actions are remembered as ``action`` records ("I liked a3's post: ...").
   When the planner offers ``react`` (Park's ``day_plan``), the first ``react_posts`` posts are
   put to it: react or continue, and a re-plan of the rest of the day on a reaction (§4.3.1).
3. **Post**: with probability ``post_probability`` it writes one post from today's plan (the
   ``plan`` records created since midnight, which a planner stores in the memory) and what it
   recalls for that plan (or for its persona when it has no plan).

Prompts are bounded: at most ``recall_k`` memories and ``memory_chars``
characters of them, the persona cut to ``persona_chars``, the plan to ``plan_chars``, a post to
``max_chars``; so a prompt's size does not grow with the run. Nothing a post says can make the
agent do anything outside the four labels on that post.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import Action, MemoryRecord, PolicySpec, agent_memory, hookimpl

from ..memory.memory_text import cut, memory_lines, newest_bounded
from ..prompt_files import fill, load_prompts, prompts_for

log = structlog.get_logger("townsquare.plugins.generative_agents.generative_agent")

#: the one labelled decision per post
DECISION_LABELS: tuple[str, ...] = ("like", "reblog", "comment", "ignore")
PAST = {"like": "liked", "reblog": "reblogged"}
_PERSONA_POST = frozenset({"name", "persona", "memories", "author", "post"})
REQUIRED = {"decide": _PERSONA_POST, "comment": _PERSONA_POST, "post": frozenset({"name", "persona", "plan", "memories"})}

#: Park et al.'s components for the slots this policy uses (a planner, when a scenario names
#: one, stores its plans in the memory, where the policy reads them)
PARK_SLOTS: dict[str, str | None] = {
    "memory.stream": "memory_stream",
    "memory.retrieval": "park_retrieval",
    "reflector": "park_reflection",
    "planner": "day_plan",
    "persona.context": "agent_summary",
    "memory.sensory": "conversation_memory",
}


class GenerativeAgentConfig(BaseModel):
    """``[plugins.generative_agent]`` settings."""

    model_config = ConfigDict(extra="forbid")

    feed_size: int = Field(10, gt=0, description="posts read per step")
    recall_k: int = Field(5, gt=0, description="memories shown per prompt (top-k)")
    memory_chars: int = Field(1200, gt=0, description="character budget of the memories in one prompt")
    persona_chars: int = Field(600, gt=0, description="persona text shown, at most")
    plan_chars: int = Field(600, gt=0, description="today's plan shown, at most")
    max_chars: int = Field(500, gt=0, description="longest post or comment (and post shown)")
    react_posts: int = Field(1, ge=0, description="feed posts per step the planner is asked to react to "
                             "(Park §4.3.1, react or continue the plan; each is one decision); 0: never")
    post_probability: float = Field(0.3, ge=0.0, le=1.0, description="chance to write a post per active step")
    comment_max_tokens: int = Field(150, gt=0)
    post_max_tokens: int = Field(200, gt=0)
    prompts_file: str | None = None


class GenerativeAgent:
    def __init__(self, config: GenerativeAgentConfig | None = None, prompts: dict[str, str] | None = None):
        self.config = config or GenerativeAgentConfig()
        self.prompts = prompts or load_prompts("policy", REQUIRED)
        self.counts = {label: 0 for label in DECISION_LABELS} | {"posts": 0}

    def _about(self, ctx: Any) -> dict[str, str]:
        persona = ctx.agent.persona
        return {"name": persona.name, "persona": cut(persona.text, self.config.persona_chars)}

    async def _recall(self, ctx: Any, memory: Any, query: str, skip_post: str | None = None) -> str:
        cfg = self.config
        if not memory:
            return memory_lines([], cfg.recall_k, cfg.memory_chars)
        found = await memory.recall(ctx, query, cfg.recall_k + (skip_post is not None))
        found = [r for r in found if skip_post is None or r.meta.get("post_id") != skip_post or r.kind != "observation"]
        return memory_lines(found, cfg.recall_k, cfg.memory_chars)

    def todays_plan(self, ctx: Any, memory: Any) -> str:
        """The ``plan`` records created since midnight (simulated), newest kept, bounded."""
        if not memory:
            return ""
        midnight = ctx.now.replace(hour=0, minute=0, second=0, microsecond=0)
        plans = [r for r in memory.since(midnight - timedelta(microseconds=1)) if r.kind == "plan"]
        kept = newest_bounded(plans, len(plans), self.config.plan_chars)
        return memory_lines(kept, len(kept), self.config.plan_chars, empty="") if kept else ""

    async def step(self, ctx: Any) -> list[Action]:
        cfg = self.config
        llm = ctx.require_llm("generative_agent")
        memory = agent_memory(ctx.agent)
        me = ctx.agent.id
        about = self._about(ctx)
        actions: list[Action] = []
        done: list[MemoryRecord] = []
        feed = await ctx.home_timeline(cfg.feed_size)
        if feed:
            actions.append(Action(me, "browse", post_ids=tuple(p.id for p in feed)))
            if memory:
                await memory.remember(ctx, [
                    MemoryRecord(f"{p.author_id} posted: {cut(p.text, cfg.max_chars)}", kind="observation",
                                 meta={"post_id": p.id, "author_id": p.author_id}) for p in feed
                ])
        planner = ctx.agent.components.get("planner")
        if cfg.react_posts and hasattr(planner, "react"):
            for post in feed[:cfg.react_posts]:
                await planner.react(ctx, f"{post.author_id} posted: {cut(post.text, cfg.max_chars)}", about=post.author_id)
        for post in feed:
            values = {**about, "author": post.author_id, "post": cut(post.text, cfg.max_chars),
                      "memories": await self._recall(ctx, memory, post.text, skip_post=post.id)}
            choice = await llm.choose(fill(self.prompts["decide"], **values), DECISION_LABELS, purpose="decide",
                                      default="ignore")
            self.counts[choice] += 1
            shown = cut(post.text, 200)
            if choice in ("like", "reblog"):
                actions.append(Action(me, choice, target_post=post.id))
                done.append(MemoryRecord(f"I {PAST[choice]} {post.author_id}'s post: {shown}", kind="action",
                                         meta={"post_id": post.id}))
            elif choice == "comment":
                answer = await llm.text(fill(self.prompts["comment"], **values), purpose="comment",
                                        max_tokens=cfg.comment_max_tokens)
                text = cut(answer.strip().strip('"'), cfg.max_chars)
                if text:
                    actions.append(Action(me, "comment", target_post=post.id, text=text))
                    done.append(MemoryRecord(f"I replied \"{text}\" to {post.author_id}'s post: {shown}", kind="action",
                                             meta={"post_id": post.id}))
        if cfg.post_probability > 0 and ctx.rng.random() < cfg.post_probability:
            plan = self.todays_plan(ctx, memory)
            query = plan or ctx.agent.persona.text
            prompt = fill(self.prompts["post"], **about, plan=plan or "(no plan for today)",
                          memories=await self._recall(ctx, memory, query))
            text = cut((await llm.text(prompt, purpose="post", max_tokens=cfg.post_max_tokens)).strip().strip('"'), cfg.max_chars)
            if text:
                actions.append(Action(me, "post", text=text))
                done.append(MemoryRecord(f"I posted: {text}", kind="action"))
                self.counts["posts"] += 1
        if done and memory:
            await memory.remember(ctx, done)
        return actions

    def get_state(self) -> dict[str, Any]:
        return {"counts": dict(self.counts)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.counts = {**self.counts, **state.get("counts", {})}


def build_generative_agent(config: GenerativeAgentConfig | None, ctx: Any) -> GenerativeAgent:
    config = config or GenerativeAgentConfig()
    return GenerativeAgent(config, prompts_for("policy", REQUIRED, config, ctx))


@hookimpl
def townsquare_register_policies():
    return [
        PolicySpec(
            "generative_agent", build_generative_agent, config_model=GenerativeAgentConfig, priority=50, needs_llm=True,
            uses=PARK_SLOTS,
            description="Park et al.: feed posts become memories; per post, recall then one like/reblog/comment/ignore decision",
        )
    ]
