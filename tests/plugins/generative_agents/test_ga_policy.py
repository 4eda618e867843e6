"""The generative agent on a social platform: feed posts become observations, one labelled
decision per post after recall, comments and posts written from bounded prompts, the day's plan
read from memory; it runs with Park's stream or with Zhou et al.'s action memory."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from types import SimpleNamespace

import numpy as np

from ga_support import T0, RuleLLM, at, make_ctx
from townsquare.api import ActionResult, MemoryRecord, PostView
from townsquare.plugins.generative_agents.memory.memory_stream import MemoryStream, MemoryStreamConfig
from townsquare.plugins.generative_agents.memory.park_retrieval import ParkRetrieval
from townsquare.plugins.generative_agents.policy.generative_agent import (
    DECISION_LABELS, GenerativeAgent, GenerativeAgentConfig,
)
from townsquare.plugins.social_agent.memory.action_memory import ActionMemory

FEED = [PostView("p1", "a1", "I love jazz piano at night", 0, ""), PostView("p2", "a2", "The football final was wild", 0, ""),
        PostView("p3", "a3", "Selling my old bike", 0, "")]


def run(coro):
    return asyncio.run(coro)


def agent_ctx(components, llm, feed=FEED, hours=0):
    ctx = at(make_ctx(components=components, llm=llm, name="Ada", sentences=["I play jazz", "I watch football"]), hours)
    ctx.rng = np.random.default_rng(0)
    ctx.require_llm = lambda name: llm

    async def home_timeline(limit):
        return list(feed)[:limit]

    ctx.home_timeline = home_timeline
    return ctx


def park_components():
    return {"memory.stream": MemoryStream(MemoryStreamConfig(seed_memories=False)), "memory.retrieval": ParkRetrieval()}


def decide_llm():
    return RuleLLM([(r"what do you do with this post.*", lambda p: "like" if "jazz piano" in p.split("A post by")[1]
                     else "comment" if "football" in p.split("A post by")[1] else "ignore"),
                    (r"write your reply", "Great game!")], label_default="5")


def test_one_labelled_decision_per_post_then_the_comment():
    components = park_components()
    llm = decide_llm()
    policy = GenerativeAgent(GenerativeAgentConfig(post_probability=0))
    actions = run(policy.step(agent_ctx(components, llm)))
    assert DECISION_LABELS == ("like", "reblog", "comment", "ignore")
    assert [(a.kind, a.target_post, a.text) for a in actions] == [
        ("browse", None, None), ("like", "p1", None), ("comment", "p2", "Great game!")]
    assert llm.purposes().count("decide") == 3 and llm.purposes().count("comment") == 1
    stream = components["memory.stream"]
    kinds = [(r.kind, r.text) for r in stream.records]
    assert kinds[:3] == [("observation", "a1 posted: I love jazz piano at night"),
                         ("observation", "a2 posted: The football final was wild"), ("observation", "a3 posted: Selling my old bike")]
    assert kinds[3:] == [("action", "I liked a1's post: I love jazz piano at night"),
                         ("action", "I replied \"Great game!\" to a2's post: The football final was wild")]


def test_recall_shows_memories_but_not_the_post_itself():
    components = park_components()
    llm = decide_llm()
    ctx = agent_ctx(components, llm)
    run(components["memory.stream"].remember(ctx, [MemoryRecord("Bo and I played jazz piano last week", importance=8)]))
    run(GenerativeAgent(GenerativeAgentConfig(post_probability=0)).step(at(ctx, 1)))
    first = next(p for purpose, p in llm.calls if purpose == "decide")
    memories = first.split("relates to this post:")[1].split("A post by")[0]
    assert "- Bo and I played jazz piano last week" in memories
    assert "a1 posted: I love jazz piano" not in memories


def test_prompts_stay_within_their_budget_however_much_is_remembered():
    components = park_components()
    llm = decide_llm()
    ctx = agent_ctx(components, llm)
    cfg = GenerativeAgentConfig(post_probability=1.0, recall_k=5, memory_chars=400, persona_chars=100, max_chars=120)
    sizes = []
    for many in (1, 200):
        run(components["memory.stream"].remember(ctx, [MemoryRecord(f"jazz football memory {i} " + "x" * 300, importance=5)
                                                       for i in range(many)]))
        llm.calls.clear()
        run(GenerativeAgent(cfg).step(at(ctx, many)))
        for purpose, prompt in llm.calls:
            if purpose in ("decide", "comment", "post"):
                memories = re.split(r"relates to this post:|on your mind:", prompt)[1].strip().split("\n\n")[0]
                assert len(memories) <= 400 and memories.count("\n") <= 4
        sizes.append(max(len(p) for purpose, p in llm.calls if purpose == "decide"))
    assert sizes[1] <= 400 + 100 + 120 + len(GenerativeAgent().prompts["decide"]) + 20


def test_posts_from_todays_plan():
    components = park_components()
    llm = RuleLLM([("write one short social media post", "Bake sale at noon, come by!")], label_default="ignore")
    ctx = agent_ctx(components, llm, feed=[], hours=30)  # day 2, 14:00
    stream = components["memory.stream"]
    run(stream.remember(at(ctx, 1), [MemoryRecord("yesterday: clean the attic", kind="plan", importance=3)]))
    run(stream.remember(at(ctx, 17), [MemoryRecord("today: run the bake sale at noon", kind="plan", importance=3)]))
    actions = run(GenerativeAgent(GenerativeAgentConfig(post_probability=1.0)).step(at(ctx, 30)))
    assert [(a.kind, a.text) for a in actions] == [("post", "Bake sale at noon, come by!")]
    prompt = next(p for purpose, p in llm.calls if purpose == "post")
    plan = prompt.split("plan for today:")[1].split("Things on your mind")[0]
    assert "bake sale" in plan and "attic" not in plan
    assert stream.records[-1].text == "I posted: Bake sale at noon, come by!"


def test_runs_with_zhous_action_memory():
    memory = ActionMemory()
    llm = decide_llm()
    ctx = agent_ctx({"memory.short_term": memory}, llm)
    policy = GenerativeAgent(GenerativeAgentConfig(post_probability=0))
    actions = run(policy.step(ctx))
    assert memory.entries == []  # observations pass through: Zhou's memory records accepted actions
    async def get_post(post_id):
        return next(p for p in FEED if p.id == post_id)

    ctx.platform = SimpleNamespace(get_post=get_post)
    run(memory.on_applied(ctx, [(a, ActionResult(ok=True, created_id="c1")) for a in actions]))
    assert [e["kind"] for e in memory.entries] == ["browse", "like", "comment"]
    llm.calls.clear()
    run(policy.step(at(ctx, 1)))
    first = next(p for purpose, p in llm.calls if purpose == "decide")
    assert "- I liked a1's post: I love jazz piano at night" in first
    records = memory.since(T0 - timedelta(hours=1))
    assert [r.kind for r in records] == ["action"] * 3 and records[1].id == "a1"
    assert records[1].text == "I liked a1's post: I love jazz piano at night" and records[1].created == T0
    assert memory.since(T0) == []  # strictly after
