"""One step of Zhou et al.'s social-media agent (§3.1.2), shared by the ``social_agent`` and
``social_agent_combined`` policies. Not a plugin.

A step, each time the agent is active:

1. Asks the planner (slot ``planner``, when it offers ``session``: ``activity_plan``) whether
   this round is in the browsing window, how many posts are due, and the action
   probabilities. Without such a planner the agent browses every active round with no quotas
   and posts one post with probability ``post_probability_without_plan``.
2. Browse: reads ``feed_size`` posts of its home timeline (ranked by the run's recommender)
   and marks them read (one ``browse`` action).
3. Per browsed post, in feed order: the persona text retrieved with the post as the query
   (``persona.context``), then the like / reblog / comment decisions (:meth:`decide`: three
   calls in ``social_agent``, one in ``social_agent_combined``). The plan's probabilities are
   quotas for the session (:meth:`.plan_parsing.PlanSession.quota`); once a quota is used up
   the agent stops asking about that action, and once all are used up it stops asking.
4. Post: the due posts (:func:`.post_writer.write_posts`).

Per-decision routing (``similarity_decides``): the decision kinds listed there (``like``,
``reblog``) are taken by the embedding baseline's similarity rule
(:class:`townsquare.api.SimilarityRule`: persona-post cosine against
``similarity_rule``'s thresholds, calibrated by default: the plan's share of the browsed posts
closest to the persona) instead of the LLM, and only the other kinds are asked
(:meth:`decide` gets only those). Every like / reblog / comment action says who decided it in
``Action.detail["decided_by"]`` (``llm`` or ``similarity``, with the cosine), and each
``browse`` action's detail maps every decision kind to its decider, so the trace shows the
routing even for posts that got no action. The LLM still writes comments and posts.

Every decision is a structured answer declared next to its prompt (``prompts/actions.toml``,
``[answers.*]``: fixed labels, the comment's two openings, a validated schema) and asked
through the LLM layer, which holds the model to it (:meth:`townsquare.api.LLMClient.ask`), so
nothing a post says can make the agent do anything outside like, reblog, comment on that post.
The component's ``answers`` lists the purposes it asks (the slot table shows the mode each
runs in).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import Action, AnswerFormat, agent_memory
from townsquare.lib.similarity_rule import SimilarityRule, SimilarityRuleConfig

from .action_prompts import action_answers, action_prompts
from ..memory.action_memory import observation_of
from ..memory.short_term_needs import DuplicateCheck, EngagementLog
from ..planning.plan_parsing import PlanSession
from ..persona.persona_access import persona_text
from .post_writer import cut, write_posts

log = structlog.get_logger("townsquare.plugins.social_agent")

#: The slots Zhou et al.'s agent works with and the paper's component for each (§3.1):
#: a population that leaves one of them out gets this one, or the documented fallback
#: (the highest-priority enabled alternative) when its plugin is disabled.
ZHOU_SLOTS: dict[str, str | None] = {
    "persona.context": "dynamic_persona",
    "persona.knowledge": "knowledge_boundary",
    "memory.short_term": "action_memory",
    "planner": "activity_plan",
    "reflector": "follow_reflection",
}

#: What the policy needs of those slots beyond their slot protocol, checked when an agent is
#: built: a replacement short-term memory must offer both, or the run stops naming the method;
#: with memory.short_term = "none" the duplicate check is off (logged as slot.feature_off).
ZHOU_REQUIRES: dict[str, tuple[type, ...]] = {"memory.short_term": (DuplicateCheck, EngagementLog)}

#: The three decisions per browsed post, in the order they are taken.
DECISIONS = ("like", "reblog", "comment")

#: Decisions the similarity rule can take instead of the LLM (a comment needs text; follows
#: are the reflector's).
ROUTABLE = Literal["like", "reblog"]


class SocialAgentConfig(BaseModel):
    """Settings shared by ``[plugins.social_agent]`` and ``[plugins.social_agent_combined]``."""

    model_config = ConfigDict(extra="forbid")

    feed_size: int = Field(10, gt=0, description="posts read per browse (the paper does not say)")
    max_chars: int = Field(500, gt=0, description="longest post or comment (Zhou §3.1.2: 500)")
    post_probability_without_plan: float = Field(0.1, ge=0.0, le=1.0)
    comment_max_tokens: int = Field(200, gt=0)
    #: "model": the model writes its post topics from the persona (Zhou §3.1.2); "interests": it
    #: picks each among the persona's hobbies (a closed set the backend holds it to; for small
    #: offline models, whose own topics are mostly noise: README, groundedness)
    topics: Literal["model", "interests"] = "model"
    #: temperature of the label decisions: where the backend scores the labels, the label is
    #: drawn from the model's probabilities at this temperature (1: as the model gives them)
    decision_temperature: float = Field(1.0, ge=0, le=2)
    post_max_tokens: int = Field(400, gt=0)
    prompts_file: str | None = None
    #: False: the agent never browses, it only posts (Zhou §4.1's initial agents, who fill the
    #: empty sandbox before the regular agents arrive)
    browse: bool = True
    #: posts written at the agent's first step on top of the plan's schedule (Zhou §4.1: 150
    #: initial agents publish 1,050 posts, 7 each)
    initial_posts: int = Field(0, ge=0)
    #: decision kinds taken by the embedding baseline's similarity rule instead of the LLM;
    #: None: the component's default (none for ``social_agent``, like and reblog for
    #: ``social_agent_routed``)
    similarity_decides: tuple[ROUTABLE, ...] | None = None
    #: the similarity rule's thresholds: calibrated by default (per agent, the plan's share of the
    #: browsed posts closest to the persona: :class:`townsquare.api.SimilarityRuleConfig`)
    similarity_rule: SimilarityRuleConfig = Field(default_factory=lambda: SimilarityRuleConfig(thresholds="calibrated"))


@dataclass(frozen=True)
class Decision:
    like: bool = False
    reblog: bool = False
    comment: str | None = None
    #: per kind asked: how it was decided (``mode``; ``p``, the probability the model gave acting)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)


class SocialAgentBase:
    """The step; subclasses implement :meth:`decide`."""

    name = "social_agent"

    #: the decisions the similarity rule takes when the config leaves ``similarity_decides`` unset
    default_routed: tuple[str, ...] = ()
    #: decision kind -> the purpose it is asked with (subclasses ask differently)
    decision_purposes: dict[str, str] = {"like": "like", "reblog": "reblog", "comment": "comment"}

    def __init__(self, config: SocialAgentConfig, prompts: dict[str, str], answers: dict[str, AnswerFormat] | None = None):
        self.config = config
        self.prompts = prompts
        self.declared = answers or action_answers(None)
        chosen = config.similarity_decides if config.similarity_decides is not None else self.default_routed
        self.routed = tuple(k for k in DECISIONS if k in chosen)
        self.rule = SimilarityRule(config.similarity_rule)
        self.deciders = {k: "similarity" if k in self.routed else "llm" for k in DECISIONS}
        self.counts = {"sessions": 0, "decided_posts": 0, "posts": 0}
        self.initial_left = config.initial_posts

    @property
    def answers(self) -> dict[str, AnswerFormat]:
        """The structured purposes this policy asks the LLM (routed decisions are not asked)."""
        asked = [self.decision_purposes[k] for k in DECISIONS if k not in self.routed] + ["topics"]
        return {purpose: self.declared[purpose] for purpose in dict.fromkeys(asked)}

    async def decide(self, ctx: Any, llm: Any, post: Any, persona: str, open_kinds: tuple[str, ...]) -> Decision:
        """The decisions on ``post`` for the kinds in ``open_kinds`` (others stay False/None)."""
        raise NotImplementedError

    async def step(self, ctx: Any) -> list[Action]:
        cfg = self.config
        llm = ctx.require_llm(self.name)
        me = ctx.agent.id
        session = await session_of(ctx)
        actions: list[Action] = []
        if cfg.browse and (session is None or session.browse):
            feed = await ctx.home_timeline(cfg.feed_size)
            if feed:
                actions.append(Action(me, "browse", post_ids=tuple(p.id for p in feed), detail={"decided_by": dict(self.deciders)}))
                # the browsed posts, once, as observations for any memory design (a stream keeps
                # them; Zhou's action memory notes who wrote what and passes them on)
                chain = agent_memory(ctx.agent)
                if chain:
                    await chain.remember(ctx, [observation_of(p) for p in feed])
                left = {k: session.quota(k, len(feed), ctx.rng) if session else len(feed) for k in DECISIONS}
                self.counts["sessions"] += 1
                similarity = await self.rule.similarities(ctx, [p.text for p in feed]) if self.routed else None
                for index, post in enumerate(feed):
                    open_kinds = tuple(k for k in DECISIONS if left[k] > 0)
                    if not open_kinds:
                        break
                    asked = tuple(k for k in open_kinds if k not in self.routed)
                    decision = Decision()
                    if asked:
                        persona = await persona_text(ctx, post.text)
                        decision = await self.decide(ctx, llm, post, persona, asked)
                    taken = {"like": decision.like, "reblog": decision.reblog, "comment": bool(decision.comment)}
                    details = {k: {"decided_by": "llm", **decision.evidence.get(k, {})} for k in DECISIONS}
                    if similarity is not None:
                        sim = float(similarity[index])
                        for kind in self.routed:
                            # calibrated thresholds take the plan's share of the posts closest to the persona
                            share = None if session is None else {"like": session.like, "reblog": session.forward}[kind] / 100
                            taken[kind] = self.rule.decides(kind, sim, share)
                            details[kind] = {"decided_by": "similarity", "similarity": round(sim, 4)}
                    self.counts["decided_posts"] += 1
                    for kind in DECISIONS:
                        if not (taken[kind] and kind in open_kinds):
                            continue
                        text = cut(decision.comment, cfg.max_chars) if kind == "comment" else None
                        actions.append(Action(me, kind, target_post=post.id, text=text, detail=details[kind]))
                        left[kind] -= 1
        if session is not None:
            due = session.posts_due
        else:
            due = 1 if cfg.post_probability_without_plan > 0 and ctx.rng.random() < cfg.post_probability_without_plan else 0
        due += self.initial_left
        self.initial_left = 0
        if due:
            posts = await write_posts(ctx, llm, self.prompts, due, topics_answer=self.declared["topics"], limit=cfg.max_chars,
                                      max_tokens=cfg.post_max_tokens, topics_among_interests=cfg.topics == "interests")
            self.counts["posts"] += len(posts)
            actions += posts
        return actions

    def get_state(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "initial_left": self.initial_left, "similarity_rule": self.rule.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.counts = {**self.counts, **state.get("counts", {})}
        self.initial_left = state.get("initial_left", 0)
        # a checkpoint written before the calibrated thresholds kept the persona vector alone
        self.rule.set_state(state.get("similarity_rule", state.get("persona_vector")))


async def session_of(ctx: Any) -> PlanSession | None:
    """This turn's session: the one the planner left in ``ctx.plan`` when the engine asked it
    whether the agent is active, else (a policy called on its own) the planner's answer now;
    None without a planner that offers sessions (``activity_plan``)."""
    plan = getattr(ctx, "plan", None)
    if isinstance(plan, PlanSession):
        return plan
    planner = ctx.agent.components.get("planner")
    return await planner.session(ctx) if planner is not None and hasattr(planner, "session") else None


def load_prompts_for(config: SocialAgentConfig, ctx: Any) -> tuple[dict[str, str], dict[str, AnswerFormat]]:
    """The prompts and their declared answers, ``config.prompts_file``'s replacing the built-in ones."""
    base_dir = getattr(ctx, "base_dir", ".") or "."
    return action_prompts(config.prompts_file, base_dir), action_answers(config.prompts_file, base_dir)
