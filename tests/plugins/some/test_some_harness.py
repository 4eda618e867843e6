"""SoMe's tool-call loop, answer extraction, judging and scoring, with the scripted LLM behind
the kernel's middleware chain (accounting, cache)."""

from __future__ import annotations

import asyncio

import pytest

from townsquare.plugins.llm.llm_cache import CacheConfig, LLMCache
from townsquare.plugins.some.corpus import corpus_from_run
from townsquare.plugins.some.harness import Harness, HarnessSettings
from townsquare.plugins.some.scoring import (
    Result, extract_label, format_table, judge_score, normalised, parse_scores, plain_label, summarise,
)
from townsquare.plugins.some.some_command import load_some_prompts
from townsquare.plugins.some.tasks import TASKS, Query, is_correct
from townsquare.plugins.some.tool_loop import Step, Unreadable, parse_step, run_tools
from townsquare.plugins.some.tools import Toolbox
from townsquare.testing.llm_chain import build_chain, build_context
from townsquare.testing.scripted import ScriptedConfig, ScriptedLLM

from test_some_tools import make_run, topic_embed

PROMPTS = load_some_prompts()
UBP = TASKS["user_behavior_prediction"]


def scripted(rules: dict[str, str], middleware=()):
    provider = ScriptedLLM(ScriptedConfig(rules=rules))
    return provider, build_chain(provider, list(middleware), agent_id=None)


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("reply, step", [
    ('{"tool": "user_search", "arguments": {"uid": "7"}}', Step("user_search", {"uid": "7"})),
    ('```json\n{"tool": "data_folder", "arguments": {"folder_name": "7_posts", "start_idx": 0, "end_idx": 5}}\n```',
     Step("data_folder", {"folder_name": "7_posts", "start_idx": 0, "end_idx": 5})),
    ('{"answer": "yes"}', Step(answer="yes")),
    ('{"answer": "she wrote \\"}{\\" twice"} and more', Step(answer='she wrote "}{" twice')),
    ('{"action": "final_answer", "answer": "no"}', Step(answer="no")),
    ('{"name": "topic_search", "arguments": "{\\"topic_name\\": \\"rain\\"}"}', Step("topic_search", {"topic_name": "rain"})),
    ("{'tool': 'user_search', 'arguments': {'uid': '7',},}", Step("user_search", {"uid": "7"})),
    ('{"tool": "user_search", "arguments": {"uid": "7"', Step("user_search", {"uid": "7"})),  # cut off
    ("print(post_search(location='Jiangxi', start_time='2025-06-02 19:00:00', end_time='2025-06-02 20:00:00'))",
     Step("post_search", {"location": "Jiangxi", "start_time": "2025-06-02 19:00:00", "end_time": "2025-06-02 20:00:00"})),
    ("I will call user_search('42') now", Step("user_search", {"uid": "42"})),
    # fig. 5b: bare times as positional arguments
    ("print(post_search(location='Jiangxi', 2025-06-02 19:00:00, 2025-06-02 20:00:00))",
     Step("post_search", {"location": "Jiangxi", "start_time": "2025-06-02 19:00:00", "end_time": "2025-06-02 20:00:00"})),
    ("The user will probably like it: yes.", Step(answer="The user will probably like it: yes.")),
])
def test_replies_are_read_with_repair(reply, step):
    assert parse_step(reply) == step


@pytest.mark.parametrize("reply, problem", [
    ("", "empty"),
    ('{"tool": "user_search", "arguments": [1, 2]}', "not an object"),
    ('{"thought": "hmm"}', 'neither "tool" nor "answer"'),
    ('{"tool": "user_search", "arguments": {"uid": }}', "malformed"),
    ("user_search(uid=", "not closed"),
])
def test_unreadable_replies_say_why(reply, problem):
    with pytest.raises(Unreadable, match=problem):
        parse_step(reply)


