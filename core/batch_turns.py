"""Turns taken in batches: a policy that can decide many agents at once does so in one call.

A policy component offers the batch path with two attributes:

* ``batch``: true when it may be used (a setting, so a study can compare both paths);
* ``step_batch(ctxs)``: an ``async`` static method handed the :class:`~townsquare.components.StepContext`
  of every active agent of the round whose policy is of its class, in agent order; it returns
  for each exactly the actions ``step(ctx)`` would return. The embedding baseline
  (:mod:`townsquare.plugins.baselines.embedding_baseline`) reads every feed in one platform call
  and computes every persona-post cosine in one numpy pass.

An agent takes the batch path when its policy offers it and it has no planner and no
reflector (those decide per agent, some with the LLM). Its activity draw is the one the
per-agent path makes (:meth:`townsquare.engine.Simulation.take_turns`): its own generator, the
same probability, before anything else the turn draws; so one scenario and seed give one event
log with the batch path on or off. One asyncio task per agent is what the batch path saves: at a
million agents a round would otherwise schedule a million tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .actions import Action
from .activity import active_probability
from .components import Agent, StepContext
from .errors import ComponentError
from .platform import platform_actions

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Simulation


async def take_turns_batch(sim: "Simulation", r: int, present: list[Agent], now: Any) -> list[tuple[bool, list[Action]] | None]:
    """The turns of ``present`` agents whose policy decides in batches, in ``present``'s order;
    None where an agent takes its turn alone."""
    minutes = sim.model.clock.minutes_per_round
    services, start, llm = sim.services, sim.model.clock.start, sim.services.llm
    turns: list[tuple[bool, list[Action]] | None] = []
    groups: dict[type, list[tuple[int, StepContext]]] = {}
    batch_classes: dict[type, bool] = {}  # policy class -> offers step_batch
    for position, agent in enumerate(present):
        # batch path: a policy class with step_batch, batch on, no planner, no reflector
        # (checked inline: this loop runs for every present agent every round)
        components = agent.components
        policy = components.get("policy")
        capable = batch_classes.get(type(policy))
        if capable is None:
            capable = batch_classes[type(policy)] = policy is not None and getattr(policy, "step_batch", None) is not None
        if not capable or not getattr(policy, "batch", False) or "planner" in components or "reflector" in components:
            turns.append(None)
        elif agent.rng.random() < active_probability(agent.activity, minutes):
            ctx = StepContext(agent=agent, round=r, now=now, minutes_per_round=minutes, services=services,
                              llm=llm.for_agent(agent.id) if llm else None,
                              feed_authors=sim.feed_authors(agent.population, r), start=start)
            groups.setdefault(type(policy), []).append((position, ctx))
            turns.append(None)
        else:
            turns.append((False, []))
    if not groups:
        return turns
    accepted = platform_actions(sim.platform)
    platform_name = sim.scenario.platform.spec.name
    for policy_class, members in groups.items():
        decided = await policy_class.step_batch([ctx for _, ctx in members])
        for (position, ctx), actions in zip(members, decided, strict=True):
            actions = list(actions or [])
            check_actions(ctx.agent, actions, accepted, platform_name)
            turns[position] = (True, actions)
    return turns


def check_actions(agent: Agent, actions: list[Action], accepted: frozenset[str] | set[str], platform: str) -> None:
    """A component's actions must be :class:`Action` records of this agent, of kinds the
    platform accepts; else :class:`ComponentError` naming the agent."""
    for action in actions:
        if not isinstance(action, Action) or action.agent_id != agent.id:
            raise ComponentError(f"agent {agent.id}: a component returned {action!r}, not an Action of this agent")
        if action.kind not in accepted:
            raise ComponentError(f"agent {agent.id}: action kind {action.kind!r} is not accepted by platform "
                                 f"{platform!r} (accepts: {', '.join(sorted(accepted))})")
