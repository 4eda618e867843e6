"""Each backend's constraint mode, checked on what it sends: the OpenAI dialects against the fault
server (response_format json_schema strict, vLLM's choice, JSON mode, nothing), llama.cpp's
grammar from the declared schema, LangChain's with_structured_output."""

from __future__ import annotations

import asyncio
import json
import types

import numpy as np
import pytest

from townsquare.llm import LLMClient, LLMRequest, Message
from townsquare.llm_answers import AnswerFormat
from townsquare.plugins.llm.openai import OpenAIConfig, OpenAIProvider
from townsquare.testing.fault_server import FaultServer
from townsquare.testing.llm_chain import build_chain, build_context

LABELS = AnswerFormat("like", labels=("like", "no operation"), default="no operation")
PLAN = AnswerFormat("plan", schema={"type": "object", "required": ["day", "note"], "properties": {
    "day": {"type": "integer", "minimum": 1, "maximum": 7}, "note": {"type": "string", "maxLength": 30}}})
OPENINGS = AnswerFormat("comment", prefixes=("no comment", "Comment content:"), default="no comment")
PROMPT = "You are Ada. Post: the mountains were lovely today. Would you like it?"


@pytest.fixture(scope="module")
def server():
    with FaultServer() as running:
        yield running


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def ask_openai(server, structured: str, answer: AnswerFormat, **config):
    provider = OpenAIProvider(OpenAIConfig(base_url=server.base_url, model="m", structured=structured, **config), build_context())
    chain = build_chain(provider)

    async def go():
        try:
            return await chain.client.ask(PROMPT, answer, validate=None)
        finally:
            await provider.aclose()

    result = asyncio.run(go())
    return result, server.recent[-1], chain.records


def test_openai_json_schema_strict(server):
    result, body, records = ask_openai(server, "json_schema", PLAN)
    assert body["response_format"]["type"] == "json_schema"
    sent = body["response_format"]["json_schema"]
    assert sent["name"] == "plan" and sent["strict"] is True
    schema = sent["schema"]
    assert schema["additionalProperties"] is False and schema["required"] == ["day", "note"]
    assert schema["properties"]["day"] == {"type": "integer", "enum": [1, 2, 3, 4, 5, 6, 7]}  # the range, portably
    assert schema["properties"]["note"] == {"type": "string"}  # maxLength is not portable
    assert (result.outcome, result.mode) == ("constrained", "json_schema") and result.value["day"] in range(1, 8)
    assert [r.mode for r in records] == ["json_schema"]
    _, body, _ = ask_openai(server, "json_schema", PLAN, strict_keywords="all")
    assert body["response_format"]["json_schema"]["schema"]["properties"]["note"] == {"type": "string", "maxLength": 30}


def test_openai_json_schema_labels_are_wrapped_and_unwrapped(server):
    result, body, _ = ask_openai(server, "json_schema", LABELS, label_max_tokens=5)
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"]["enum"] == ["like", "no operation"] and schema["required"] == ["answer"]
    assert body["max_tokens"] == 5 + 16  # room for the wrapper
    assert result.value in LABELS.labels and result.text in LABELS.labels and result.outcome == "constrained"


@pytest.mark.parametrize("structured, field", [("vllm", "structured_outputs"), ("vllm_guided", "guided_choice")])
def test_vllm_guided_choice(server, structured, field):
    result, body, _ = ask_openai(server, structured, LABELS)
    choice = body[field]["choice"] if field == "structured_outputs" else body[field]
    assert choice == ["like", "no operation"] and "response_format" not in body
    assert (result.mode, result.outcome) == ("guided_choice", "constrained") and result.value in LABELS.labels
    result, body, _ = ask_openai(server, structured, PLAN)  # JSON: the schema, as everywhere
    assert body["response_format"]["type"] == "json_schema" and result.mode == "json_schema"


def test_json_mode_and_off_parse_and_repair(server):
    result, body, _ = ask_openai(server, "json_object", PLAN)
    assert body["response_format"] == {"type": "json_object"} and result.mode == "json_object"
    assert result.outcome in ("parsed", "repaired", "fallback")  # JSON mode promises syntax, not the schema
    result, body, records = ask_openai(server, "off", LABELS)
    assert "response_format" not in body and "guided_choice" not in body and "structured_outputs" not in body
    assert result.mode == "prompt" and {r.mode for r in records} == {"prompt"}
    result, body, _ = ask_openai(server, "json_schema", OPENINGS)  # openings: asked for in the prompt everywhere
    assert "response_format" not in body and result.mode == "prompt"