def corpus(tmp_path, until=None):
    make_run(tmp_path / "events.sqlite")
    return corpus_from_run(tmp_path / "events.sqlite", until)


def test_the_loop_calls_tools_until_the_answer_and_every_call_is_accounted(tmp_path):
    provider, chain = scripted({
        "Will the user": '{"tool": "user_search", "arguments": {"uid": "users-0001"}}',
        "Result of user_search": '{"tool": "data_folder", "arguments": {"folder_name": "users-0001_posts", "start_idx": 0, "end_idx": 10}}',
        "Result of data_folder": '{"answer": "Yes, alice runs: she will like it."}',
    })
    box = Toolbox(corpus(tmp_path, 3), topic_embed, None)
    transcript = run(run_tools(chain.client.for_agent("q1"), box, "system", "Will the user with ID users-0001 like this post?",
                               max_steps=5, max_tokens=64, temperature=0.0))
    assert transcript.status == "answered" and transcript.answer == "Yes, alice runs: she will like it."
    assert [c["tool"] for c in transcript.calls] == ["user_search", "data_folder"] and all(c["ok"] for c in transcript.calls)
    assert provider.calls == 3 and chain.statuses() == ["ok"] * 3
    assert {r.agent_id for r in chain.records} == {"q1"} and {r.purpose for r in chain.records} == {"some.step"}


def test_an_unreadable_reply_gets_one_repair_then_the_query_is_unfinished(tmp_path):
    box = Toolbox(corpus(tmp_path), topic_embed, None)
    provider, chain = scripted({"could not be read": '{"answer": "no"}', "Will": '{"tool": "user_search", "arguments": {"uid": }}'})
    transcript = run(run_tools(chain.client, box, "s", "Will it?", max_steps=5, max_tokens=64, temperature=0.0))
    assert (transcript.status, transcript.answer, transcript.repairs) == ("answered", "no", 1)
    assert [r.purpose for r in chain.records] == ["some.step", "some.step.repair"]
    provider, chain = scripted({"Will": '{"tool": "user_search", "arguments": {"uid": }}'})
    transcript = run(run_tools(chain.client, box, "s", "Will it?", max_steps=5, max_tokens=64, temperature=0.0))
    assert transcript.status == "unparsable" and not transcript.answered and provider.calls == 2
    assert chain.statuses() == ["ok", "ok", "parse_failure"]


def test_the_step_limit_ends_a_query_that_never_answers(tmp_path):
    box = Toolbox(corpus(tmp_path), topic_embed, None)
    provider, chain = scripted({".": '{"tool": "topic_search", "arguments": {"topic_name": "marathon"}}'})
    transcript = run(run_tools(chain.client, box, "s", "q", max_steps=4, max_tokens=64, temperature=0.0))
    assert transcript.status == "max_steps" and len(transcript.calls) == 4 and provider.calls == 4


def test_a_plain_label_needs_no_extraction_call_and_others_are_extracted_with_repair():
    provider, chain = scripted({"final judgement": "yes", "emotion the user will feel": "maybe happy?",
                                "Answer with exactly one of": "still unsure"})
    assert plain_label("是。", ("yes", "no")) == "yes" and plain_label("**Half-True**", TASKS["misinformation_detection"].labels) == "half-true"
    assert run(extract_label(chain.client, UBP, "q", "Yes", PROMPTS)) == "yes" and provider.calls == 0
    assert run(extract_label(chain.client, UBP, "q", "After reading her posts I think she would, overall yes.", PROMPTS)) == "yes"
    assert provider.calls == 1
    uea = TASKS["user_emotion_analysis"]
    assert run(extract_label(chain.client, uea, "q", "Hard to say what they feel", PROMPTS)) == "error"
    assert chain.statuses()[-3:] == ["ok", "ok", "parse_failure"]  # one repair, then the default


