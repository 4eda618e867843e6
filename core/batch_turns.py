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
per-agent path reads (:meth:`townsquare.agent_host.AgentHost.activity_drawn`), and its policy
draws from its own generator (:mod:`townsquare.random_streams`); so one scenario and seed give
one event log with the batch path on or off. A batch-path agent's components must change only
in its own turns (``step_batch``, ``on_applied``) or when an action names it: a checkpoint
encodes again only those agents' state (:meth:`townsquare.agent_host.AgentHost.entries`). One asyncio task per agent is what the batch path saves: at a
million agents a round would otherwise schedule a million tasks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .actions import Action
from .components import Agent
from .errors import ComponentError
from .platform import platform_actions


#: the turn of an agent the activity draw left inactive (shared: nothing appends to it)
IDLE: tuple[bool, list[Action]] = (False, [])


async def take_turns_batch(host: Any, r: int, present: list[Agent], now: Any) -> list[tuple[bool, list[Action]] | None]:
    """The turns of ``present`` agents of ``host`` (a :class:`townsquare.agent_host.AgentHost`)
    whose policy decides in batches, in ``present``'s order;
    None where an agent takes its turn alone. Who may take the batch path is known from the
    agents' components (:func:`batch_eligible`, once a run) and who is active from one numpy
    draw (:meth:`~townsquare.agent_host.AgentHost.activity_drawn`): Python touches only the active."""
    eligible = host.batch_eligible()
    if not eligible.any():
        return [None] * len(present)
    indices = np.fromiter((agent.index for agent in present), dtype=np.int64, count=len(present))
    batch = eligible[indices]
    active = batch & host.activity_drawn(r)[indices]
    host.changed(indices[active])  # their components run: their checkpoint entries are read again
    turns: list[tuple[bool, list[Action]] | None] = [IDLE if b else None for b in batch.tolist()]
    groups: dict[type, list[tuple[int, Any]]] = {}
    for position in np.flatnonzero(active).tolist():
        agent = present[position]
        ctx = host.context(agent, r, now)
        groups.setdefault(type(agent.components["policy"]), []).append((position, ctx))
    if not groups:
        return turns
    accepted = platform_actions(host.services.platform)
    platform_name = host.platform_name
    for policy_class, members in groups.items():
        decided = await policy_class.step_batch([ctx for _, ctx in members])
        for (position, ctx), actions in zip(members, decided, strict=True):
            actions = list(actions or [])
            check_actions(ctx.agent, actions, accepted, platform_name)
            turns[position] = (True, actions)
    return turns


def batch_eligible(agents: list[Agent], population: int) -> np.ndarray:
    """Per agent of a run of ``population`` agents (by index): whether its turn may take the
    batch path: one of ``agents`` whose policy's class offers ``step_batch`` with ``batch`` on,
    and no planner or reflector. Computed once a run (an agent's components do not change)."""
    capable: dict[type, bool] = {}
    flags = np.zeros(population, dtype=bool)
    for agent in agents:
        components = agent.components
        policy = components.get("policy")
        kind = type(policy)
        if kind not in capable:
            capable[kind] = policy is not None and getattr(policy, "step_batch", None) is not None
        flags[agent.index] = (capable[kind] and bool(getattr(policy, "batch", False))
                              and "planner" not in components and "reflector" not in components)
    return flags


def check_actions(agent: Agent, actions: list[Action], accepted: frozenset[str] | set[str], platform: str) -> None:
    """A component's actions must be :class:`Action` records of this agent, of kinds the
    platform accepts; else :class:`ComponentError` naming the agent."""
    for action in actions:
        if not isinstance(action, Action) or action.agent_id != agent.id:
            raise ComponentError(f"agent {agent.id}: a component returned {action!r}, not an Action of this agent")
        if action.kind not in accepted:
            raise ComponentError(f"agent {agent.id}: action kind {action.kind!r} is not accepted by platform "
                                 f"{platform!r} (accepts: {', '.join(sorted(accepted))})")