# --------------------------------------------------------------------------- llama.cpp


class FakeLlama:
    """Just enough of llama_cpp.Llama for a JSON request: tokens are words, the answer canned."""

    reply = '{"day": 3, "note": "hi"}'

    def __init__(self, **kwargs):
        self.n_tokens, self.input_ids, self.ctx, self.metadata = 0, np.zeros(0, dtype=int), None, {}
        self.completions: list[dict] = []

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False):
        return ([1] if add_bos else []) + [2] * len(data.split())

    def reset(self):
        self.n_tokens = 0

    def eval(self, tokens):
        self.n_tokens += len(tokens)

    def create_completion(self, tokens, **kwargs):
        self.completions.append(kwargs)
        return {"choices": [{"text": self.reply, "finish_reason": "stop"}], "usage": {"prompt_tokens": len(tokens), "completion_tokens": 9}}

    def close(self):
        pass


def test_llama_cpp_grammar_is_built_from_the_declared_schema():
    llama_cpp = pytest.importorskip("llama_cpp")
    from townsquare.plugins.llm.local import LocalLLM, LocalLLMConfig

    schemas = []

    class Grammar:
        @staticmethod
        def from_json_schema(text, verbose=False):
            schemas.append(json.loads(text))
            return llama_cpp.LlamaGrammar.from_json_schema(text, verbose=False)

    module = types.SimpleNamespace(Llama=FakeLlama, LlamaGrammar=Grammar, llama_get_memory=lambda ctx: None,
                                   llama_memory_seq_rm=lambda *a: False)
    provider = LocalLLM(LocalLLMConfig(prompt_style="completion"), __import__("pathlib").Path("fake.gguf"), 1, module)
    provider._render = None
    assert provider.describe()["structured"] == {"labels": ["logprob"], "prefixes": ["logprob"], "json": ["grammar"]}
    llm = LLMClient(provider.complete, model=provider.model)
    result = asyncio.run(llm.ask("Plan your week.", PLAN))
    assert (result.value, result.outcome, result.mode) == ({"day": 3, "note": "hi"}, "constrained", "grammar")
    (schema,) = schemas
    assert schema["properties"]["day"] == {"type": "integer", "enum": list(range(1, 8))}  # the grammar holds the range
    assert schema["properties"]["note"]["maxLength"] == 30 and schema["additionalProperties"] is False
    (completion,) = provider._llama.completions
    grammar = completion["grammar"]
    assert isinstance(grammar, llama_cpp.LlamaGrammar) and '"7"' in grammar._grammar and completion["stop"] is None
    # free text is never held to a grammar; a request in prompt mode is not either
    asyncio.run(llm.text("Write a post."))
    asyncio.run(provider.complete(LLMRequest(messages=(Message("user", "x"),), json_schema=PLAN.schema, mode="prompt")))
    assert [c["grammar"] is None for c in provider._llama.completions[1:]] == [True, True]


# --------------------------------------------------------------------------- LangChain


def make_structured_fake():
    pytest.importorskip("langchain_core")
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    seen: list = []

    class StructuredFake(FakeListChatModel):
        """A fake chat model that has with_structured_output: it records the schema and answers
        with a value of it."""

        def with_structured_output(self, schema, *, include_raw=False, **kwargs):
            seen.append((schema, include_raw))
            enum = schema["properties"].get("answer", {}).get("enum")
            parsed = {"answer": enum[-1]} if enum else {"day": 5, "note": "ok"}
            raw = AIMessage(content="", usage_metadata={"input_tokens": 12, "output_tokens": 4, "total_tokens": 16})
            return RunnableLambda(lambda messages: {"raw": raw, "parsed": parsed, "parsing_error": None})

    return StructuredFake, seen


