"""Zhou §3.1.4 short-term memory: action records and the duplicate-post check (T_p = 0.80)."""

from __future__ import annotations

import asyncio
import json

from test_sa_policy_world import HIKER, PIANIST, POST, REGENERATE, World, scripted
from townsquare.actions import Action, ActionResult
from townsquare.plugins.social_agent.memory import action_memory
from townsquare.plugins.social_agent.memory.action_memory import ActionMemory, ActionMemoryConfig
from townsquare.plugins.social_agent.actions.post_writer import write_post

EARLIER = "hiking mountains sunrise trail coffee boots ridge summit yesterday"
# TF-IDF cosine with EARLIER (fitted on the pair): 8 shared words, one word of its own each...
AT_0_802 = "hiking mountains sunrise trail coffee boots ridge summit today"
# ...and the same with "hiking" twice, which moves it further from EARLIER.
AT_0_791 = "hiking hiking mountains sunrise trail coffee boots ridge summit today"


def test_similarities_of_the_constructed_posts():
    memory = ActionMemory()
    memory.posts.append(EARLIER)
    assert round(memory.post_similarity(AT_0_802), 4) == 0.8020
    assert round(memory.post_similarity(AT_0_791), 4) == 0.7911
    assert memory.is_duplicate(memory.post_similarity(AT_0_802))
    assert not memory.is_duplicate(memory.post_similarity(AT_0_791))
    assert not memory.is_duplicate(0.80)  # strictly greater than T_p
    assert ActionMemory().post_similarity(EARLIER) == 0.0  # no earlier posts
    # posts written earlier in the same round count too
    assert ActionMemory().post_similarity(AT_0_802, [EARLIER]) == memory.post_similarity(AT_0_802)
    strict = ActionMemory(ActionMemoryConfig(duplicate_threshold=0.79))
    assert strict.is_duplicate(0.7911)


def post_world(rules, threshold=0.80, attempts=3):
    world = World([HIKER], scripted(rules))
    (me,) = world.agents
    memory = ActionMemory(ActionMemoryConfig(duplicate_threshold=threshold, max_attempts=attempts))
    memory.posts.append(EARLIER)
    me.components["memory.short_term"] = memory
    return world, me, memory


def write(world, me, memory, topic="Hiking at dawn"):
    from townsquare.plugins.social_agent.actions.action_prompts import action_prompts

    return asyncio.run(write_post(world.ctx(me, 5), world.llm.for_agent(me.id), action_prompts(None), topic, memory, []))


def test_a_duplicate_is_regenerated():
    world, me, memory = post_world({REGENERATE: AT_0_791, POST: AT_0_802})
    action = write(world, me, memory)
    assert action.text == AT_0_791 and action.detail["attempts"] == 2 and action.detail["similarity"] == 0.7911
    assert world.recorder.purposes() == ["post", "post.regenerate"]
    regenerate = world.recorder.requests[1].messages
    assert regenerate[-2].content == AT_0_802 and regenerate[-2].role == "assistant"


def test_below_the_threshold_is_kept_first_time():
    world, me, memory = post_world({POST: AT_0_791})
    action = write(world, me, memory)
    assert action.text == AT_0_791 and action.detail["attempts"] == 1
    assert world.recorder.purposes() == ["post"]


def test_topic_is_skipped_after_max_attempts():
    world, me, memory = post_world({REGENERATE: AT_0_802, POST: AT_0_802})
    assert write(world, me, memory) is None
    assert world.recorder.purposes() == ["post", "post.regenerate", "post.regenerate"]
    assert memory.skipped == [{"round": 5, "topic": "Hiking at dawn", "similarity": 0.802, "attempts": 3}]

    world, me, memory = post_world({REGENERATE: AT_0_802, POST: AT_0_802}, attempts=1)
    assert write(world, me, memory) is None and world.recorder.purposes() == ["post"]


def test_records_of_applied_actions():
    world = World([HIKER, PIANIST], scripted({}))
    me, other = world.agents
    memory = ActionMemory()
    me.components["memory.short_term"] = memory

    async def run():
        p1 = await world.post(other, "Jazz tonight at the club.")
        p2 = await world.post(other, "New piano arrived.")
        # the browsed p1 reaches the tier as an observation; p2 is looked up on the platform
        await memory.remember(world.ctx(me, 3), [action_memory.observation_of(await world.platform.get_post(p1))])
        await world.apply(me, [
            Action(me.id, "browse", post_ids=(p1, p2)),
            Action(me.id, "like", target_post=p1),
            Action(me.id, "reblog", target_post=p2),
            Action(me.id, "comment", target_post=p1, text="See you there!"),
            Action(me.id, "like", target_post=p1),  # refused: already liked
            Action(me.id, "post", text="My own post."),
            Action(me.id, "follow", target_agent=other.id),
        ], round=3)
        await world.apply(me, [Action(me.id, "like", target_post="p2")], round=9)

    asyncio.run(run())
    assert [(e["round"], e["kind"], e.get("post_id"), e.get("author_id")) for e in memory.entries] == [
        (3, "browse", None, None), (3, "like", "p1", "a1"), (3, "reblog", "p2", "a1"), (3, "comment", "p1", "a1"),
        (3, "post", "p4", "a0"), (3, "follow", None, "a1"), (9, "like", "p2", "a1")]
    assert memory.entries[0]["post_ids"] == ["p1", "p2"]
    assert memory.entries[2]["text"] == "New piano arrived."
    assert memory.entries[3]["comment"] == "See you there!" and memory.entries[3]["created_id"] == "p3"
    assert memory.posts == ["My own post."]
    engaged = memory.engaged_posts()
    assert [(p["post_id"], p["author_id"], p["actions"]) for p in engaged] == [
        ("p1", "a1", [("like", None), ("comment", "See you there!")]), ("p2", "a1", [("reblog", None), ("like", None)])]
    assert [p["post_id"] for p in memory.engaged_posts(since_round=4)] == ["p2"]
    assert memory._seen == {}


def test_state_round_trip_and_capacity():
    memory = ActionMemory(ActionMemoryConfig(capacity=3))
    for i in range(5):
        memory.add({"round": i, "kind": "post", "post_id": f"p{i}", "author_id": "a0", "text": f"post {i}"})
    memory.record_skipped(2, "a topic", 0.91234, 3)
    assert [e["round"] for e in memory.entries] == [2, 3, 4]
    assert memory.posts == [f"post {i}" for i in range(5)]  # own posts are all kept
    state = json.loads(json.dumps(memory.get_state()))
    other = ActionMemory(ActionMemoryConfig(capacity=3))
    other.set_state(state)
    assert other.get_state() == memory.get_state()
    assert other.skipped == [{"round": 2, "topic": "a topic", "similarity": 0.9123, "attempts": 3}]


def test_registration_and_ignored_failures():
    (spec,) = action_memory.townsquare_register_memory()
    assert (spec.name, spec.slot, spec.priority, spec.needs_llm) == ("action_memory", "memory.short_term", 100, False)
    memory = ActionMemory()
    world = World([HIKER], scripted({}))
    asyncio.run(memory.on_applied(world.ctx(world.agents[0]), [(Action("a0", "like", target_post="p9"), ActionResult(ok=False, error="no post"))]))
    assert memory.entries == []
