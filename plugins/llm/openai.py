"""OpenAI-compatible chat endpoints (OpenAI, vLLM, Ollama, llama.cpp server):
``[llm] name = "openai"``.

Several endpoints and several API keys are used round-robin: the main endpoint (``base_url``,
else ``$OPENAI_BASE_URL``, else the SDK's default) with the keys of ``api_key_file`` (one key
per line) or else ``api_key_env``, plus every ``endpoints`` entry with its own keys; each
(endpoint, key) pair is one route. Keys are read through :func:`townsquare.lib.secret_files.resolve_secrets`
and never logged. ``api_key_env = ""`` with no file serves endpoints that take no key.

``transport`` picks how requests travel (:mod:`townsquare.plugins.llm.openai_transport`):
``"aiohttp"`` (default; proxies honoured), ``"http"`` (a bare HTTP/1.1 client: the least CPU
per call, no proxies) or ``"sdk"`` (the ``openai`` SDK's ``client.post``); failures are
classified the same on each. Retries are ``llm_retry``'s job, so the SDK's own are off
(``max_retries=0``). The connection pools hold as many connections as the run has concurrent
calls (``engine.concurrency``, or ``[plugins.llm_concurrency] limit`` if larger), one pool per
route (the SDK's split into pools of at most
:data:`~townsquare.plugins.llm.openai_transport.POOL_SIZE`).

Every answer is checked before it is believed: a body that is not a JSON object with a
non-empty ``choices`` list (an HTML page served with status 200, say) is a ``bad_body`` fault,
an empty ``choices`` an ``empty`` one, a null ``content`` a ``null_content`` one (see
:mod:`townsquare.llm_faults`); the transport's errors are classified by the kernel's accounting.

With ``transport = "sdk"`` requests go through the SDK's generic ``client.post`` (its
documented way to send a raw body) rather than ``chat.completions.create``, which spends about
a millisecond per call converting the typed parameters.

Structured answers (``structured``, :mod:`townsquare.llm_modes`): which constraint the server
is asked to enforce, by its dialect.

* ``"json_schema"`` (the default: OpenAI, vLLM, Ollama 0.5+, llama.cpp's server, SGLang): a
  JSON request carries ``response_format = {"type": "json_schema", "json_schema": {"name",
  "strict": true, "schema"}}`` with the schema made strict (every property required, no
  other allowed; :func:`.strict_schema.strict_schema`); a label decision the schema
  ``{"answer": one of the labels}``, and the provider answers the label inside. Ollama turns
  the schema into its ``format`` constraint. ``strict_keywords = "portable"`` (default) sends
  only the keywords every such server accepts (types, enums, required); ``"all"`` also sends
  ranges, lengths and patterns.
* ``"vllm"``: as ``json_schema``, but a label decision is vLLM's choice constraint
  (``structured_outputs = {"choice": labels}``, vLLM 0.12+); ``"vllm_guided"`` sends the older
  ``guided_choice`` field instead.
* ``"json_object"``: JSON mode (any JSON object: parsed, and repaired where it does not fit),
  labels asked for in the prompt.
* ``"off"``: nothing; every format is asked for in the prompt and the answer parsed.

Answer openings (Zhou's comment: "no comment" / "Comment content: ...") are asked for in the
prompt with every dialect.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
from typing import Any, ClassVar, Literal

import structlog
from pydantic import Field

from townsquare.api import LLMFault, LLMProviderSpec, LLMRequest, LLMResponse, UsageError, hookimpl, mode_for
from townsquare.lib.endpoint import EndpointConfig

from .openai_http import HTTPPool
from .openai_transport import POOL_SIZE, AiohttpPool, SDKPool
from .strict_schema import label_schema, schema_name, strict_schema, unwrap_label

#: per dialect: kind of request -> the mode the server enforces (:mod:`townsquare.llm_modes`)
DIALECTS: dict[str, dict[str, list[str]]] = {
    "json_schema": {"labels": ["json_schema"], "json": ["json_schema"]},
    "vllm": {"labels": ["guided_choice"], "json": ["json_schema"]},
    "vllm_guided": {"labels": ["guided_choice"], "json": ["json_schema"]},
    "json_object": {"json": ["json_object"]},
    "off": {},
}

log = structlog.get_logger("townsquare.plugins.llm.openai")

_UNKNOWN: Any = object()


@functools.lru_cache(maxsize=256)
def label_format(labels: tuple[str, ...], purpose: str) -> dict[str, Any]:
    """The ``response_format`` of a label decision: ``{"answer": one of the labels}``, strict."""
    return {"type": "json_schema", "json_schema": {"name": schema_name(purpose), "strict": True, "schema": label_schema(labels)}}


class Endpoint(EndpointConfig):
    """One more OpenAI-compatible server, with where its keys live."""

    base_url: str


class OpenAIConfig(EndpointConfig):
    """``[llm]`` settings for ``name = "openai"`` (or ``[plugins.openai]``); the endpoint and its
    keys as :class:`townsquare.api.EndpointConfig` says."""

    machinery_settings: ClassVar[frozenset[str]] = EndpointConfig.machinery_settings | {
        "endpoints", "timeout_s", "transport", "max_tokens_param", "price_prompt_per_1k", "price_completion_per_1k",
        "price_cached_prompt_per_1k"}
    model: str = "gpt-4o-mini"
    endpoints: list[Endpoint] = Field(default_factory=list)
    timeout_s: float = Field(60.0, gt=0)
    #: how requests travel: "aiohttp" (the default; proxies honoured), "http" (a bare HTTP/1.1
    #: client, the least CPU per call, no proxies: for thousands of calls a second to an
    #: endpoint reached directly, a vLLM cluster) or "sdk" (the openai SDK's client)
    transport: Literal["http", "aiohttp", "sdk"] = "aiohttp"
    #: overrides every request's temperature when set
    temperature: float | None = Field(None, ge=0, le=2)
    #: completion-token cap for label decisions (like/skip...)
    label_max_tokens: int = Field(16, gt=0)
    #: which constraint the server enforces for structured answers (see the module's doc)
    structured: Literal["json_schema", "vllm", "vllm_guided", "json_object", "off"] = "json_schema"
    #: "portable": send only the schema keywords every strict-schema server accepts; "all": every one
    strict_keywords: Literal["portable", "all"] = "portable"
    #: newer OpenAI models take ``max_completion_tokens`` instead of ``max_tokens``
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    #: prices in currency units per 1,000 tokens (0: not priced)
    price_prompt_per_1k: float = Field(0.0, ge=0)
    price_completion_per_1k: float = Field(0.0, ge=0)
    #: price per 1,000 prompt tokens served from the provider's prefix cache: what the estimate
    #: and the report say a cacheable prefix saves (None: half of ``price_prompt_per_1k``,
    #: :data:`townsquare.api.DEFAULT_CACHED_PRICE_RATIO`); calls are charged uncached
    price_cached_prompt_per_1k: float | None = Field(None, ge=0)


class OpenAIProvider:
    """Chat completions from OpenAI-compatible endpoints."""

    name = "openai"

    def __init__(self, config: OpenAIConfig, ctx: Any):
        self.config = config
        self.model = config.model
        routes = _routes(config, getattr(ctx, "base_dir", "."))
        self._pools = open_pools(config.transport, routes, connection_budget(getattr(ctx, "scenario", None)),
                                 config.timeout_s)
        urls = sorted({p.url for p in self._pools})
        #: where the calls go, for messages that cannot say which route failed
        self.endpoint = urls[0] if len(urls) == 1 else f"{urls[0]} (and {len(urls) - 1} more endpoints)"
        self._turn = itertools.count()
        #: each request shape's mode (:func:`townsquare.api.mode_for`), chosen on its first call
        self._modes: dict[tuple, str | None] = {}
        self._routes = len(routes)
        self._by_route = [[p for p in self._pools if p.route == route] for route in range(len(routes))]
        log.info("llm.openai.ready", model=self.model, transport=config.transport,
                 endpoints=sorted({url or "default" for url, _ in routes}), routes=len(routes), pools=len(self._pools))

    def _pick(self) -> _Pool:
        """Routes in turn; within a route the pool with the fewest calls in flight."""
        pools = self._by_route[next(self._turn) % self._routes]
        return pools[0] if len(pools) == 1 else min(pools, key=lambda p: p.load)

    def describe(self) -> dict[str, Any]:
        """The modes this endpoint is asked to enforce (``structured``)."""
        return {"name": self.name, "model": self.model, "structured": DIALECTS[self.config.structured]}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        config = self.config
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature if config.temperature is None else config.temperature,
            config.max_tokens_param: min(request.max_tokens, config.label_max_tokens) if request.labels else request.max_tokens,
        }
        # the mode depends on the request's kind and the mode it asks for: chosen once per shape
        shape = (bool(request.labels), bool(request.answer_prefixes), request.json_schema is not None, request.mode)
        mode = self._modes.get(shape, _UNKNOWN)
        if mode is _UNKNOWN:
            mode = self._modes[shape] = mode_for(request, DIALECTS[config.structured])
        self.constrain(body, request, mode)
        pool = self._pick()
        pool.load += 1
        try:
            data = await pool.send(body)
        finally:
            pool.load -= 1
        response = self.read_answer(data, pool.url)
        if mode is not None:
            response.meta["mode"] = mode
            if request.labels and mode == "json_schema":  # the label inside {"answer": ...}
                label = unwrap_label(response.text, request.labels)
                response.text = label if label is not None else response.text
        return response

    def constrain(self, body: dict[str, Any], request: LLMRequest, mode: str | None) -> None:
        """Add the constraint of ``mode`` to a request ``body``."""
        portable = self.config.strict_keywords == "portable"
        if mode == "json_schema":
            if request.labels:  # made once per label set and purpose (a body is only read)
                body["response_format"] = label_format(tuple(request.labels), request.purpose)
                body[self.config.max_tokens_param] += 16  # the label's wrapper takes tokens of its own
            else:
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": schema_name(request.purpose), "strict": True,
                    "schema": strict_schema(request.json_schema, portable=portable)}}
        elif mode == "guided_choice":
            if self.config.structured == "vllm_guided":
                body["guided_choice"] = list(request.labels or ())
            else:
                body["structured_outputs"] = {"choice": list(request.labels or ())}
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}

    def read_answer(self, data: Any, url: str) -> LLMResponse:
        """The answer in a decoded body, or an :class:`LLMFault` saying what is wrong with it."""
        if not isinstance(data, dict) or not isinstance(data.get("choices", []), list):
            raise LLMFault("bad_body", f"not a chat completion: {str(data)[:80]!r}", status=200, endpoint=url)
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        try:
            prompt_tokens, completion_tokens = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        except (TypeError, ValueError):
            prompt_tokens = completion_tokens = 0
        response = LLMResponse(text="", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                               model=str(data.get("model") or self.model), provider=self.name)
        choices = data.get("choices")
        if not choices:
            raise LLMFault("empty", "the answer has no choices", status=200, endpoint=url, response=response)
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(part.get("text") or "" for part in content if isinstance(part, dict)) or None
        if content is None:
            raise LLMFault("null_content", "the answer's content is null", status=200, endpoint=url, response=response)
        if not isinstance(content, str):
            raise LLMFault("bad_body", f"the answer's content is a {type(content).__name__}", status=200, endpoint=url,
                           response=response)
        response.text = content
        response.meta = {"finish_reason": choice.get("finish_reason")}
        return response

    def cost(self, response: LLMResponse) -> float:
        """The answer's price from the configured price table (0 when none is set)."""
        return (response.prompt_tokens * self.config.price_prompt_per_1k
                + response.completion_tokens * self.config.price_completion_per_1k) / 1000

    async def aclose(self) -> None:
        for pool in self._pools:  # kept: a later call from another loop reopens them, and they close again
            await pool.aclose()


