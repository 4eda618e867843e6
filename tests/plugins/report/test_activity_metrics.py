"""The activity metric: action counts and the follower distribution."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from townsquare.actions import Action
from townsquare.components import Agent, BuildContext
from townsquare.metrics import Metric, RoundView
from townsquare.persona import Persona
from townsquare.platforms.in_memory import InMemoryPlatform
from townsquare.plugins.report import activity
from townsquare.plugins.report.activity import ActivityMetric, gini


@pytest.mark.parametrize("values, expected", [
    ([0, 0, 0, 4], 0.75),
    ([1, 1, 1, 1], 0.0),
    ([0, 0, 0], 0.0),
    ([], 0.0),
    ([1, 2, 3, 4], 0.25),
    ([5], 0.0),
    ([0, 10], 0.5),
])
def test_gini(values, expected):
    assert gini(values) == pytest.approx(expected)


def test_measure_counts_actions_and_followers():
    async def scenario():
        platform = InMemoryPlatform()
        agents = []
        for i in range(4):
            agent_id = f"a{i}"
            await platform.register_account(agent_id, agent_id, "")
            agents.append(Agent(agent_id, i, "pop", Persona(agent_id), 1.0, np.random.default_rng(i)))
        for who in ("a1", "a2", "a3"):
            await platform.apply(Action(who, "follow", target_agent="a0"), 0, "t")
        await platform.apply(Action("a0", "follow", target_agent="a1"), 0, "t")
        actions = [
            {"agent_id": "a1", "kind": "follow"}, {"agent_id": "a2", "kind": "follow"},
            {"agent_id": "a3", "kind": "follow"}, {"agent_id": "a0", "kind": "follow"},
            {"agent_id": "a0", "kind": "post"}, {"agent_id": "a0", "kind": "like", "ok": False},
            {"agent_id": "a1", "kind": "dance"},
        ]
        return await ActivityMetric().measure(RoundView(3, "t", platform, agents, actions))

    out = asyncio.run(scenario())
    assert out["actions.follow"] == 4 and out["actions.post"] == 1 and out["actions.like"] == 1
    assert out["actions.dance"] == 1 and out["actions.reblog"] == 0 and out["actions.browse"] == 0
    assert out["actions.total"] == 7 and out["actions.failed"] == 1
    assert out["agents.active"] == 4
    # follower counts [3, 1, 0, 0]
    assert out["followers.mean"] == 1.0 and out["followers.max"] == 3.0
    assert out["followers.gini"] == pytest.approx(gini([3, 1, 0, 0])) == pytest.approx(0.625)
    assert all(isinstance(v, float) for v in out.values())


def test_empty_round():
    out = asyncio.run(ActivityMetric().measure(RoundView(0, "t", InMemoryPlatform(), [], [])))
    assert out["agents.active"] == 0 and out["followers.gini"] == 0 and out["followers.max"] == 0


def test_registration_and_state():
    (spec,) = activity.townsquare_register_metrics()
    assert (spec.name, spec.priority) == ("activity", 100)
    metric = spec.factory(None, BuildContext(services=None, seed=0))
    assert isinstance(metric, Metric)
    assert metric.get_state() == {}
    metric.set_state({})
