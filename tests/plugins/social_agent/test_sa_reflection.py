"""Zhou §3.1.5 follow reflection: cadence every 48 simulated hours, summaries, the follow choice."""

from __future__ import annotations

import asyncio
import json

from test_sa_policy_world import FAN, FOLLOW, HIKER, PIANIST, SUMMARY, World, scripted
from townsquare.actions import Action
from townsquare.components import BuildContext
from townsquare.persona import Persona
from townsquare.plugins.social_agent.reflection import follow_reflection
from townsquare.plugins.social_agent.memory.action_memory import ActionMemory
from townsquare.plugins.social_agent.reflection.follow_reflection import FollowReflectionConfig, build_follow_reflection


def reflector(**config):
    return build_follow_reflection(FollowReflectionConfig(**config), BuildContext(services=None, seed=0))


def due_rounds(world, agent, component, rounds):
    return [r for r in rounds if component.due(world.ctx(agent, r))]


def test_cadence_every_48_simulated_hours():
    world = World([HIKER], scripted({}))
    (agent,) = world.agents
    assert due_rounds(world, agent, reflector(), range(0, 150)) == [48, 96, 144]
    # an agent that joins at round 5 reflects 48 hours after that
    assert due_rounds(world, agent, reflector(), range(5, 150)) == [53, 101, 149]
    # half-hour rounds: 96 rounds make two days
    half = World([HIKER], scripted({}), minutes=30)
    assert due_rounds(half, half.agents[0], reflector(), range(0, 300)) == [96, 192, 288]
    # rounds longer than the interval: due every round, never twice in one
    long = World([HIKER], scripted({}), minutes=60 * 24 * 3)
    assert due_rounds(long, long.agents[0], reflector(), range(0, 4)) == [1, 2, 3]
    assert due_rounds(world, agent, reflector(interval_hours=12), range(0, 40)) == [12, 24, 36]


def engaged_world(rules):
    world = World([HIKER, PIANIST, FAN], scripted(rules))
    me, pianist, fan = world.agents
    memory = ActionMemory()
    me.components.update({"memory.short_term": memory, "reflector": reflector()})

    async def setup():
        p1 = await world.post(pianist, "Late jazz session at the club with a new trio.")
        p2 = await world.post(fan, "What a match last night, three goals in ten minutes!")
        p3 = await world.post(pianist, "Practising scales for two hours every morning.")
        await world.apply(me, [Action(me.id, "like", target_post=p1), Action(me.id, "comment", target_post=p1, text="Sounds great!"),
                               Action(me.id, "reblog", target_post=p2), Action(me.id, "like", target_post=p3)], round=10)

    asyncio.run(setup())
    return world, me


def test_reflection_follows_an_author_from_the_history():
    world, me = engaged_world({SUMMARY: "A short summary.", FOLLOW: "a1"})
    component = me.components["reflector"]
    assert asyncio.run(component.reflect(world.ctx(me, 0))) == []  # starts the clock
    assert asyncio.run(component.reflect(world.ctx(me, 47))) == []
    assert world.recorder.requests == []
    (action,) = asyncio.run(component.reflect(world.ctx(me, 48)))
    assert (action.kind, action.agent_id, action.target_agent) == ("follow", "a0", "a1")
    assert action.detail == {"reflection": 1, "posts": 3, "mode": "scripted"}  # the test model gives labels by construction
    assert world.recorder.purposes() == ["summary"] * 3 + ["follow"]
    follow = world.recorder.requests[-1]
    assert follow.labels == ("a1", "a2", "do not follow")
    prompt = follow.messages[-1].content
    assert "Post 1 was written by user a1. What it says: A short summary. What you did: liked it, commented \"Sounds great!\"." in prompt
    assert "Post 2 was written by user a2. What it says: A short summary. What you did: forwarded it." in prompt
    assert "Post 3 was written by user a1." in prompt
    assert "one user ID from this list: a1, a2;" in prompt
    assert "Summarise" in world.recorder.requests[0].messages[-1].content
    assert "Late jazz session" in world.recorder.requests[0].messages[-1].content


