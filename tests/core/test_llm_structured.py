"""Structured answers on every backend: declarations next to the prompt, the strongest mode per
request, the constraint in the request each backend receives, outcomes counted, replay strict."""

from __future__ import annotations

import asyncio
import re
import sqlite3

import pytest

from townsquare.errors import UsageError
from townsquare.llm import Accounting, LLMClient, LLMRequest, LLMResponse, Message, compose, current_issue
from townsquare.llm_answers import AnswerFormat, ParseFailure, match_prefix
from townsquare.cli.run_output import summary_line
from townsquare.llm_modes import (answers_in_db, choose_modes, count_answer, mode_for, provider_capabilities,
                                  tally_answers)
from townsquare.lib.prompt_files import load_answers, load_prompts
from townsquare.plugins.llm.strict_schema import label_schema, strict_schema, unwrap_label
from townsquare.store import EventStore
from townsquare.testing.oracle import OracleLLM
from townsquare.testing.scripted import ScriptedLLM

LIKE = AnswerFormat("like", labels=("like", "no operation"), default="no operation")
PLAN = AnswerFormat("plan", schema={"type": "object", "properties": {"day": {"type": "integer", "minimum": 1, "maximum": 7}}})
COMMENT = AnswerFormat("comment", prefixes=("no comment", "Comment content:"), default="no comment")


class Fake:
    """A provider with declared capabilities that answers from a list (and says its mode)."""

    name, model = "fake", "fake-1"

    def __init__(self, answers, structured=None, mode=None):
        self.answers, self.structured, self.mode = list(answers), structured or {}, mode
        self.requests: list[LLMRequest] = []

    def describe(self):
        return {"structured": self.structured}

    async def complete(self, request):
        self.requests.append(request)
        meta = {"mode": self.mode or request.mode} if request.mode is not None else {}
        return LLMResponse(text=self.answers.pop(0), meta=meta)


def client(provider, records=None, failures=None):
    records = records if records is not None else []
    llm = LLMClient(compose(provider, [Accounting(provider, records.append, lambda: 0)]), model=provider.model)
    if failures is not None:
        llm.on_parse_failure = lambda request, answer, kind: failures.append((request.purpose, request.mode, answer))
    return llm.for_agent("a1")


# --------------------------------------------------------------------------- declarations


def test_an_answer_declares_exactly_one_format():
    assert (LIKE.kind, PLAN.kind, COMMENT.kind) == ("labels", "json", "prefixes")
    for bad in (dict(), dict(labels=("a",), schema={}), dict(labels=()), dict(labels=("a", " ")), dict(labels=("a",), default="b")):
        with pytest.raises(ValueError):
            AnswerFormat("x", **bad)
    follow = AnswerFormat("follow", labels=("do not follow",), default="do not follow").with_labels(["u-1", "u-2"])
    assert follow.labels == ("u-1", "u-2", "do not follow")
    assert PLAN.with_schema(required=["day"]).schema["required"] == ["day"] and "required" not in PLAN.schema


def test_answers_are_declared_in_the_prompt_file_and_replaced_by_a_studys(tmp_path):
    (tmp_path / "p.toml").write_text('ask = "Like it? {post}"\n\n[answers.like]\nlabels = ["like", "skip"]\ndefault = "skip"\n\n'
                                     '[answers.plan.schema]\ntype = "object"\nproperties.day = { type = "integer" }\n')
    assert load_prompts(tmp_path, "p") == {"ask": "Like it? {post}"}  # the answers table is no prompt
    answers = load_answers(tmp_path, "p")
    assert answers["like"] == AnswerFormat("like", labels=("like", "skip"), default="skip")
    assert answers["plan"].schema == {"type": "object", "properties": {"day": {"type": "integer"}}}
    (tmp_path / "study.toml").write_text('[answers.like]\nlabels = ["yes", "no"]\ndefault = "no"\n')
    assert load_answers(tmp_path, "p", "study.toml", str(tmp_path))["like"].labels == ("yes", "no")
    (tmp_path / "study.toml").write_text('[answers.likes]\nlabels = ["yes"]\n')
    with pytest.raises(UsageError, match="study.toml: unknown answer 'likes'"):
        load_answers(tmp_path, "p", "study.toml", str(tmp_path))
    (tmp_path / "study.toml").write_text('[answers.like]\nlabels = ["yes"]\nschema = {}\n')
    with pytest.raises(UsageError, match="study.toml: answer 'like': give exactly one of labels, schema, prefixes"):
        load_answers(tmp_path, "p", "study.toml", str(tmp_path))


