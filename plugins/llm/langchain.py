"""Any LangChain chat model as the run's LLM: ``[llm] name = "langchain"``.

The model is a ``langchain_core.language_models.BaseChatModel`` subclass named by import path
and built with keyword arguments::

    [llm]
    name = "langchain"
    class_path = "langchain_anthropic:ChatAnthropic"     # or "langchain_anthropic.ChatAnthropic"
    kwargs = { model = "claude-3-5-haiku-latest", max_retries = 0 }
    api_key_env = "ANTHROPIC_API_KEY"                     # passed as kwargs["api_key"]

Install with ``pip install -e ".[langchain]"`` (langchain-core) plus the package that provides
the class (``langchain-openai``, ``langchain-anthropic``, ``langchain-ollama``...).

Messages become ``SystemMessage``/``HumanMessage``/``AIMessage``; the answer is
``await model.ainvoke(messages, **params)`` where ``params`` carries the request's
``temperature`` and ``max_tokens`` (``request_params``; set it to ``[]`` for a model that
rejects them, and put fixed values in ``kwargs``). Token counts come from the reply's
``usage_metadata`` (LangChain's standard field), else from the provider's
``response_metadata["token_usage"]``; a model that reports neither records 0.

A chat model that cannot read its server's reply often fails with a plain ``IndexError`` or
``KeyError`` (langchain-openai on a reply with no choices: ``generations[0][0]``); raised inside
the model's package, such an error is the answer's fault (``bad_body``, retried and counted),
not a bug that stops the run (:func:`model_call`).

Retrying is ``llm_retry``'s job: give the model ``max_retries = 0`` in ``kwargs`` where it has
such an option, or failures are retried twice over.

Structured answers (``structured = "auto"``, :mod:`townsquare.llm_modes`): when the class
implements LangChain's ``with_structured_output`` (its own, or through ``bind_tools``), a JSON
request goes through ``model.with_structured_output(schema, include_raw=True)`` with the schema
made strict (:func:`.strict_schema.strict_schema`), and a label decision with the schema
``{"answer": one of the labels}``; mode ``structured_output``. Those calls use the model's own
``temperature`` and token limit (``kwargs``): a structured runnable takes no per-call
parameters. A class without it (or ``structured = "off"``) sees the prompt alone, and the client
parses and repairs the answer.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import LLMFault, LLMProviderSpec, LLMRequest, LLMResponse, UsageError, hookimpl, mode_for
from townsquare.lib.secret_files import resolve_secrets

from .strict_schema import label_schema, strict_schema, unwrap_label

log = structlog.get_logger("townsquare.llm.langchain")

#: errors that a chat model's own reply parsing raises on a malformed reply
_READING_ERRORS = (IndexError, KeyError, TypeError, AttributeError)
_ROOT = Path(__file__).resolve().parents[2]
_OWN_DIRS = tuple(f"{_ROOT / part}/" for part in ("core", "plugins", "platforms", "recommenders"))


async def model_call(call: Any, *args: Any) -> Any:
    """``await call(*args)``, an error of :data:`_READING_ERRORS` raised outside townsquare's
    own code turned into a ``bad_body`` fault (see the module docstring)."""
    try:
        return await call(*args)
    except _READING_ERRORS as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None and tb.tb_frame.f_code.co_filename.startswith(_OWN_DIRS):
            raise
        raise LLMFault("bad_body", f"the chat model could not read its reply ({type(exc).__name__}: {exc})"[:300]) from exc


INSTALL_HINT = 'pip install -e ".[langchain]" plus the package that provides the chat model class'


class LangChainConfig(BaseModel):
    """``[llm]`` settings for ``name = "langchain"`` (or ``[plugins.langchain]``)."""

    model_config = ConfigDict(extra="forbid")
    machinery_settings: ClassVar[frozenset[str]] = frozenset({"api_key_env", "api_key_file", "api_key_kwarg"})

    class_path: str = Field(description='the chat model class: "package.module.Class" or "package.module:Class"')
    kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments for the class")
    model: str = Field("", description="model name for accounting; default: kwargs model / model_name, else the class name")
    #: where an API key lives (never the key itself); it is passed as ``kwargs[api_key_kwarg]``
    api_key_env: str | None = None
    api_key_file: str | None = None
    api_key_kwarg: str = "api_key"
    #: request fields passed to every call as keyword arguments
    request_params: list[str] = Field(default_factory=lambda: ["temperature", "max_tokens"])
    #: "auto": structured answers through with_structured_output where the class has it; "off": never
    structured: Literal["auto", "off"] = "auto"


def import_class(class_path: str) -> type:
    """``"pkg.mod:Class"`` or ``"pkg.mod.Class"`` -> the class; one-line UsageError otherwise."""
    module_name, sep, attr = class_path.partition(":")
    if not sep:
        module_name, _, attr = class_path.rpartition(".")
    if not module_name or not attr:
        raise UsageError(f"llm 'langchain': class_path {class_path!r} is not 'package.module.Class' or 'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"llm 'langchain': cannot import {module_name!r} ({exc}); {INSTALL_HINT}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UsageError(f"llm 'langchain': module {module_name!r} has no {attr!r}") from None


def to_langchain_messages(messages: Any) -> list[Any]:
    """Our :class:`townsquare.llm.Message` tuple as LangChain message objects."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    converted = []
    for message in messages:
        kind = kinds.get(message.role)
        if kind is None:
            raise ValueError(f"message role {message.role!r} is not system, user or assistant")
        converted.append(kind(content=message.content))
    return converted