def test_judge_scores_are_parsed_with_repair_and_normalised_to_100():
    assert parse_scores("Accuracy: 4, Completeness: 3, Relevance: 5", ("accuracy", "completeness", "relevance")) == \
        {"accuracy": 4.0, "completeness": 3.0, "relevance": 5.0}
    assert parse_scores("**Accuracy**: 2\nCompleteness：1", ("accuracy", "completeness")) == {"accuracy": 2.0, "completeness": 1.0}
    assert parse_scores(" 3 ", ("accuracy",)) == {"accuracy": 3.0} and parse_scores("3/5", ("accuracy",)) == {"accuracy": 3.0}
    assert parse_scores("Accuracy: 4", ("accuracy", "completeness")) is None and parse_scores("great", ("accuracy",)) is None
    assert normalised({"accuracy": 4.0, "completeness": 3.0, "relevance": 5.0}) == 80.0
    provider, chain = scripted({"Reply in exactly this form: Accuracy: <0-5>, Completeness": "Accuracy: 5, Completeness: 2",
                                "Reference summary": "It is fairly good."})
    scores = run(judge_score(chain.client, TASKS["streaming_event_summary"], "q", "ref", "answer", PROMPTS))
    assert scores == {"accuracy": 5.0, "completeness": 2.0} and provider.calls == 2 and normalised(scores) == 70.0


def test_accuracy_and_tcr_on_known_answers():
    def result(correct, completed, extracted):
        return Result(task=UBP.name, id="q", query="", label="yes", status="answered", completed=completed, extracted=extracted,
                      correct=correct)

    results = [result(True, True, "yes"), result(True, True, "yes"), result(False, True, "no"), result(False, False, "error"),
               Result(task=UBP.name, id="q", query="", label="no", status="max_steps", correct=False)]
    summary = summarise(UBP, results)
    assert (summary.queries, summary.accuracy, summary.tcr, summary.score) == (5, 40.0, 60.0, None)
    smq = TASKS["social_media_question_answering"]
    judged = [Result(task=smq.name, id=str(i), query="", label="", status="answered", completed=True, score=s) for i, s in enumerate((80.0, 60.0))]
    judged.append(Result(task=smq.name, id="x", query="", label="", status="unparsable", score=0.0))
    summary = summarise(smq, judged)
    assert summary.score == pytest.approx(140 / 3) and summary.tcr == pytest.approx(200 / 3) and summary.accuracy is None
    table = format_table([summarise(UBP, results), summary])
    assert table.splitlines()[1].split()[:5] == ["UBP", "5", "40.0", "-", "60.0"]
    assert "mean of ACC/score: 43.3" in table


def test_mid_verdicts_count_within_the_ground_truths_three_classes():
    mid = TASKS["misinformation_detection"]
    assert is_correct(mid, "mostly-true", "true") and is_correct(mid, "pants-fire", "false") and is_correct(mid, "barely-true", "half")
    assert not is_correct(mid, "half-true", "true") and is_correct(mid, "half-true", "half-true")


def queries():
    return [
        Query(UBP.name, "a", "Will the user with ID users-0001 like this post? ```#marathon route```", "yes", behavior="like"),
        Query(UBP.name, "b", "Will the user with ID users-0002 like this post? ```pasta```", "no", behavior="like"),
        Query("social_media_question_answering", "c", "What does users-0001 post about?", "running and bread"),
    ]


RULES = {
    "Reference answer": "Accuracy: 4",  # the judge (its prompt quotes the question: first)
    "Will the user": '{"tool": "user_search", "arguments": {"uid": "users-0001"}}',
    "Result of user_search": '{"answer": "yes"}',
    "What does": '{"tool": "topic_search", "arguments": {"topic_name": "marathon"}}',
    "Result of topic_search": '{"answer": "Mostly running."}',
}