def test_openings():
    prefixes = ("no comment", "Comment content:")
    assert match_prefix("No comment.", prefixes) == "no comment"
    assert match_prefix("**Comment content:** nice", prefixes) == "Comment content:"
    assert match_prefix("comment content\uff1a nice", prefixes) == "Comment content:"
    for answer in ("Comment content:", "Comment content:   ", "no commentary here", "I'd rather not"):
        with pytest.raises(ParseFailure):
            match_prefix(answer, prefixes)


# --------------------------------------------------------------------------- modes


def test_the_strongest_mode_per_kind():
    assert choose_modes({"labels": ["json_schema", "guided_choice"], "json": ["json_object"]}) == {
        "labels": "guided_choice", "json": "json_object", "prefixes": "prompt"}
    assert choose_modes({}) == {"labels": "prompt", "json": "prompt", "prefixes": "prompt"}
    assert provider_capabilities(object()) == {}
    assert provider_capabilities(Fake([], {"labels": ["logprob", "nonsense"], "json": []})) == {"labels": ("logprob",)}
    caps = {"labels": ["json_schema", "guided_choice"]}
    ask = LLMRequest(messages=(), labels=("a", "b"))
    assert mode_for(ask, caps) == "guided_choice"  # no mode asked: the strongest
    assert mode_for(LLMRequest(messages=(), labels=("a",), mode="json_schema"), caps) == "json_schema"
    assert mode_for(LLMRequest(messages=(), labels=("a",), mode="prompt"), caps) == "prompt"
    assert mode_for(LLMRequest(messages=(), labels=("a",), mode="logprob"), caps) == "guided_choice"  # not offered
    assert mode_for(LLMRequest(messages=()), caps) is None  # free text


def test_requests_carry_the_mode_and_the_cache_key_keeps_it():
    provider = Fake(["like", '{"day": 3}', "no comment"], {"labels": ["logprob"], "json": ["grammar"]})
    llm = client(provider)
    asyncio.run(llm.ask("p", LIKE))
    asyncio.run(llm.ask("p", PLAN))
    asyncio.run(llm.ask("p", COMMENT))
    assert [r.mode for r in provider.requests] == ["logprob", "grammar", "prompt"]
    request = provider.requests[0]
    from dataclasses import replace

    assert request.cache_key("m") != replace(request, mode="prompt").cache_key("m")
    text = LLMRequest(messages=(Message("user", "hi"),))
    assert text.cache_key("m") == replace(text, mode=None).cache_key("m")


