"""Garbage never becomes content: a post, comment or summary answer that is
empty or binary gets one repair request, then a ``parse_failure`` row, and nothing is
written; a JSON decision's comment that is binary is a failed decision."""

from __future__ import annotations

import asyncio
import json

import pytest

from test_sa_policy import COMBINED, POST, TOPICS, FixedPlanner, browse_step, policy, scripted
from test_sa_policy_world import HIKER, World
from townsquare.plugins.social_agent.actions.social_agent_combined import CombinedSocialAgentPolicy, validate_decision
from townsquare.plugins.social_agent.planning.plan_parsing import PlanSession

BINARY = "\x00\x01\x02\x1b[2J\x00"


@pytest.mark.parametrize("draft,kind", [(BINARY, "binary"), ("   ", "empty")])
def test_a_post_that_is_no_text_is_not_posted(draft, kind):
    world = World([HIKER], scripted({TOPICS: '{"topics": ["Mountain trails"]}', POST: draft, "Answer again, in plain text": draft}))
    (me,) = world.agents
    me.components.update({"policy": policy(), "planner": FixedPlanner(PlanSession(browse=False, posts_due=1))})
    failures = []
    world.llm.on_parse_failure = lambda request, answer, kind: failures.append((request.purpose, kind))
    actions = asyncio.run(me.components["policy"].step(world.ctx(me)))
    assert [a for a in actions if a.kind == "post"] == []
    assert world.recorder.purposes() == ["topics", "post", "post.repair"]
    assert failures == [("post", kind)]


def test_a_repaired_post_is_posted():
    world = World([HIKER], scripted({TOPICS: '{"topics": ["Mountain trails"]}', POST: BINARY, "Answer again, in plain text": "Trails!"}))
    (me,) = world.agents
    me.components.update({"policy": policy(), "planner": FixedPlanner(PlanSession(browse=False, posts_due=1))})
    actions = asyncio.run(me.components["policy"].step(world.ctx(me)))
    assert [a.text for a in actions if a.kind == "post"] == ["Trails!"]


def test_a_binary_comment_in_a_json_decision_is_a_failed_decision():
    with pytest.raises(ValueError, match="not readable text"):
        validate_decision({"like": True, "reblog": False, "comment": BINARY}, ("like", "reblog", "comment"))
    answer = json.dumps({"like": True, "reblog": False, "comment": BINARY})
    world, actions = browse_step(scripted({COMBINED: answer, "That was not valid": answer}), ["One."], CombinedSocialAgentPolicy)
    assert [a.kind for a in actions] == ["browse"]
    assert world.recorder.purposes() == ["decide", "decide.repair"]
