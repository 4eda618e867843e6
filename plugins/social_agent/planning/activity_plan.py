"""Zhou et al.'s planning module (§3.1.3, appendix table 11): slot ``planner``, component
``activity_plan``.

From the persona and the agent's activity level the model writes a plan with the paper's items
(browsing period, probabilities of liking, forwarding and commenting, posting period, posts per
week; see :mod:`.plan_parsing`), as the JSON object declared in ``prompts/actions.toml``
(``[answers.plan]``): on a backend that constrains decoding it parses by construction. The plan
is made once, the first time the engine asks whether the agent is active, and kept in
checkpoints (the paper does not say it is ever remade).

How the Pareto level enters (§3.2.3: "user activity and persona information are input into
the plan generation process"): only through the plan. The agent's level is mapped to (0, 1]
in proportion to the level at the 99th percentile of its population's Pareto distribution
(:func:`.plan_parsing.activity_fraction`: ``min(1, x / x_0.99)``, so most agents read low
and a few read 1, as the paper's long tail has it) and shown to the model, which sets the
windows, probabilities and frequency. :meth:`ActivityPlanner.is_active` then decides every
round: True when the round overlaps the day's browsing window or a post is due, False
otherwise; the engine's own activity draw is overridden.

The answer is checked strictly (:func:`.plan_parsing.plan_from_answer`). One that does not fit
gets one repair request; if that fails too the agent gets :func:`.plan_parsing.fallback_plan`
(drawn from its activity level and its own random stream), the run logs a warning with the
count of fallbacks so far and records a ``parse_failure``. ``get_state()["source"]`` says
which: ``llm``, ``llm_repaired`` or ``fallback``.

Policies read the plan through :meth:`ActivityPlanner.session` (browse now? how many posts
due? the probabilities that become per-session quotas).
"""

from __future__ import annotations

from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import AnswerFormat, PlannedTurn, PlannerSpec, hookimpl

from ..actions.action_prompts import action_answers, action_prompts, fill
from ..persona.persona_access import full_persona_text
from .plan_parsing import FULL_ACTIVITY_QUANTILE, Clock, Plan, PlanSession, activity_fraction, fallback_plan, in_window, plan_from_answer, posts_in_round

log = structlog.get_logger("townsquare.plugins.social_agent.planning.activity_plan")


class ActivityPlanConfig(BaseModel):
    """``[plugins.activity_plan]`` settings."""

    model_config = ConfigDict(extra="forbid")

    #: "weekday": "day x" is the x-th day of each simulated week (one posting window a week);
    #: "daily": the posting period recurs every day and the weekly posts spread over all seven.
    post_days: Literal["weekday", "daily"] = "weekday"
    #: a plan asking for more posts a week than this is malformed
    max_posts_per_week: int = Field(70, ge=0)
    max_tokens: int = Field(200, gt=0)
    #: sampling temperature of the plan (1: the model's own distribution over plans)
    temperature: float = Field(1.0, ge=0, le=2)
    prompts_file: str | None = None
    #: the Pareto quantile shown as "full activity level" 1 (see ``activity_fraction``)
    full_activity_quantile: float = Field(FULL_ACTIVITY_QUANTILE, gt=0.0, lt=1.0)


