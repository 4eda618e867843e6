"""Park et al.'s reflection (§4.2): the trigger at summed importance strictly over 150, the
100 most recent records -> 3 questions -> recall per question -> 5 insights citing evidence,
stored as reflection records forming a tree."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from ga_support import RuleLLM, at, make_ctx
from townsquare.api import MemoryRecord
from townsquare.plugins.generative_agents.memory.memory_stream import MemoryStream, MemoryStreamConfig
from townsquare.plugins.generative_agents.memory.park_retrieval import ParkRetrieval
from townsquare.plugins.generative_agents.reflection.park_reflection import (
    ParkReflection, ParkReflectionConfig, read_insights, read_questions,
)

QUESTIONS = json.dumps({"questions": ["What does Ada care about?", "Who are Ada's friends?", "How does Ada spend evenings?",
                                      "An extra one"]})
INSIGHTS = json.dumps({"insights": [{"insight": f"insight {i}", "because": [i, i + 1]} for i in range(1, 8)]})


def run(coro):
    return asyncio.run(coro)


def setup(importances, llm=None, recent=100):
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False))
    ctx = make_ctx(components={"memory.stream": stream, "memory.retrieval": ParkRetrieval()},
                   llm=llm or RuleLLM([("salient", QUESTIONS), ("insights", INSIGHTS)], label_default="4"))
    for i, importance in enumerate(importances):
        run(stream.remember(at(ctx, i), [MemoryRecord(f"event {i} at the park", importance=importance)]))
    return stream, ctx, ParkReflection(ParkReflectionConfig(recent=recent))


def test_threshold_is_strictly_greater_than_150():
    stream, ctx, reflector = setup([50, 50, 50])  # exactly 150: no reflection
    assert reflector.pending_importance(stream) == 150.0
    run(reflector.reflect(at(ctx, 3)))
    assert reflector.reflections == 0 and not [p for p in ctx.llm.purposes() if p.startswith("reflection")]
    assert ctx.reflected == []
    run(stream.remember(at(ctx, 4), [MemoryRecord("one more thing", importance=1)]))  # 151
    run(reflector.reflect(ctx))
    assert reflector.reflections == 1 and reflector.last == ctx.now
    [(source, kind, text, ids)] = ctx.reflected  # one reflections row: the insights it wrote (the stream keeps copies)
    assert (source, kind, ids) == ("park_reflection", "reflection", [])
    assert text.split("\n") == [r.text for r in stream.records if r.kind == "reflection"]


def test_counter_restarts_after_a_reflection():
    stream, ctx, reflector = setup([100, 60])
    run(reflector.reflect(at(ctx, 2)))
    assert reflector.reflections == 1
    # the 15 new reflection records were created at the reflection time: not counted again
    assert reflector.pending_importance(stream) == 0.0
    run(stream.remember(at(ctx, 3), [MemoryRecord("later", importance=10)]))
    run(reflector.reflect(ctx))
    assert reflector.reflections == 1


def test_100_recent_then_3_questions_then_5_insights_each():
    stream, ctx, reflector = setup([2] * 120)
    run(reflector.reflect(at(ctx, 120)))
    calls = ctx.llm.calls
    questions_prompt = next(p for purpose, p in calls if purpose == "reflection.questions")
    shown = re.findall(r"event (\d+) at the park", questions_prompt)
    assert shown == [str(i) for i in range(20, 120)]  # the 100 most recent, oldest first
    insight_prompts = [p for purpose, p in calls if purpose == "reflection.insights"]
    assert len(insight_prompts) == 3  # a 4th question in the answer is ignored
    assert "What does Ada care about?" in insight_prompts[0]
    reflections = [r for r in stream.records if r.kind == "reflection"]
    assert len(reflections) == 15 and [r.text for r in reflections[:5]] == [f"insight {i}" for i in range(1, 6)]
    # evidence: statements 1 and 2 of the question's numbered list, as record ids
    first = insight_prompts[0]
    one, two = (re.search(rf"^{n}\. event (\d+) at the park", first, re.M).group(1) for n in (1, 2))
    assert reflections[0].evidence == (f"m{one}", f"m{two}")
    assert reflections[0].meta == {"question": "What does Ada care about?"}
    assert all(r.importance == 4.0 for r in reflections)  # rated by the stream like any record


def test_reflections_form_a_tree():
    cite_all = json.dumps({"insights": [{"insight": "a pattern", "because": list(range(1, 16))}]})
    stream, ctx, reflector = setup([160], llm=RuleLLM([("salient", QUESTIONS), ("insights", cite_all)], label_default="4"))
    run(reflector.reflect(at(ctx, 1)))
    first = [r for r in stream.records if r.kind == "reflection"]
    assert len(first) == 3 and all(r.evidence == ("m0",) for r in first)  # leaves: the one observation
    run(stream.remember(at(ctx, 2), [MemoryRecord("big news", importance=160)]))
    run(reflector.reflect(ctx))
    second = [r for r in stream.records if r.kind == "reflection" and r.created == ctx.now]
    by_id = {r.id: r for r in stream.records}
    cited = [by_id[e] for r in second for e in r.evidence]  # every link resolves
    assert {r.kind for r in cited} == {"observation", "reflection"}

    def depth(record):
        return 1 + max((depth(by_id[e]) for e in record.evidence), default=0)

    assert max(depth(r) for r in second) == 3  # observation <- reflection <- reflection


def test_readers_drop_a_preamble_and_uncited_insights():
    # a heading given as the first "question" no longer pushes the third question out
    assert read_questions({"questions": ["Here are the 3 questions:", "1) a?", "- b?", "c?", "d?"]}, 3) == ["a?", "b?", "c?"]
    with pytest.raises(ValueError):
        read_questions({"questions": ["Here they are:", ""]}, 3)
    shown = [MemoryRecord("x", id="m7"), MemoryRecord("y", id="m9")]
    answer = {"insights": [{"insight": "1. likes x", "because": [1, 2]}, {"insight": "no citation here", "because": []},
                           {"insight": "bad cite", "because": [5]}, {"insight": "Likes y", "because": ["2", 2]}]}
    assert read_insights(answer, shown, 5) == [("likes x", ("m7", "m9")), ("Likes y", ("m9",))]
    with pytest.raises(ValueError, match="cites"):
        read_insights({"insights": [{"insight": "bad cite", "because": [5]}]}, shown, 5)


def test_a_preamble_before_the_json_still_gives_three_questions():
    preamble = "Here are the 3 questions:\n" + json.dumps({"questions": ["a?", "b?", "c?"]})
    stream, ctx, reflector = setup([200], llm=RuleLLM([("salient", preamble), ("insights", INSIGHTS)], label_default="4"))
    run(reflector.reflect(at(ctx, 1)))
    asked = [r.meta["question"] for r in stream.records if r.kind == "reflection"]
    assert list(dict.fromkeys(asked)) == ["a?", "b?", "c?"]


def test_the_100_latest_are_shown_though_two_of_them_are_long():
    # 98 short records (55 characters) and 2 of 6,000 among the 100 latest, budget 12,000: newest first,
    # chat 70 fits (7,700 used), chat 30 does not and is skipped, and the 30 older ones still come
    # (the budget used to stop at the first record that did not fit: 68 of the 98 shown)
    stream = MemoryStream(MemoryStreamConfig(seed_memories=False))
    llm = RuleLLM([("salient", QUESTIONS), ("insights", INSIGHTS)], label_default="4")
    ctx = make_ctx(components={"memory.stream": stream, "memory.retrieval": ParkRetrieval()}, llm=llm)
    for i in range(100):
        text = f"chat {i}: " + "la " * 2000 if i in (30, 70) else f"event {i} at the park with friends from the village"
        run(stream.remember(at(ctx, i), [MemoryRecord(text, importance=3)]))
    run(ParkReflection(ParkReflectionConfig()).run(at(ctx, 100), stream))
    prompt = next(p for purpose, p in llm.calls if purpose == "reflection.questions")
    assert len(re.findall(r"^- event \d+ at the park", prompt, re.M)) == 98
    assert "chat 70" in prompt and "chat 30" not in prompt


def test_unusable_answers_are_parse_failures_and_store_nothing():
    llm = RuleLLM([("salient", "")], text_default="I cannot say.")
    stream, ctx, reflector = setup([200], llm=llm)
    run(reflector.reflect(at(ctx, 1)))
    assert "reflection.questions.parse_failure" in llm.purposes()
    llm.rules = [(re.compile("salient"), QUESTIONS)]  # questions fine; insights: "I cannot say." (no JSON)
    reflector.last = None
    run(reflector.reflect(ctx))
    assert "reflection.insights.parse_failure" in llm.purposes()
    assert not [r for r in stream.records if r.kind == "reflection"]


def test_without_memory_or_llm_nothing_happens():
    reflector = ParkReflection()
    assert run(reflector.reflect(make_ctx(llm=RuleLLM()))) == []
    stream, ctx, reflector = setup([500])
    ctx.llm = None
    run(reflector.reflect(ctx))
    assert reflector.reflections == 0


def test_state_round_trips():
    stream, ctx, reflector = setup([200])
    run(reflector.reflect(at(ctx, 1)))
    again = ParkReflection()
    again.set_state(reflector.get_state())
    assert again.get_state() == reflector.get_state() and again.last == ctx.now


def test_a_budget_skips_a_record_that_does_not_fit_and_goes_on():
    from townsquare.plugins.generative_agents.memory.memory_text import bounded, memory_lines

    records = [MemoryRecord("a" * 100), MemoryRecord("b" * 2000), MemoryRecord("c" * 100), MemoryRecord("d" * 300)]
    # 104 + 104 fit in 500; the 2,004 of the second never do, the 304 of the fourth no longer do: skipped, not a stop
    assert [r.text[0] for r in bounded(records, 10, 500)] == ["a", "c"]
    assert [r.text[0] for r in bounded(records, 1, 500)] == ["a"]  # k still binds
    only_long = [MemoryRecord("x" * 2000)]
    assert len(memory_lines(only_long, 5, 500)) == 500 - 1  # nothing fits: the first is shown, cut to the budget
