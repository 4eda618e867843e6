"""Park §4.3.2 / §5 dialogue: initiation, alternating turns from each side's own memories, the
end rules (said over, repeated line, 8-turn cap), both sides remembering, and the conversation
as a reply thread on the in-memory platform."""

from __future__ import annotations

import asyncio
import json

import pytest

from ga_planning_world import ListMemory, World, by_purpose
from helpers import read_table, scenario_text
from townsquare.api import Action, MemoryRecord, MemorySpec, Persona, PolicySpec, UsageError, hookimpl
from townsquare.plugins.generative_agents.dialogue.conversation import (Conversation, ConversationConfig, Dialogue, Transcript,
                                                                        Turn, is_repeat)
from townsquare.plugins.generative_agents.dialogue.conversation_memory import (ConversationMemory, build_conversation_memory,
                                                                               conversation_minutes)
from townsquare.plugins.generative_agents.dialogue.reply_threads import ReplyThreads

ADA = Persona("Ada", ["Ada is a nurse.", "Ada loves hiking."])
BO = Persona("Bo", ["Bo plays jazz piano.", "Bo is Ada's brother."])


def run(coro):
    return asyncio.run(coro)


def speaking(end_at: int | None = None, repeat_at: int | None = None):
    """A turn answer: the n-th utterance (1-based) says 'line n from <agent>'; ``end_at`` marks
    that one as the end; ``repeat_at`` makes that one repeat line 2."""
    count = {"n": 0}

    def reply(request):
        count["n"] += 1
        n = count["n"]
        text = "LINE 2 from a1!" if n == repeat_at else f"line {n} from {request.agent_id}"
        return json.dumps({"utterance": text, "end": n == end_at})

    return reply


def two_agents(answers, keep=True):
    """Ada and Bo with list memories and (``keep``) the conversation memory that stores chats."""
    world = World([ADA, BO], by_purpose(answers))
    for agent in world.agents:
        agent.components["memory.stream"] = ListMemory()
        if keep:
            agent.components["memory.sensory"] = build_conversation_memory(None, None)
    a, b = world.agents
    run(a.components["memory.stream"].remember(world.ctx(a), [MemoryRecord("Bo is my brother and plays jazz piano")]))
    run(b.components["memory.stream"].remember(world.ctx(b), [MemoryRecord("Ada is my sister; she hikes a lot")]))
    return world, a, b


def converse(world, a, b, config=None, observation=None):
    sides = ((world.ctx(a), Dialogue(config)), (world.ctx(b), Dialogue(config)))
    return run(Conversation(config).run(*sides, topic="weekend plans", observation=observation))


def answers(**more):
    """8 turns, and what the conversation memory asks (what it was about, a planning thought, a memo)."""
    return {"dialogue.turn": speaking(), "conversation.about": "a conversation about hiking",
            "conversation.planning": '{"notes": ["hike on Saturday at 9 am"]}', "conversation.memo": "learned about the trail",
            **more}