def test_langchain_with_structured_output():
    from townsquare.plugins.llm.langchain import LangChainLLM, has_structured_output

    fake, seen = make_structured_fake()
    model = fake(responses=["free text"])
    assert has_structured_output(model)
    provider = LangChainLLM(model, "fake", ["temperature"], structured=True)
    llm = LLMClient(provider.complete, model="fake")
    plan = asyncio.run(llm.ask("Plan your week.", PLAN))
    assert (plan.value, plan.mode, plan.outcome) == ({"day": 5, "note": "ok"}, "structured_output", "constrained")
    like = asyncio.run(llm.ask(PROMPT, LABELS))
    assert (like.value, like.mode) == ("no operation", "structured_output")
    (plan_schema, raw), (label_schema, _) = seen
    assert raw is True and plan_schema["additionalProperties"] is False and plan_schema["properties"]["day"]["enum"][0] == 1
    assert label_schema["properties"]["answer"]["enum"] == ["like", "no operation"]
    assert asyncio.run(llm.text("Write a post.")) == "free text"  # text is never structured
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    assert not has_structured_output(FakeListChatModel(responses=["x"]))
    plain = LangChainLLM(FakeListChatModel(responses=["like"]), "plain", [], structured=False)
    assert asyncio.run(LLMClient(plain.complete, model="plain").ask(PROMPT, LABELS)).mode == "prompt"


class FaultyLlama(FakeLlama):
    """llama.cpp failing as it does: 1 call in 10 a decode error, 1 in 10 a JSON answer cut off
    at the token limit (``finish_reason = "length"``); the rest answer under the grammar."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.draws = np.random.default_rng(4)
        self.faults = 0

    def create_completion(self, tokens, **kwargs):
        draw = self.draws.random()
        if draw < 0.1:
            self.faults += 1
            raise RuntimeError("llama_decode returned -3")
        if draw < 0.2:
            self.faults += 1
            self.completions.append(kwargs)
            return {"choices": [{"text": '{"day": 3, "no', "finish_reason": "length"}], "usage": {"prompt_tokens": len(tokens), "completion_tokens": 9}}
        return super().create_completion(tokens, **kwargs)


def test_llama_cpp_grammar_under_20_percent_faults_every_answer_comes_back():
    pytest.importorskip("llama_cpp")
    from townsquare.plugins.llm.llm_retry import LLMRetry, RetryConfig
    from townsquare.plugins.llm.local import LocalLLM, LocalLLMConfig

    module = types.SimpleNamespace(Llama=FaultyLlama, LlamaGrammar=__import__("llama_cpp").LlamaGrammar,
                                   llama_get_memory=lambda ctx: None, llama_memory_seq_rm=lambda *a: False)
    provider = LocalLLM(LocalLLMConfig(prompt_style="completion"), __import__("pathlib").Path("fake.gguf"), 1, module)
    provider._render = None
    chain = build_chain(provider, [LLMRetry(RetryConfig(attempts=10, base_delay_s=0), build_context())])

    async def many():
        return [await chain.client.ask(f"Plan week {i}.", PLAN) for i in range(40)]

    answers = asyncio.run(many())
    assert provider._llama.faults >= 4  # about 20 % of the calls failed
    assert all((a.value, a.outcome, a.mode) == ({"day": 3, "note": "hi"}, "constrained", "grammar") for a in answers)
    statuses = chain.statuses()
    assert statuses.count("ok") == 40 and statuses.count("error") == provider._llama.faults


def test_wrapped_labels_are_read_as_parsing_reads_them():
    """``unwrap_label`` looks the wrapper objects servers write up before parsing anything; its
    answer is the parse's for those spellings and for every other text."""
    from townsquare.plugins.llm.strict_schema import unwrap_label

    def parsed(text, labels):
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            return None
        answer = value.get("answer") if isinstance(value, dict) else None
        return answer if isinstance(answer, str) and answer in labels else None

    labels = ("like", "no operation", "ça va", 'say "hi"')
    texts = [json.dumps({"answer": label}, ensure_ascii=a, separators=s) for label in labels + ("other",)
             for a in (True, False) for s in ((",", ":"), (", ", ": "))]
    texts += ['{"answer":"like" }', '{ "answer": "like"}', '{"answer": "like", "x": 1}', "like", "", "[]", "null", '{"answer": 3}']
    for text in texts:
        assert unwrap_label(text, labels) == parsed(text, labels), text


def test_a_label_decisions_format_is_made_once_and_is_what_the_plain_construction_makes():
    from townsquare.plugins.llm.openai import label_format
    from townsquare.plugins.llm.strict_schema import label_schema, schema_name

    made = label_format(("like", "no operation"), "like.repair")
    assert made == {"type": "json_schema", "json_schema": {"name": schema_name("like.repair"), "strict": True,
                                                           "schema": label_schema(["like", "no operation"])}}
    assert label_format(("like", "no operation"), "like.repair") is made
