"""The oracle test model: rules chosen by purpose, answers shaped to the request, prompt only."""

from __future__ import annotations

import asyncio
import json

import pytest

from townsquare.llm import LLMRequest, Message
from townsquare.testing.oracle import OracleLLM
from townsquare.testing.oracle.prompt_view import PromptView
from townsquare.testing.oracle.rules import RuleBook, shape


def ask(**fields) -> str:
    request = LLMRequest(messages=(Message("user", fields.pop("prompt", "Hello")),), **fields)
    return asyncio.run(OracleLLM().complete(request)).text


def test_generic_rules_do_the_least():
    assert ask(labels=("like", "skip"), purpose="like") == "skip"
    assert ask(labels=("follow", "pass"), purpose="follow") == "follow"  # no "nothing" label: the first
    assert ask(answer_prefixes=("no comment", "Comment content:"), purpose="comment") == "no comment"
    schema = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1}, "items": {"type": "array", "minItems": 2, "items": {"type": "string"}}}}
    assert json.loads(ask(json_schema=schema, purpose="x")) == {"score": 1, "items": ["", ""]}
    assert ask(prompt="\n  Write a post about tea.\nMore.", purpose="post") == "Write a post about tea."


def test_most_specific_rule_wins_and_none_falls_through():
    book = RuleBook()
    book.add({"*": lambda v: "star", "plan.": lambda v: "prefix", "plan.day": lambda v: None})
    assert book.answer(PromptView(purpose="plan.day", text="", last="")) == "prefix"  # exact rule had no opinion
    assert book.answer(PromptView(purpose="plan.hourly", text="", last="")) == "prefix"
    assert book.answer(PromptView(purpose="planet", text="", last="")) == "star"


def test_repair_requests_are_answered_as_the_original_purpose():
    view = PromptView.of(LLMRequest(messages=(Message("user", "q"),), purpose="importance.repair"))
    assert view.purpose == "importance"


def test_shape_refuses_a_label_outside_the_set():
    with pytest.raises(ValueError, match="none of"):
        shape(PromptView(purpose="like", text="", last="", labels=("like", "skip")), "reblog")


def test_prompt_view_reads_sections():
    view = PromptView.of(LLMRequest(messages=(Message("system", "You are Maria."), Message("user", "Memories:\n- a party at 5 pm\n- tea\n\nQuestion: plan?")), purpose="plan"))
    assert view.section("Memories") == "- a party at 5 pm\n- tea"
    assert view.mentions("party") and not view.mentions("par")
    assert view.find_all(r"at (\d+ pm)") == ["5 pm"]