def test_eight_turn_cap_alternating_sides_and_both_remember():
    world, a, b = two_agents(answers())
    transcript = converse(world, a, b)
    assert transcript.ended == "cap" and len(transcript.turns) == 8
    assert [t.speaker for t in transcript.turns] == ["a0", "a1"] * 4
    assert [t.text for t in transcript.turns] == [f"line {n} from a{(n - 1) % 2}" for n in range(1, 9)]
    turns = [r for r in world.recorder.requests if r.purpose == "dialogue.turn"]
    assert [r.agent_id for r in turns] == ["a0", "a1"] * 4  # each turn is its speaker's call
    # each side recalls its own memories about the other: Bo's prompts hold Bo's memory, never Ada's
    assert "Ada is my sister" in turns[1].messages[-1].content and "Bo is my brother" not in turns[1].messages[-1].content
    assert "Bo is my brother" in turns[0].messages[-1].content
    assert "Ada: line 1 from a0\nBo: line 2 from a1\nAda: line 3 from a0" in turns[3].messages[-1].content
    for agent, other in ((a, "Bo"), (b, "Ada")):
        # what it was about, then each of the 8 utterances as a record of its own, then a planning thought and a memo
        # that cite the conversation (the reference code's); ids tie them together
        chat = [r for r in agent.components["memory.stream"].records if r.kind == "chat"]
        key = f"chat-20240101T0800-{'a1' if other == 'Bo' else 'a0'}"
        assert len(chat) == 9 and chat[0].id == key and chat[0].text == f"{agent.persona.name} talked with {other}: a conversation about hiking"
        assert chat[0].meta == {"with": key[-2:], "conversation": key, "turns": 8, "ended": "cap"}
        assert [r.text for r in chat[1:3]] == ["Ada said to Bo: line 1 from a0", "Bo said to Ada: line 2 from a1"]
        assert [r.id for r in chat[1:]] == [f"{key}.{i}" for i in range(1, 9)]
        thoughts = [r for r in agent.components["memory.stream"].records if r.kind == "reflection"]
        assert [r.text for r in thoughts] == [f"For {agent.persona.name}'s planning: hike on Saturday at 9 am.",
                                              f"{agent.persona.name} learned about the trail"]
        assert all(r.evidence == (key,) for r in thoughts)
    about = [r for r in world.recorder.requests if r.purpose == "conversation.about"][0].messages[-1].content
    assert "Ada: line 1 from a0\nBo: line 2 from a1" in about


@pytest.mark.parametrize("notes, memo", [('{"notes": []}', "Nothing."),
                                         ('{"notes": ["Nothing to plan for.", "None"]}', "learned nothing new"),
                                         ('{"notes": ["N/A"]}', "N/A")])
def test_a_thought_that_says_nothing_is_not_stored(notes, memo):
    world, a, b = two_agents(answers(**{"conversation.planning": notes, "conversation.memo": memo}))
    converse(world, a, b)
    for agent in (a, b):
        records = agent.components["memory.stream"].records
        assert [r.kind for r in records].count("chat") == 9 and not [r for r in records if r.kind == "reflection"]
        assert agent.components["memory.sensory"].empty_thoughts == 2
    prompt = [r for r in world.recorder.requests if r.purpose == "conversation.planning"][0].messages[-1].content
    assert "Nothing to plan" not in prompt and '{"notes": [' in prompt  # no stock phrase to copy: an empty list


def test_without_a_conversation_memory_nobody_remembers_the_conversation():
    world, a, b = two_agents(answers(), keep=False)
    transcript = converse(world, a, b)
    assert len(transcript.turns) == 8  # they still talk: each turn sees the dialogue so far
    for agent in (a, b):
        assert [r.kind for r in agent.components["memory.stream"].records] == ["observation"]  # only the memory they had
    assert not [p for p in world.recorder.purposes() if p.startswith("conversation.")]


def test_a_conversation_enters_both_schedules_for_as_long_as_it_took():
    text = "\n".join(f"Ada: {'x' * 90}" for _ in range(8))  # 8 lines of 95 characters: 767 // 8 = 95, / 30 -> 4 minutes
    assert conversation_minutes(text) == 4 and conversation_minutes("Ada: hi") == 1

    class Planner:
        def __init__(self):
            self.inserted = []

        async def insert(self, ctx, what, minutes):
            self.inserted.append((what, minutes))

        async def after_conversation(self, ctx, other, notes, minutes):
            self.inserted.append(("notes", other, notes))

        async def status(self, ctx):
            return "busy"

    world, a, b = two_agents(answers())
    a.components["planner"], b.components["planner"] = Planner(), Planner()
    transcript = converse(world, a, b)
    minutes = conversation_minutes(transcript.text())
    # and what each kept for planning has the planner write the rest of the day again
    assert a.components["planner"].inserted == [("talking with Bo", minutes), ("notes", "Bo", "hike on Saturday at 9 am.")]
    assert b.components["planner"].inserted == [("talking with Ada", minutes), ("notes", "Ada", "hike on Saturday at 9 am.")]
    world, a, b = two_agents(answers(**{"conversation.planning": '{"notes": []}'}))
    a.components["planner"] = Planner()
    converse(world, a, b)
    assert a.components["planner"].inserted == [("talking with Bo", conversation_minutes(transcript.text()))]  # nothing settled