def _routes(config: OpenAIConfig, base_dir: str) -> list[tuple[str | None, str]]:
    """(base_url, key) for every endpoint and each of its keys."""
    main = Endpoint.model_construct(base_url=config.base_url or os.environ.get("OPENAI_BASE_URL") or None,
                                    api_key_env=config.api_key_env, api_key_file=config.api_key_file)
    routes = []
    for endpoint in [main, *config.endpoints]:
        keys = endpoint.api_keys(base_dir, what=f"llm openai API key for {endpoint.base_url or 'the default endpoint'}")
        routes += [(endpoint.base_url, key) for key in keys or ["no-key"]]
    return routes


def open_pools(transport: str, routes: list[tuple[str | None, str]], connections: int, timeout_s: float) -> list[Any]:
    """The pools for ``routes`` (``(base_url, key)``), sized for ``connections`` calls in flight."""
    per_route = math.ceil(connections / len(routes))
    if transport == "http":
        return [HTTPPool(url or "https://api.openai.com/v1", key, route, per_route + 1, timeout_s)
                for route, (url, key) in enumerate(routes)]
    if transport == "aiohttp":
        try:
            import aiohttp  # noqa: F401 - a missing install is said at start, not at the first call
        except ImportError:
            raise UsageError('[llm] transport = "aiohttp" needs the aiohttp package: pip install aiohttp '
                             '(or set transport = "sdk")') from None
        return [AiohttpPool(url or "https://api.openai.com/v1", key, route, per_route + 1, timeout_s)
                for route, (url, key) in enumerate(routes)]
    import openai  # heavy: imported when a run uses the SDK

    shards = math.ceil(per_route / POOL_SIZE)
    size = math.ceil(per_route / shards) + 1
    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=size, max_keepalive_connections=size)
    return [SDKPool(openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0, timeout=timeout_s,
                                       http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=timeout_s)), route)
            for route, (url, key) in enumerate(routes) for _ in range(shards)]


def connection_budget(scenario: Any) -> int:
    """How many calls a run may have in flight: engine concurrency or the LLM limit, the larger."""
    if scenario is None:
        return 64
    limit = (getattr(scenario, "plugins", None) or {}).get("llm_concurrency", {}).get("limit") or 0
    return max(int(scenario.engine.concurrency), int(limit))


@hookimpl
def townsquare_register_llm_providers():
    return [LLMProviderSpec("openai", OpenAIProvider, config_model=OpenAIConfig, priority=50,
                            description="OpenAI-compatible endpoints (OpenAI, vLLM, Ollama, llama.cpp server)")]
