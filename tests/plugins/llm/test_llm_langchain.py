"""The LangChain provider, with langchain-core's own fake chat models."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest

from townsquare.errors import UsageError
from townsquare.llm import LLMClient, LLMRequest, Message
from townsquare.plugins.llm.langchain import LangChainConfig, build_langchain_llm, import_class, reply_text, reply_usage

pytest.importorskip("langchain_core", reason="needs the [langchain] extra (langchain-core)")

FAKES = "langchain_core.language_models.fake_chat_models"
CTX = types.SimpleNamespace(base_dir=".", seed=0)

CONVERSATION = (
    Message("system", "You are Ana, who hikes."),
    Message("user", "Like or skip: 'Mont Blanc at dawn'?"),
    Message("assistant", "Probably like"),
    Message("user", "Answer with exactly one of: like, skip."),
)


def build(class_path: str, **kwargs):
    return build_langchain_llm(LangChainConfig(class_path=class_path, **kwargs), CTX)


def test_fake_list_model_answers_and_names_itself():
    provider = build(f"{FAKES}.FakeListChatModel", kwargs={"responses": ["like", "a post about trails"]})
    assert provider.name == "langchain" and provider.model == "FakeListChatModel"
    first = asyncio.run(provider.complete(LLMRequest(messages=CONVERSATION, labels=("like", "skip"))))
    second = asyncio.run(provider.complete(LLMRequest(messages=CONVERSATION[:2])))
    assert (first.text, second.text) == ("like", "a post about trails")
    assert first.provider == "langchain" and first.prompt_tokens == 0  # this fake reports no usage


def test_messages_are_converted_role_by_role():
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    seen = []

    class Recorder:
        async def ainvoke(self, messages, **params):
            seen.append((messages, params))
            return AIMessage(content="skip")

    provider = build(f"{FAKES}:FakeListChatModel", kwargs={"responses": ["x"]})
    provider.chat_model = Recorder()
    asyncio.run(provider.complete(LLMRequest(messages=CONVERSATION, temperature=0.2, max_tokens=9)))
    messages, params = seen[0]
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert [m.content for m in messages] == [m.content for m in CONVERSATION]
    assert params == {"temperature": 0.2, "max_tokens": 9}
    provider.request_params = []
    asyncio.run(provider.complete(LLMRequest(messages=CONVERSATION)))
    assert seen[1][1] == {}


def test_parrot_model_sees_the_last_message():
    provider = build(f"{FAKES}:ParrotFakeChatModel")
    response = asyncio.run(provider.complete(LLMRequest(messages=CONVERSATION)))
    assert response.text == "Answer with exactly one of: like, skip."


def test_usage_comes_from_usage_metadata():
    from langchain_core.messages import AIMessage

    reply = AIMessage(content="like", usage_metadata={"input_tokens": 31, "output_tokens": 2, "total_tokens": 33},
                      response_metadata={"model_name": "fake-1", "finish_reason": "stop"})
    provider = build(f"{FAKES}:FakeMessagesListChatModel", kwargs={"responses": [reply]})
    response = asyncio.run(provider.complete(LLMRequest(messages=CONVERSATION)))
    assert (response.text, response.prompt_tokens, response.completion_tokens) == ("like", 31, 2)
    assert response.model == "fake-1" and response.meta["finish_reason"] == "stop"


def test_usage_and_text_fallbacks():
    from langchain_core.messages import AIMessage

    legacy = AIMessage(content=[{"type": "text", "text": "like"}, {"type": "tool_use", "id": "t"}, " it"],
                       response_metadata={"token_usage": {"prompt_tokens": 5, "completion_tokens": 1}})
    assert reply_text(legacy) == "like it" and reply_usage(legacy) == (5, 1)
    assert reply_usage(AIMessage(content="x")) == (0, 0)


def test_works_behind_the_client():
    provider = build(f"{FAKES}.FakeListChatModel", kwargs={"responses": ["Skip.", '{"score": 3}']})
    client = LLMClient(provider.complete, model=provider.model)
    assert asyncio.run(client.choose("Like or skip?", ["like", "skip"], purpose="like", default="like")) == "skip"
    assert asyncio.run(client.json("Score it", {"type": "object"}, purpose="score", default=None)) == {"score": 3}


def test_model_name_from_kwargs():
    provider = build(f"{FAKES}.FakeListChatModel", kwargs={"responses": ["x"]}, model="my-model")
    assert provider.model == "my-model"


def test_api_key_is_resolved_and_passed(monkeypatch, tmp_path):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    class Keyed(FakeListChatModel):
        api_key: str = ""

    module = types.ModuleType("keyed_models")
    module.Keyed = Keyed
    monkeypatch.setitem(sys.modules, "keyed_models", module)
    monkeypatch.setenv("FAKE_LC_KEY", "sk-secret-1")
    provider = build("keyed_models:Keyed", kwargs={"responses": ["x"]}, api_key_env="FAKE_LC_KEY")
    assert provider.chat_model.api_key == "sk-secret-1"
    (tmp_path / "keys.txt").write_text("# comment\nsk-from-file\n")
    provider = build_langchain_llm(LangChainConfig(class_path="keyed_models:Keyed", kwargs={"responses": ["x"]},
                                                   api_key_file="keys.txt"), types.SimpleNamespace(base_dir=str(tmp_path)))
    assert provider.chat_model.api_key == "sk-from-file"
    monkeypatch.delenv("FAKE_LC_KEY")
    with pytest.raises(UsageError, match="FAKE_LC_KEY is not set"):
        build("keyed_models:Keyed", kwargs={"responses": ["x"]}, api_key_env="FAKE_LC_KEY")


@pytest.mark.parametrize("class_path, problem", [
    ("no_such_package_xyz.ChatThing", "cannot import 'no_such_package_xyz'"),
    (f"{FAKES}:NoSuchModel", "has no 'NoSuchModel'"),
    ("ChatOpenAI", "is not 'package.module.Class'"),
    ("langchain_core.messages:AIMessage", "is not a langchain_core BaseChatModel subclass"),
])
def test_bad_class_paths_are_one_line(class_path, problem):
    with pytest.raises(UsageError) as info:
        build(class_path)
    assert problem in str(info.value) and "\n" not in str(info.value)


def test_bad_kwargs_name_the_field_but_not_the_key(monkeypatch):
    monkeypatch.setenv("FAKE_LC_KEY", "sk-do-not-print")
    with pytest.raises(UsageError) as info:
        build(f"{FAKES}:FakeListChatModel", kwargs={"responses": 5}, api_key_env="FAKE_LC_KEY", api_key_kwarg="responses")
    message = str(info.value)
    assert "responses" in message and "sk-do-not-print" not in message and "\n" not in message
    with pytest.raises(UsageError, match="request_params"):
        build(f"{FAKES}:FakeListChatModel", kwargs={"responses": ["x"]}, request_params=["top_p"])


def test_import_class_accepts_both_spellings():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    assert import_class(f"{FAKES}:FakeListChatModel") is FakeListChatModel
    assert import_class(f"{FAKES}.FakeListChatModel") is FakeListChatModel


def test_missing_langchain_core_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core.language_models", None)
    with pytest.raises(UsageError, match=r'needs langchain-core.*pip install -e "\.\[langchain\]"'):
        build(f"{FAKES}.FakeListChatModel")


def test_registered(make_plugins):
    spec = make_plugins().registry.get("llm", "langchain")
    assert spec.plugin == "langchain" and spec.config_model is LangChainConfig and spec.priority == 0


def test_a_model_that_cannot_read_its_reply_is_a_bad_body_fault():
    from townsquare.llm_faults import LLMFault

    class NoChoices:  # langchain-openai on a reply without choices: generations[0][0]
        async def ainvoke(self, messages, **params):
            return [][0]

    provider = build(f"{FAKES}:FakeListChatModel", kwargs={"responses": ["x"]})
    provider.chat_model = NoChoices()
    with pytest.raises(LLMFault) as info:
        asyncio.run(provider.complete(LLMRequest(messages=CONVERSATION)))
    assert info.value.kind == "bad_body" and "IndexError" in str(info.value)