def test_do_not_follow_self_and_followed_accounts_are_never_followed():
    world, me = engaged_world({SUMMARY: "Summary.", FOLLOW: "do not follow"})
    component = me.components["reflector"]
    component.due(world.ctx(me, 0))
    assert asyncio.run(component.reflect(world.ctx(me, 48))) == []

    # already following a1: only a2 is a candidate; an answer naming a1 or itself is no choice
    world, me = engaged_world({SUMMARY: "Summary.", FOLLOW: "a1", "Answer with exactly one of": "a0"})
    asyncio.run(world.platform.apply(Action(me.id, "follow", target_agent="a1"), 0, "t"))
    component = me.components["reflector"]
    component.due(world.ctx(me, 0))
    assert asyncio.run(component.reflect(world.ctx(me, 48))) == []
    assert world.recorder.requests[-2].labels == ("a2", "do not follow")
    assert world.recorder.purposes()[-2:] == ["follow", "follow.repair"]


def test_summaries_are_cached_and_cut_to_50_words():
    long_summary = " ".join(f"w{i}" for i in range(70))
    world, me = engaged_world({SUMMARY: long_summary, FOLLOW: "a2"})
    component = me.components["reflector"]
    component.due(world.ctx(me, 0))
    asyncio.run(component.reflect(world.ctx(me, 48)))
    assert all(len(s.split()) == 50 for s in component.summaries.values())
    assert sorted(component.summaries) == ["p1", "p2", "p3"]
    calls = len(world.recorder.requests)

    async def more():
        # round 60: like p1 again (the platform refuses) and a new post by a2; p2 is engaged again
        p4 = await world.post(world.agents[2], "Derby day tomorrow!")
        await world.apply(me, [Action(me.id, "comment", target_post="p2", text="Wow"), Action(me.id, "like", target_post=p4)], round=60)
        return await component.reflect(world.ctx(me, 96))

    (action,) = asyncio.run(more())
    assert action.target_agent == "a2"
    # only the new post p4 is summarised; p2's summary comes from the cache
    assert world.recorder.purposes()[calls:] == ["summary", "follow"]
    assert "Post 1 was written by user a2" in world.recorder.requests[-1].messages[-1].content


def test_history_is_since_the_last_reflection_and_bounded():
    world, me = engaged_world({SUMMARY: "S.", FOLLOW: "a1"})
    component = build_follow_reflection(FollowReflectionConfig(max_posts=1), BuildContext(services=None, seed=0))
    me.components["reflector"] = component
    component.due(world.ctx(me, 0))
    asyncio.run(component.reflect(world.ctx(me, 48)))
    assert world.recorder.purposes() == ["summary", "follow"]  # the latest post only (p3, by a1)
    assert world.recorder.requests[-1].labels == ("a1", "do not follow")
    # nothing engaged since round 48: no call at round 96
    before = len(world.recorder.requests)
    assert asyncio.run(component.reflect(world.ctx(me, 96))) == []
    assert len(world.recorder.requests) == before


def test_without_memory_nothing_happens():
    world = World([Persona("Solo")], scripted({}))
    (me,) = world.agents
    component = reflector()
    component.due(world.ctx(me, 0))
    assert asyncio.run(component.reflect(world.ctx(me, 48))) == []
    assert world.recorder.requests == []


def test_state_round_trip_and_registration():
    world, me = engaged_world({SUMMARY: "S.", FOLLOW: "a1"})
    component = me.components["reflector"]
    component.due(world.ctx(me, 0))
    asyncio.run(component.reflect(world.ctx(me, 48)))
    state = json.loads(json.dumps(component.get_state()))
    assert state["next_due"] == "2024-01-05T08:00:00" and state["since_round"] == 48 and state["reflections"] == 1
    other = reflector()
    other.set_state(state)
    assert other.get_state() == component.get_state()
    (spec,) = follow_reflection.townsquare_register_reflectors()
    assert (spec.name, spec.slot, spec.priority, spec.needs_llm) == ("follow_reflection", "reflector", 100, True)