def test_cap_is_a_setting():
    world, a, b = two_agents({"dialogue.turn": speaking()})
    assert len(converse(world, a, b, ConversationConfig(max_turns=3)).turns) == 3


def test_the_speaker_ends_the_conversation():
    world, a, b = two_agents({"dialogue.turn": speaking(end_at=3)})
    transcript = converse(world, a, b)
    assert transcript.ended == "said_end" and [t.text for t in transcript.turns][-1] == "line 3 from a0"
    assert len(transcript.turns) == 3


def test_a_repeated_line_ends_it_and_is_dropped():
    world, a, b = two_agents({"dialogue.turn": speaking(repeat_at=4)})
    transcript = converse(world, a, b)
    assert transcript.ended == "repeat" and len(transcript.turns) == 3
    assert is_repeat("line 1, from A0.", [Turn("a0", "Ada", "Line 1 from a0")]) and not is_repeat("", [])


def test_unusable_turns_get_a_repair_then_end_the_conversation():
    world, a, b = two_agents({"dialogue.turn": "I would say hello"})
    failures = []
    world.llm.on_parse_failure = lambda request, answer, kind: failures.append(request.purpose)
    transcript = converse(world, a, b)
    assert transcript.ended == "no_answer" and transcript.turns == []
    assert world.recorder.purposes().count("dialogue.turn.repair") == 1 and failures == ["dialogue.turn"]
    assert not [r for r in a.components["memory.stream"].records if r.kind == "chat"]


def test_initiation_is_one_labelled_decision_from_memories_about_the_other():
    world, a, b = two_agents({"dialogue.initiate": "No.", "dialogue.turn": speaking()})
    transcript = converse(world, a, b, observation="Bo is playing the piano in the park")
    assert transcript.ended == "declined" and transcript.turns == []
    (request,) = [r for r in world.recorder.requests if r.purpose == "dialogue.initiate"]
    assert request.labels == ("yes", "no")
    prompt = request.messages[-1].content
    assert "Observation: Bo is playing the piano in the park" in prompt and "Bo is my brother and plays jazz piano" in prompt
    assert "Would Ada start a conversation with Bo now?" in prompt

    world, a, b = two_agents({"dialogue.initiate": "yes", "dialogue.turn": speaking(end_at=2)})
    assert len(converse(world, a, b, observation="Bo waves").turns) == 2


def test_the_summary_is_the_persona_context_components_and_the_status_the_planners():
    world, a, b = two_agents({"dialogue.turn": speaking(end_at=1)})

    class Summary:
        async def render(self, ctx, query):
            return f"SUMMARY for {query}"

    class Planner:
        async def status(self, ctx):
            return "Ada is reading her feed"

    a.components["persona.context"], a.components["planner"] = Summary(), Planner()
    converse(world, a, b)
    (turn,) = [r for r in world.recorder.requests if r.purpose == "dialogue.turn"]
    assert "SUMMARY for weekend plans" in turn.messages[-1].content
    assert "Ada's status: Ada is reading her feed" in turn.messages[-1].content
    # with no persona.context component the summary is the seed
    world, a, b = two_agents({"dialogue.turn": speaking(end_at=1)})
    converse(world, a, b)
    (turn,) = [r for r in world.recorder.requests if r.purpose == "dialogue.turn"]
    assert turn.messages[-1].content.startswith("Name: Ada\nAda is a nurse.\nAda loves hiking.")