def reply_usage(reply: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of a chat model's reply, 0 when it reports none."""
    usage = getattr(reply, "usage_metadata", None)
    if usage:
        return int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    token_usage = (getattr(reply, "response_metadata", None) or {}).get("token_usage") or {}
    return int(token_usage.get("prompt_tokens") or 0), int(token_usage.get("completion_tokens") or 0)


def reply_text(reply: Any) -> str:
    """The text of a reply whose content is a string or a list of content blocks."""
    content = getattr(reply, "content", reply)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(block if isinstance(block, str) else str(block.get("text", ""))
                       for block in content if isinstance(block, str) or block.get("type") == "text")
    return str(content)


def has_structured_output(chat_model: Any) -> bool:
    """Whether the model's class implements ``with_structured_output`` (its own, or the base
    class's through ``bind_tools``)."""
    from langchain_core.language_models import BaseChatModel

    cls = type(chat_model)
    return cls.with_structured_output is not BaseChatModel.with_structured_output or cls.bind_tools is not BaseChatModel.bind_tools


class LangChainLLM:
    """A LangChain ``BaseChatModel`` behind the :class:`townsquare.llm.LLMProvider` protocol."""

    name = "langchain"

    def __init__(self, chat_model: Any, model: str, request_params: list[str], structured: bool = False):
        self.chat_model = chat_model
        self.model = model
        self.request_params = request_params
        self.capabilities = {"labels": ["structured_output"], "json": ["structured_output"]} if structured else {}
        self._runnables: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "structured": self.capabilities}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        mode = mode_for(request, self.capabilities)
        if mode == "structured_output":
            return await self._structured(request)
        params = {name: getattr(request, name) for name in self.request_params}
        reply = await model_call(lambda: self.chat_model.ainvoke(to_langchain_messages(request.messages), **params))
        prompt_tokens, completion_tokens = reply_usage(reply)
        metadata = getattr(reply, "response_metadata", None) or {}
        return LLMResponse(
            text=reply_text(reply), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            model=str(metadata.get("model_name") or metadata.get("model") or self.model), provider=self.name,
            meta={"finish_reason": metadata.get("finish_reason") or metadata.get("stop_reason"),
                  **({"mode": mode} if mode is not None else {})},
        )

    async def _structured(self, request: LLMRequest) -> LLMResponse:
        """One answer through ``with_structured_output``: the parsed value as JSON text (a label
        decision: the label), usage from the raw reply."""
        schema = label_schema(request.labels) if request.labels else strict_schema(request.json_schema)
        key = json.dumps(schema, sort_keys=True)
        runnable = self._runnables.get(key)
        if runnable is None:
            runnable = self._runnables[key] = self.chat_model.with_structured_output(schema, include_raw=True)
        result = await model_call(runnable.ainvoke, to_langchain_messages(request.messages))
        raw = result.get("raw") if isinstance(result, dict) else None
        parsed = result.get("parsed") if isinstance(result, dict) else result
        text = json.dumps(parsed, ensure_ascii=False) if parsed is not None else (reply_text(raw) if raw is not None else "")
        if request.labels:
            label = unwrap_label(text, request.labels)
            text = label if label is not None else text
        prompt_tokens, completion_tokens = reply_usage(raw) if raw is not None else (0, 0)
        metadata = getattr(raw, "response_metadata", None) or {}
        return LLMResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                           model=str(metadata.get("model_name") or metadata.get("model") or self.model), provider=self.name,
                           meta={"finish_reason": metadata.get("finish_reason") or metadata.get("stop_reason"),
                                 "mode": "structured_output"})


def build_langchain_llm(config: LangChainConfig, ctx: Any) -> LangChainLLM:
    """Import and build the chat model now, so a wrong path or argument stops the run at start."""
    try:
        from langchain_core.language_models import BaseChatModel
    except ImportError as exc:
        raise UsageError(f"llm 'langchain' needs langchain-core ({exc}): {INSTALL_HINT}") from None
    cls = import_class(config.class_path)
    if not (isinstance(cls, type) and issubclass(cls, BaseChatModel)):
        raise UsageError(f"llm 'langchain': {config.class_path!r} is not a langchain_core BaseChatModel subclass")
    unknown = sorted(set(config.request_params) - {"temperature", "max_tokens"})
    if unknown:
        raise UsageError(f"llm 'langchain': request_params may name temperature and max_tokens, not {', '.join(unknown)}")
    kwargs = dict(config.kwargs)
    keys = resolve_secrets(env=config.api_key_env, file=config.api_key_file, base_dir=getattr(ctx, "base_dir", "."),
                           what=f"llm langchain API key for {config.class_path}")
    if keys:
        kwargs[config.api_key_kwarg] = keys[0]
    try:
        chat_model = cls(**kwargs)
    except Exception as exc:  # pydantic validation of the class's own fields, mostly
        raise UsageError(f"llm 'langchain': {config.class_path}(**kwargs) failed: {_one_line(exc, keys)}") from None
    model = config.model or str(config.kwargs.get("model") or config.kwargs.get("model_name") or cls.__name__)
    structured = config.structured == "auto" and has_structured_output(chat_model)
    log.info("llm.langchain.ready", class_path=config.class_path, model=model, structured=structured)
    return LangChainLLM(chat_model, model, list(config.request_params), structured)


def _one_line(exc: Exception, secrets: list[str]) -> str:
    """An exception as one line, naming the field for a validation error, with no secret in it
    (pydantic's messages quote the input value, which may be the key)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            return f"{'.'.join(str(part) for part in first['loc']) or 'arguments'}: {first['msg']}"
        except Exception:
            pass
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


@hookimpl
def townsquare_register_llm_providers():
    return [
        LLMProviderSpec(
            "langchain", build_langchain_llm, config_model=LangChainConfig,
            description="any langchain-core chat model by class path; pip install 'townsquare[langchain]'",
        )
    ]