class ActivityPlanner:
    """Makes the plan and answers, each round, whether the agent is active."""

    def __init__(self, config: ActivityPlanConfig, prompts: dict[str, str], activity_level: float,
                 alpha: float = 2.0, x_min: float = 1.0, answers: dict[str, AnswerFormat] | None = None):
        self.config = config
        self.prompts = prompts
        self.answers = {"plan": (answers or action_answers(None))["plan"]}
        self.activity = activity_fraction(activity_level, alpha, x_min, config.full_activity_quantile)
        self.plan: Plan | None = None
        self.source: str | None = None
        self.answer: str | None = None

    async def ensure_plan(self, ctx: Any) -> Plan:
        if self.plan is not None:
            return self.plan
        llm = ctx.require_llm("activity_plan")
        prompt = fill(self.prompts["plan"], activity=f"{self.activity:.2f}", persona=full_persona_text(ctx.agent.persona))
        answer = await llm.ask(prompt, self.answers["plan"], default=None, max_tokens=self.config.max_tokens,
                               temperature=self.config.temperature,
                               validate=lambda value: plan_from_answer(value, self.config.max_posts_per_week))
        if answer.fallback:  # the LLM layer recorded the parse_failure and warned
            plan, source = fallback_plan(self.activity, ctx.rng), "fallback"
        else:
            plan, source = answer.value, "llm_repaired" if answer.outcome == "repaired" else "llm"
        self.plan, self.source, self.answer = plan, source, answer.text[:1000]
        log.debug("plan.made", agent=ctx.agent.id, source=source, mode=answer.mode, activity=self.activity)
        return plan

    def posts_due(self, ctx: Any) -> int:
        assert self.plan is not None
        clock = Clock.from_step(ctx.now, ctx.round, ctx.minutes_per_round)
        return posts_in_round(self.plan, clock, ctx.round, daily=self.config.post_days == "daily")

    async def session(self, ctx: Any) -> PlanSession:
        plan = await self.ensure_plan(ctx)
        return PlanSession(
            browse=in_window(plan.browse, ctx.now, ctx.minutes_per_round), posts_due=self.posts_due(ctx),
            like=plan.like, forward=plan.forward, comment=plan.comment,
        )

    async def plan_turn(self, ctx: Any) -> PlannedTurn:
        """Whether the plan has the agent browse or post this round, with the session it read
        (the policy gets it as ``ctx.plan``: one read of the plan per turn)."""
        session = await self.session(ctx)
        return PlannedTurn(active=session.browse or session.posts_due > 0, plan=session)

    async def is_active(self, ctx: Any) -> bool:
        """Whether the plan has the agent browse or post this round (:meth:`plan_turn`'s verdict)."""
        return bool((await self.plan_turn(ctx)).active)

    def get_state(self) -> dict[str, Any]:
        return {
            "plan": None if self.plan is None else self.plan.to_dict(),
            "source": self.source, "answer": self.answer, "activity": self.activity,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        plan = state.get("plan")
        self.plan = None if plan is None else Plan.from_dict(plan)
        self.source = state.get("source")
        self.answer = state.get("answer")
        self.activity = float(state.get("activity", self.activity))
        self._due = None


def pareto_parameters(ctx: Any) -> tuple[float, float]:
    """(alpha, x_min) of the activity model the agent's level was drawn from: its population's
    ``activity`` table, else the scenario's ``[activity]``; (2, 1) without a scenario."""
    scenario = getattr(ctx, "scenario", None)
    activity = getattr(scenario, "activity", None)
    for population in getattr(scenario, "populations", None) or ():
        if population.name == getattr(ctx, "population", None) and population.activity is not None:
            activity = population.activity
    if activity is None:
        return 2.0, 1.0
    return float(activity.alpha), float(activity.x_min)


def build_activity_plan(config: ActivityPlanConfig | None, ctx: Any) -> ActivityPlanner:
    config = config or ActivityPlanConfig()
    agent = getattr(ctx, "agent", None)
    level = agent.activity if agent is not None else 1.0
    alpha, x_min = pareto_parameters(ctx)
    base_dir = getattr(ctx, "base_dir", ".")
    return ActivityPlanner(config, action_prompts(config.prompts_file, base_dir), level, alpha, x_min,
                           action_answers(config.prompts_file, base_dir))


@hookimpl
def townsquare_register_planners():
    return [
        PlannerSpec(
            "activity_plan", build_activity_plan, config_model=ActivityPlanConfig, priority=100, needs_llm=True,
            description="Zhou et al.: an LLM-written plan (browse window, action probabilities, posting schedule)",
        )
    ]