def test_the_harness_scores_queries_through_the_chain_and_replays_from_the_cache(tmp_path):
    data = corpus(tmp_path, 3)
    ctx = build_context(str(tmp_path), llm={"name": "scripted"})
    results = []
    for attempt in range(2):
        cache = LLMCache(CacheConfig(), ctx)
        provider, chain = scripted(RULES, [cache])
        harness = Harness(chain.client, [chain.client], topic_embed, PROMPTS, HarnessSettings(concurrency=2))
        results.append(run(harness.evaluate(queries(), lambda task: data)))
        run(cache.aclose())
        if attempt == 0:
            assert provider.calls == 7  # two replies per query, one judge call
        else:
            assert provider.calls == 0  # the same evaluation again: every answer from the cache
        assert {r.agent_id for r in chain.records} == {"some/UBP/a", "some/UBP/b", "some/SMQ/c", "some-judge[0]/SMQ/c"}
    first, again = results
    assert [(r.extracted, r.correct, r.completed, r.score) for r in first] == \
        [("yes", True, True, None), ("yes", False, True, None), (None, None, True, 80.0)]
    assert [(r.answer, r.score) for r in again] == [(r.answer, r.score) for r in first]
    assert summarise(UBP, first[:2]).accuracy == 50.0 and first[2].criteria == {"accuracy": 4.0}
    assert first[0].tool_calls[0]["tool"] == "user_search" and first[0].steps == 2


def test_a_failing_llm_ends_one_query_and_the_evaluation_goes_on(tmp_path):
    from townsquare.api import LLMFault

    class Flaky(ScriptedLLM):
        async def complete(self, request):
            if "users-0002" in request.messages[-1].content:
                raise LLMFault("server_error", "HTTP 503", status=503)
            return await super().complete(request)

    provider = Flaky(ScriptedConfig(rules=RULES))
    chain = build_chain(provider, agent_id=None)
    harness = Harness(chain.client, [chain.client], topic_embed, PROMPTS, HarnessSettings())
    results = run(harness.evaluate(queries(), lambda task: corpus(tmp_path)))
    assert [r.status for r in results] == ["answered", "llm_failure", "answered"]
    assert not results[1].completed and results[1].extracted == "error" and "503" in results[1].error
    assert "error" in chain.statuses()


def test_each_task_offers_the_released_tools_only(tmp_path):
    seen = []

    class Recording(ScriptedLLM):
        async def complete(self, request):
            seen.append(request)
            return await super().complete(request)

    rules = {"Is the user with ID": '{"tool": "post_search", "arguments": {"location": "x", "start_time": "a", "end_time": "b"}}',
             "Result of post_search": '{"answer": "yes"}'}
    chain = build_chain(Recording(ScriptedConfig(rules=rules)), agent_id=None)
    harness = Harness(chain.client, [chain.client], topic_embed, PROMPTS, HarnessSettings())
    mcr = Query("media_content_recommend", "m", "Is the user with ID users-0001 interested in this post? ```bread```", "yes")
    result = run(harness.evaluate([mcr], lambda task: corpus(tmp_path)))[0]
    # MCR's agent has SearchUser and DataFolder (the released test_media_content_recommend.py): post_search is no tool of its
    assert result.tool_calls[0]["ok"] is False and "the tools are: user_search, data_folder" in result.tool_calls[0]["result"]
    first = seen[0]
    offered = [alt["properties"]["tool"]["const"] for alt in first.json_schema["oneOf"] if "tool" in alt["properties"]]
    assert offered == ["user_search", "data_folder"] and '"name": "post_search"' not in first.messages[0].content
    assert [TASKS[n].tools for n in ("misinformation_detection", "streaming_event_summary")] == \
        [("knowledge_retrieve",), ("data_folder", "topic_search")]