def test_outcomes_constrained_parsed_repaired_fallback():
    records, failures = [], []
    constrained = client(Fake(["like"], {"labels": ["logprob"]}), records, failures)
    answer = asyncio.run(constrained.ask("p", LIKE))
    assert (answer.value, answer.outcome, answer.mode) == ("like", "constrained", "logprob")
    parsed = client(Fake(["Like."]), records, failures)
    assert asyncio.run(parsed.ask("p", LIKE)).outcome == "parsed"
    repaired = client(Fake(["I love it", "no operation"]), records, failures)
    answer = asyncio.run(repaired.ask("p", LIKE))
    assert (answer.value, answer.outcome) == ("no operation", "repaired")
    fallback = client(Fake(["I love it", "still no"]), records, failures)
    answer = asyncio.run(fallback.ask("p", LIKE))
    assert (answer.value, answer.outcome, answer.fallback) == ("no operation", "fallback", True)
    assert failures == [("like", "prompt", "still no")]
    # JSON: validated; openings: the text after one
    validated = client(Fake(['{"day": 9}', '{"day": 2}'], {"json": ["grammar"]}), records)
    answer = asyncio.run(validated.ask("p", PLAN, validate=lambda v: v if 1 <= v["day"] <= 7 else int("x")))
    assert (answer.value, answer.outcome, answer.mode) == ({"day": 2}, "repaired", "grammar")
    opened = client(Fake(["Comment content: so true"]), records)
    answer = asyncio.run(opened.ask("p", COMMENT))
    assert (answer.value, answer.text, answer.outcome) == ("Comment content:", "Comment content: so true", "parsed")
    # the rows say the mode, and the outcomes are counted from them alone
    rows = [(r.purpose, r.mode, r.status, 1) for r in records]
    assert {r.mode for r in records} == {"logprob", "prompt", "grammar"}
    tally = tally_answers(rows + [("like", "prompt", "parse_failure", 1)])
    assert tally["like"] == {"modes": ["logprob", "prompt"], "constrained": 1, "parsed": 1, "repaired": 1, "fallback": 1}
    assert tally["plan"]["repaired"] == 1 and tally["comment"]["parsed"] == 1


def test_a_constrained_call_its_repair_and_its_fallback_share_one_issue_number():
    """``llm_calls`` is written in issue order: each ``ask`` is its agent's next call, and the
    repair and the parse failure of a fallback are parts of it, whatever the mode."""
    records, failures = [], []
    provider = Fake(['{"day": 3}', '{"day": 9}', '{"day": 2}', "I love it", "still no"], {"json": ["grammar"]})
    llm = client(provider, records)
    llm.on_parse_failure = lambda request, answer, kind: failures.append((request.purpose, current_issue()))
    valid = lambda v: v if 1 <= v["day"] <= 7 else int("x")

    async def asks():
        return [await llm.ask("p", PLAN, validate=valid), await llm.ask("p", PLAN, validate=valid), await llm.ask("p", LIKE)]

    outcomes = [answer.outcome for answer in asyncio.run(asks())]
    assert outcomes == ["constrained", "repaired", "fallback"]
    assert [(r.purpose, r.mode, r.issue) for r in records] == [
        ("plan", "grammar", (0, 0)), ("plan", "grammar", (1, 0)), ("plan.repair", "grammar", (1, 1)),
        ("like", "prompt", (2, 0)), ("like.repair", "prompt", (2, 1)),
    ]
    assert failures == [("like", (2, 1))]


def test_counting_one_row_at_a_time_matches_the_tally():
    rows = [("like", "logprob", "ok"), ("like", "logprob", "cached"), ("plan", "prompt", "ok"), ("plan.repair", "prompt", "ok"),
            ("plan", "prompt", "ok"), ("plan.repair", "prompt", "ok"), ("plan", "prompt", "parse_failure"),
            ("like", "logprob", "error"), ("post", None, "ok"), ("topics", None, "parse_failure")]
    running: dict = {}
    for purpose, mode, status in rows:
        count_answer(running, purpose, mode, status)
    assert running == {"constrained": 2, "parsed": 0, "repaired": 1, "fallback": 2}
    table = tally_answers([(p, m, s, 1) for p, m, s in rows])
    assert {o: sum(e[o] for e in table.values()) for o in running} == running
    assert summary_line(table).startswith("structured answers: 2 constrained, 0 parsed, 1 repaired, 2 fallback (")
    assert summary_line({}) is None