def test_dialogue_state_round_trips():
    side = Dialogue()
    other = Dialogue()
    other.set_state(json.loads(json.dumps(side.get_state())))
    assert other.get_state() == side.get_state() == {}
    memory = ConversationMemory()
    memory.kept = 3
    again = ConversationMemory()
    again.set_state(json.loads(json.dumps(memory.get_state())))
    assert again.kept == 3
    t = Transcript("a0", "a1", "x", [Turn("a0", "Ada", "hi")], "cap")
    assert Transcript.from_dict(json.loads(json.dumps(t.to_dict()))) == t


def test_prompt_override_is_checked(tmp_path):
    bad = tmp_path / "d.toml"
    bad.write_text('turn = "Say something to {other}"\n')
    with pytest.raises(UsageError, match=r"prompt 'turn' lacks the placeholder \{context\}"):
        Dialogue(ConversationConfig(prompts_file=str(bad)))


# --------------------------------------------------------------------------- as a reply thread


def thread_world(answers, config=None):
    world, a, b = two_agents(answers)
    threads = {agent.id: ReplyThreads(config) for agent in world.agents}
    return world, a, b, threads


def act(world, agent, threads, actions, round):
    applied = run(world.apply(agent, actions, round))
    run(threads[agent.id].on_applied(world.ctx(agent, round), applied))
    return applied


def feed(world, agent, round):
    return run(world.platform.home_timeline(agent.id, 20))


def test_a_conversation_as_a_reply_thread_of_eight_comments():
    world, a, b, threads = thread_world({"dialogue.initiate": "yes", "dialogue.turn": speaking()})
    post_id = run(world.post(a, "Anyone up for a hike on Saturday?"))
    round = 0
    (opening,) = run(threads[b.id].start(world.ctx(b, round), feed(world, b, round)[0]))
    assert (opening.kind, opening.target_post, opening.detail["turn"]) == ("comment", post_id, 1)
    act(world, b, threads, [opening], round)
    speakers = [b]
    for _ in range(10):  # more rounds than the conversation needs
        round += 1
        for agent in (a, b):
            ctx = world.ctx(agent, round)
            actions = run(threads[agent.id].answer(ctx, feed(world, agent, round)))
            if actions:
                speakers.append(agent)
                act(world, agent, threads, actions, round)
    # 8 comments, alternating Bo, Ada, ..., each replying to the one before
    comments = [p for p in (run(world.platform.get_post(f"p{i}")) for i in range(1, 30)) if p is not None and p.reply_to]
    assert len(comments) == 8 and [c.author_id for c in comments] == ["a1", "a0"] * 4
    assert comments[0].reply_to == post_id and all(c.reply_to == p.id for p, c in zip(comments, comments[1:]))
    assert [s.id for s in speakers] == ["a1", "a0"] * 4
    for agent in (a, b):
        assert threads[agent.id].threads == {} and threads[agent.id].finished == 1
        chat = [r for r in agent.components["memory.stream"].records if r.kind == "chat"]
        assert len(chat) == 9 and chat[0].meta["turns"] == 8 and chat[0].meta["ended"] == "cap"
        assert chat[-1].text.endswith("Ada said to Bo: line 8 from a0")
    # a late reply to a finished conversation is ignored
    late = run(world.platform.apply(Action("a1", "comment", target_post=comments[-1].id, text="one more thing"), round + 1, "t"))
    assert late.ok and run(threads[a.id].answer(world.ctx(a, round + 1), feed(world, a, round + 1))) == []