def test_a_judged_answer_that_scores_zero_is_checked_for_completion_and_a_long_one_fails(tmp_path):
    rules = {"Reference answer": "Accuracy: 0", "Does the answer try to answer": "complete",
             "What does users-0001": '{"answer": "I could not find it, but probably football."}',
             "What does users-0002": '{"answer": "' + "very long " * 600 + '"}',
             "What does users-0003": '{"answer": "Error: the tool failed."}'}
    provider, chain = scripted(rules)
    harness = Harness(chain.client, [chain.client], topic_embed, PROMPTS, HarnessSettings())
    asked = [Query("social_media_question_answering", f"q{i}", f"What does users-000{i} post about?", "running") for i in (1, 2)]
    first, long = run(harness.evaluate(asked, lambda task: corpus(tmp_path)))
    # a wrong answer scores 0 but did the task (the released TCR's check says so): completed
    assert (first.score, first.completed) == (0.0, True)
    # an answer over 5,000 characters scores 0 unjudged and is not completed (the released scoring)
    assert (long.score, long.completed) == (0.0, False) and long.criteria == {}
    purposes = [r.purpose for r in chain.records]
    assert purposes.count("some.complete.smq") == 1 and purposes.count("some.score.smq") == 1
    provider, chain = scripted({**rules, "Does the answer try to answer": "incomplete"})
    harness = Harness(chain.client, [chain.client], topic_embed, PROMPTS, HarnessSettings())
    failed = run(harness.evaluate([Query("social_media_question_answering", "q3", "What does users-0003 post about?", "running")],
                                  lambda task: corpus(tmp_path)))[0]
    assert (failed.score, failed.completed) == (0.0, False)
    assert summarise(TASKS["social_media_question_answering"], [first, long, failed]).tcr == pytest.approx(100 / 3)


@pytest.mark.parametrize("constrained, mode", [(True, "json_schema"), (False, "prompt")])
def test_tool_calls_are_constrained_unless_turned_off(tmp_path, monkeypatch, constrained, mode):
    from townsquare.plugins.llm.openai import OpenAIConfig, OpenAIProvider
    from townsquare.testing.fault_server import FaultServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    box = Toolbox(corpus(tmp_path), topic_embed, None)
    with FaultServer() as server:
        provider = OpenAIProvider(OpenAIConfig(base_url=server.base_url, model="m"), build_context())
        chain = build_chain(provider)

        async def go():
            try:
                return await run_tools(chain.client, box, "s", "Will it?", max_steps=1, max_tokens=64, temperature=0.0,
                                       constrained=constrained)
            finally:
                await provider.aclose()

        run(go())
        body = server.recent[0]
    assert ("response_format" in body) is constrained
    if constrained:  # the step schema: the answer, or a call of one of the offered tools
        assert body["response_format"]["json_schema"]["name"] == "some_step"
    assert chain.records[0].mode == mode
    assert HarnessSettings().constrained_tool_calls is True


def test_a_choice_answer_over_5000_characters_is_an_error_where_the_released_scripts_say_so(tmp_path):
    long_yes = '{"answer": "' + "yes indeed " * 500 + '"}'
    rules = {"Is the user with ID": long_yes, "Which emotion will the user": long_yes.replace("yes indeed", "positive mood"),
             "extract": "yes", "Which emotion does": "positive"}
    provider, chain = scripted(rules)
    harness = Harness(chain.client, [chain.client], topic_embed, PROMPTS, HarnessSettings())
    mcr = Query("media_content_recommend", "m", "Is the user with ID users-0001 interested in this post? ```bread```", "yes")
    uea = Query("user_emotion_analysis", "e", "Which emotion will the user with ID users-0001 feel about this post? ```bread```",
                "positive")
    mcr_result, uea_result = run(harness.evaluate([mcr, uea], lambda task: corpus(tmp_path)))
    # MCR's released extraction marks it 错误 unread: an error, not completed, no extraction call
    assert (mcr_result.extracted, mcr_result.correct, mcr_result.completed) == ("error", False, False)
    assert not any(r.purpose == "some.extract.mcr" for r in chain.records)
    # UEA's released extraction reads every answer
    assert any(r.purpose == "some.extract.uea" for r in chain.records)