def test_llm_calls_keep_the_mode_and_old_rows_fit(tmp_path):
    store = EventStore(tmp_path / "events.sqlite")
    row = (0, "a1", "like", "local", "m", "ok", 1, 1, 1.0, 0.0, None, None)
    store.write_now("llm_calls", [row])  # a caller's row without the mode column
    store.write_now("llm_calls", [row + ("logprob",)])
    store.close()
    db = sqlite3.connect(tmp_path / "events.sqlite")
    assert db.execute("SELECT mode FROM llm_calls ORDER BY seq").fetchall() == [(None,), ("logprob",)]
    assert answers_in_db(db) == {"like": {"modes": ["logprob"], "constrained": 1, "parsed": 0, "repaired": 0, "fallback": 0}}


def test_the_test_models_declare_what_they_hold():
    assert provider_capabilities(OracleLLM()) == {k: ("rules",) for k in ("labels", "json", "prefixes")}
    assert provider_capabilities(ScriptedLLM()) == {"labels": ("scripted",)}
    llm = LLMClient(OracleLLM().complete, model="oracle")
    answer = asyncio.run(llm.ask("Would you like it?", AnswerFormat("like", labels=("like", "skip"), default="skip")))
    assert (answer.value, answer.outcome, answer.mode) == ("skip", "constrained", "rules")


# --------------------------------------------------------------------------- schemas as backends enforce them


def test_strict_schemas():
    schema = {"type": "object", "properties": {"day": {"type": "integer", "minimum": 1, "maximum": 7},
                                               "note": {"type": "string", "maxLength": 40, "pattern": "^a"},
                                               "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
              "required": ["day"]}
    full = strict_schema(schema)
    assert full["required"] == ["day", "note", "tags"] and full["additionalProperties"] is False
    assert full["properties"]["day"] == {"type": "integer", "enum": [1, 2, 3, 4, 5, 6, 7]}
    assert full["properties"]["note"]["pattern"] == "^a" and full["properties"]["tags"]["maxItems"] == 2
    portable = strict_schema(schema, portable=True)
    assert portable["properties"]["note"] == {"type": "string"} and "maxItems" not in portable["properties"]["tags"]
    assert portable["properties"]["day"]["enum"] == [1, 2, 3, 4, 5, 6, 7]  # a range every dialect enforces
    assert schema["required"] == ["day"]  # the declaration is left alone
    assert label_schema(["like", "skip"])["properties"]["answer"]["enum"] == ["like", "skip"]
    assert unwrap_label('{"answer": "skip"}', ["like", "skip"]) == "skip"
    assert unwrap_label('{"answer": "maybe"}', ["like", "skip"]) is None and unwrap_label("like", ["like"]) is None


def test_run_health_shows_how_structured_answers_came_out(tmp_path):
    from townsquare.plugins.report.health_section import health_section

    store = EventStore(tmp_path / "events.sqlite")
    rows = [(0, "a1", purpose, "local", "m", status, 1, 1, 1.0, 0.0, None, None, mode) for purpose, mode, status in
            [("like", "logprob", "ok"), ("plan", "grammar", "ok"), ("topics", "prompt", "ok"), ("topics.repair", "prompt", "ok"),
             ("topics", "prompt", "parse_failure")]]
    store.write_now("llm_calls", rows)
    store.close()
    page = health_section(sqlite3.connect(tmp_path / "events.sqlite"))
    assert "1 fell back to a default" in page and "<td>topics</td><td>prompt</td>" in page.replace("\n", "")
    cells = re.sub(r"<td[^>]*>", "<td>", page.replace("\n", ""))
    assert "<td>like</td><td>logprob</td><td>1</td><td>0</td><td>0</td><td>0</td>" in cells
    assert "<td>topics</td><td>prompt</td><td>0</td><td>0</td><td>0</td><td>1</td>" in cells
    empty = EventStore(tmp_path / "empty.sqlite")
    empty.close()
    assert health_section(sqlite3.connect(tmp_path / "empty.sqlite")) is None