def test_a_thread_ends_when_the_partner_falls_silent_and_state_round_trips():
    world, a, b, threads = thread_world({"dialogue.initiate": "yes", "dialogue.turn": speaking()}, ConversationConfig(idle_rounds=2))
    run(world.post(a, "New trail report"))
    (opening,) = run(threads[b.id].start(world.ctx(b, 0), feed(world, b, 0)[0]))
    act(world, b, threads, [opening], 0)
    (answer,) = run(threads[a.id].answer(world.ctx(a, 1), feed(world, a, 1)))
    act(world, a, threads, [answer], 1)
    state = json.loads(json.dumps(threads[a.id].get_state()))
    restored = ReplyThreads(ConversationConfig(idle_rounds=2))
    restored.set_state(state)
    assert restored.get_state() == threads[a.id].get_state()
    # Bo never answers: two rounds later Ada still waits, three rounds later it is over for her
    assert run(restored.answer(world.ctx(a, 3), [])) == [] and restored.threads
    run(restored.answer(world.ctx(a, 4), []))
    assert restored.threads == {}
    chat = [r for r in a.components["memory.stream"].records if r.kind == "chat"]
    assert len(chat) == 3 and chat[0].meta == {"with": "a1", "conversation": chat[0].id, "turns": 2, "ended": "idle"}


def test_no_conversation_with_oneself_or_when_declined():
    world, a, b, threads = thread_world({"dialogue.initiate": "no"})
    run(world.post(a, "Hello"))
    post = run(world.platform.get_post("p1"))
    assert run(threads[a.id].start(world.ctx(a), post)) == []  # own post
    assert run(threads[b.id].start(world.ctx(b), post)) == [] and threads[b.id].threads == {}


# --------------------------------------------------------------------------- in a run


class Chatty:
    """A test policy that reads its feed, answers conversations and starts one on the first post
    by someone else: the ReplyThreads helper as a policy uses it. Also a list memory stream."""

    plugin_name = "chatty"

    class Policy:
        def __init__(self, config, ctx):
            self.threads = ReplyThreads(ConversationConfig(max_turns=4))

        async def step(self, ctx):
            feed = await ctx.home_timeline(20)
            actions = [Action(ctx.agent.id, "browse", post_ids=tuple(p.id for p in feed))] if feed else []
            actions += await self.threads.answer(ctx, feed)
            for post in feed:
                if post.reply_to is None:
                    actions += await self.threads.start(ctx, post)
                    break
            if ctx.round == 0 and ctx.agent.index == 0:
                actions.append(Action(ctx.agent.id, "post", text="Anyone up for a hike on Saturday?"))
            return actions

        async def on_applied(self, ctx, applied):
            await self.threads.on_applied(ctx, applied)

        def get_state(self):
            return self.threads.get_state()

        def set_state(self, state):
            self.threads.set_state(state)

    @hookimpl
    def townsquare_register_policies(self):
        return [PolicySpec("chatty", self.Policy, uses={"memory.stream": "list_memory", "memory.sensory": "conversation_memory"})]

    @hookimpl
    def townsquare_register_memory(self):
        return [MemorySpec("list_memory", lambda config, ctx: ListMemory(), memory_kind="stream")]


def test_two_agents_of_a_run_talk_in_a_reply_thread(make_plugins, write_scenario, run_scenario):
    rules = ('[plugins.scripted]\nrules = { "start a conversation with" = "yes", '
             '"say next to" = """{"utterance": "Count me in!", "end": false}""" }\n')
    path = write_scenario(scenario_text(rounds=4, count=2, policy="chatty", llm=True, extra=rules))
    run_dir, summary = run_scenario(path, plugins=make_plugins(Chatty(), enable=["townsquare.testing.scripted"]))
    assert summary.rounds_completed == 4
    comments = [row for row in read_table(run_dir.path, "actions") if "comment" in row]
    # Bo opens on Ada's post in round 1; Ada's answer repeats Bo's line (the scripted model says the same
    # thing every time), so it is dropped and the conversation is over for her; Bo, unanswered, waits
    assert len(comments) == 1 and "users-0002" in comments[0]
    _, state = run_dir.latest_checkpoint()
    memories = {agent: s.get("components", s)["memory.stream"]["records"] for agent, s in state["agents"].items()}
    chats = {agent: [r for r in records if r["kind"] == "chat"] for agent, records in memories.items()}
    assert [c["meta"]["ended"] for c in chats["users-0001"]] == ["repeat", "repeat"]  # what it was about, Bo's line
    assert chats["users-0001"][1]["text"] == "Bo said to Ada: Count me in!"
