"""The LLM port: one async interface for chat completion, whatever the backend.

Components never talk to a backend directly. They get an :class:`LLMClient` bound to their
agent and ask it for text (:meth:`LLMClient.text`), for one of a fixed set of labels
(:meth:`LLMClient.choose`) or for JSON (:meth:`LLMClient.json`). The client sends an
:class:`LLMRequest` down a chain of middleware (cache, budget, retries, concurrency limit; see
``townsquare.plugins.llm``) to an :class:`LLMProvider`. The innermost link, :class:`Accounting`,
records every provider call (tokens, latency, status) in the run's ``llm_calls`` table and
fires ``townsquare_on_llm_call``.

Rows are written in the order calls were *issued*, not the order they came back: each call an
agent's client starts gets the agent's next issue number in the round (a repair request and the
retries of a call share its number; the repair is part 1), and every record made while it is
under way carries it (:attr:`LLMCallRecord.issue`). Concurrent calls of one step (three
summaries at once) thus keep their place whatever the latency, so two runs and a replay write
the same ``llm_calls``; the response cache keys each answer by the same place (round, issue,
part), so identical requests in flight together get their recorded answers whatever order
they finish in, and a resumed round asks its calls at the places it asked them before.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
import time
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from json import encoder as json_encoder_module
from typing import Any, Awaitable, Callable, Protocol, Sequence, runtime_checkable

from .llm_answers import AnswerFormat, ParseFailure, extract_json, match_label, match_prefix
from .llm_faults import answer_fault, classify
from .llm_modes import is_constrained, structured_modes
from .prompt_cache import prompt_blocks
from .state import json_encoder


#: ``LLMResponse.meta[KEPT]``: an answer that failed (cut off at the token limit) but was used once
#: the retries were spent; its ``error`` row records it, so a journal or a replay that hands it
#: back records no other
KEPT = "kept"

#: ``json.dumps(payload, sort_keys=True, ensure_ascii=False)`` without a new encoder per call:
#: the same text, so cache keys are unchanged
_KEY_JSON = json_encoder(sort_keys=True, ensure_ascii=False)
#: a JSON string as ``_KEY_JSON`` writes it (``ensure_ascii=False``)
_KEY_STRING = json_encoder_module.encode_basestring
#: where the messages go in a request shape's key text (:func:`_key_frame`)
_MESSAGES_SLOT = "\x00messages\x00"


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user" or "assistant"
    content: str


@dataclass(frozen=True)
class LLMRequest:
    """Everything that determines an answer, plus who asked and why (for accounting).

    ``labels``: the answer must be one of these (a decision). ``json_schema``: the answer must
    be JSON of this shape. ``answer_prefixes``: the answer starts with one of these, and a
    prefix ending in ``:`` goes on in free text (Zhou et al.'s comment decision: ``no comment``
    or ``Comment content: ...``); a model that follows the prompt needs nothing more, a base
    model is held to it by its provider. ``mode`` is how the answer is held to its format
    (:mod:`townsquare.llm_modes`: ``logprob``, ``grammar``, ``json_schema``, ``guided_choice``,
    ``prompt``...), set by the client from the provider's capabilities; None for free text.
    ``purpose`` names the decision (``like``, ``post``, ``plan``...) and, with ``agent_id``, is
    used for accounting only: :meth:`cache_key` leaves both out. ``avoid``: text the answer
    should not copy (a comment answers the post it is under, it does not repeat it); a provider
    that decodes itself lowers the probability of that text's words (the offline model), the
    others leave it to the prompt.
    """

    messages: tuple[Message, ...]
    labels: tuple[str, ...] | None = None
    json_schema: dict[str, Any] | None = None
    answer_prefixes: tuple[str, ...] | None = None
    max_tokens: int = 256
    temperature: float = 0.7
    purpose: str = "text"
    agent_id: str | None = None
    mode: str | None = None
    avoid: str | None = None

    def cache_key(self, model: str) -> str:
        """A stable digest of the request content and the model that answers it: the SHA-256 of
        :meth:`key_payload`'s JSON. The part every request of one shape shares (the model, the
        labels or openings, the limits, the mode) is encoded and hashed once per shape
        (:func:`_key_frame`); a call adds its messages. A JSON request's schema, a dict that
        could change between calls, and a request with text to ``avoid`` (a post, different each
        time) are encoded whole."""
        frame = None if self.json_schema is not None or self.avoid is not None else _key_frame(
            model, self.labels or None, self.answer_prefixes or None, self.max_tokens, self.temperature, self.mode)
        if frame is not None:
            head, tail = frame
            try:
                messages = ", ".join([f"[{_KEY_STRING(m.role)}, {_KEY_STRING(m.content)}]" for m in self.messages])
            except TypeError:  # a message that is not text: the whole payload's JSON says how
                pass
            else:
                digest = head.copy()
                digest.update(f"[{messages}]".encode())
                digest.update(tail)
                return digest.hexdigest()
        return hashlib.sha256(_KEY_JSON(self.key_payload(model)).encode()).hexdigest()

    def key_payload(self, model: str) -> dict[str, Any]:
        """What :meth:`cache_key` digests: everything that determines the answer."""
        payload = {
            "model": model,
            "messages": [[m.role, m.content] for m in self.messages],
            "labels": list(self.labels) if self.labels else None,
            "json_schema": self.json_schema,
            "answer_prefixes": list(self.answer_prefixes) if self.answer_prefixes else None,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.mode is not None:  # the constraint is part of the request: a replay asks for the same
            payload["mode"] = self.mode
        if self.avoid is not None:  # so is the text the answer must not copy
            payload["avoid"] = self.avoid
        return payload


@functools.lru_cache(maxsize=1024, typed=True)
def _key_frame(model: str, labels: tuple[str, ...] | None, prefixes: tuple[str, ...] | None, max_tokens: int,
               temperature: float, mode: str | None) -> tuple[Any, bytes] | None:
    """The key text of a request shape (no JSON schema) around its messages: the SHA-256 of the
    text before them, and the bytes after them. None where the shape's own text holds the
    placeholder (a label that spells it): such requests are keyed whole."""
    payload = LLMRequest((), labels=labels, answer_prefixes=prefixes, max_tokens=max_tokens, temperature=temperature,
                         mode=mode).key_payload(model)
    payload["messages"] = _MESSAGES_SLOT
    text, slot = _KEY_JSON(payload), _KEY_STRING(_MESSAGES_SLOT)
    if text.count(slot) != 1:
        return None
    head, tail = text.split(slot)
    return hashlib.sha256(head.encode()), tail.encode()


@dataclass
class LLMResponse:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    provider: str = ""
    latency_ms: float = 0.0
    cached: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class LLMCallRecord:
    """One row of ``llm_calls``: a provider call, successful or not."""

    round: int
    agent_id: str | None
    purpose: str
    provider: str
    model: str
    status: str  # ok | error | cached | parse_failure
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    cost: float = 0.0
    error: str | None = None
    #: what went wrong: a fault kind of :mod:`townsquare.llm_faults` (``error`` rows) or how an
    #: answer failed to parse (``parse_failure`` rows: ``unparsable``, ``empty``, ``binary``)
    kind: str | None = None
    #: how the answer was held to its format (:mod:`townsquare.llm_modes`); None for free text
    mode: str | None = None
    #: (issue number of the client call it belongs to, 0 for the request, 1 for its repair),
    #: None outside an :class:`LLMClient` call: the order rows are written in, not a column
    issue: tuple[int, int] | None = None
    #: an answered call's prompt (its messages joined by newlines, as a provider caches it) as
    #: its block keys (:func:`townsquare.prompt_cache.prompt_blocks`) and its length in
    #: characters: what ``llm_calls.cached_prefix_tokens`` is counted from, in the order calls
    #: were issued; not columns
    prompt_blocks: bytes = b""
    prompt_chars: int = 0


class Issue(tuple):
    """``(issue number, part)`` of a client call, compared as that pair; ``round``: the round it
    was issued in (its numbers count from 0 in each round)."""

    round: int

    def __new__(cls, number: int, part: int, round: int = 0) -> "Issue":
        issue = super().__new__(cls, (number, part))
        issue.round = round
        return issue

    def __getnewargs__(self) -> tuple[int, int, int]:  # pickled to and from Ray shards whole
        return self[0], self[1], self.round


@functools.lru_cache(maxsize=4096)
def _issue_of(number: int, part: int, round: int) -> Issue:
    """The :class:`Issue` ``(number, part)`` of ``round``, made once: every agent's calls of a
    round share the few there are (an :class:`Issue` is read, never changed)."""
    return Issue(number, part, round)


#: the issue of the :class:`LLMClient` call under way in this task (see the module docstring)
_ISSUE: ContextVar[Issue | None] = ContextVar("townsquare_llm_issue", default=None)


def current_issue() -> Issue | None:
    """The issue of the client call under way here (None outside one): what the records made now
    carry, and where the response cache keeps its answer."""
    return _ISSUE.get()


@runtime_checkable
class LLMProvider(Protocol):
    """A backend. ``name`` is the registered provider name, ``model`` the model it serves.

    Optional: ``cost(response) -> float`` (the price of one answer, from the provider's price
    table; recorded per call), ``async aclose()`` (called when the run ends) and ``describe() ->
    dict`` whose ``"structured"`` entry says which modes the provider enforces per kind of
    request (:mod:`townsquare.llm_modes`), e.g. ``{"labels": ["logprob"], "json": ["grammar"]}``.
    A provider serves a structured request in its ``mode`` (or its strongest one when the
    request names none) and says in ``response.meta["mode"]`` which mode it really used
    (``prompt`` when it could not constrain this request). ``stand_in = True`` says its answers
    are no model's (an estimate's dry run): a run records their fallbacks without warning.
    """

    name: str
    model: str

    async def complete(self, request: LLMRequest) -> LLMResponse: ...


#: A middleware link: ``await link(request, call_next)``.
Handler = Callable[[LLMRequest], Awaitable[LLMResponse]]


class Middleware(Protocol):
    async def __call__(self, request: LLMRequest, call_next: Handler) -> LLMResponse: ...


class Accounting:
    """Innermost middleware: times each provider call and records it, failures included.

    A provider's exception is classified here (:func:`townsquare.llm_faults.classify`): it is
    recorded as an ``error`` row with its kind and re-raised as an
    :class:`~townsquare.llm_faults.LLMFault` (the original as its cause), so the links outside
    (``llm_retry``) and the engine see one kind of failure whatever the SDK. An answer of the
    wrong shape (a cut-off decision) is such a fault too. Exceptions that are not provider
    faults (a bug, a budget stop) pass untouched.

    A middleware that answers without calling the provider (the response cache) records its
    answer with :meth:`account`, so every answer a component gets has its row. ``observers``
    (``observer(record)``) see every record made here (the budget counts spending from them).
    ``refuse`` (a reason) makes every new call raise :class:`~townsquare.errors.RunStopped`
    without reaching the provider: the engine sets it while a stopping round lets the calls
    in flight land.
    """

    def __init__(self, provider: LLMProvider, record: Callable[[LLMCallRecord], None], run_round: Callable[[], int],
                 price: Callable[["LLMResponse"], float] | None = None):
        self.provider = provider
        self.record = record
        self.run_round = run_round
        self.price = price
        self.observers: list[Callable[[LLMCallRecord], None]] = []
        self.refuse: str | None = None
        self.endpoint = getattr(provider, "endpoint", None) or f"LLM provider {provider.name!r}"

    async def __call__(self, request: LLMRequest, call_next: Handler) -> LLMResponse:
        if self.refuse is not None:
            from .errors import RunStopped

            raise RunStopped(self.refuse)
        start = time.perf_counter()
        try:
            response = await call_next(request)
        except Exception as exc:
            fault = classify(exc, self.endpoint)
            paid = getattr(fault, "response", None)
            self._emit(
                LLMCallRecord(
                    round=self.run_round(), agent_id=request.agent_id, purpose=request.purpose,
                    provider=self.provider.name, model=self.provider.model, status="error",
                    prompt_tokens=paid.prompt_tokens if paid else 0, completion_tokens=paid.completion_tokens if paid else 0,
                    latency_ms=(time.perf_counter() - start) * 1000, cost=self._cost(paid),
                    error=(fault.error if fault is not None else f"{type(exc).__name__}: {exc}")[:500],
                    kind=fault.kind if fault is not None else None, mode=request.mode,
                )
            )
            if fault is None or fault is exc:
                raise
            raise fault from exc
        response.latency_ms = response.latency_ms or (time.perf_counter() - start) * 1000
        if response.cached and response.meta.get(KEPT):
            return response  # a recorded answer kept after its retries: its error row was its record
        meta = response.meta
        # a recorded answer is used as it was (a cut-off one too); only a cut-off answer can be
        # a fault (:func:`~townsquare.llm_faults.answer_fault`), so the others skip the call
        if meta and not response.cached and meta.get("finish_reason") == "length":
            fault = answer_fault(request, response)
            if fault is not None:
                self._emit(LLMCallRecord(
                    round=self.run_round(), agent_id=request.agent_id, purpose=request.purpose, provider=self.provider.name,
                    model=response.model or self.provider.model, status="error", prompt_tokens=response.prompt_tokens,
                    completion_tokens=response.completion_tokens, latency_ms=response.latency_ms, cost=self._cost(response),
                    error=fault.error[:500], kind=fault.kind, mode=answer_mode(request, response)))
                raise fault
        self.account(request, response)
        return response

    def _cost(self, response: "LLMResponse | None") -> float:
        return 0.0 if response is None or response.cached or self.price is None else self.price(response)

    def account(self, request: LLMRequest, response: LLMResponse) -> None:
        """Record an answer: status ``cached`` (cost 0) when ``response.cached``, else ``ok``;
        with its prompt's block keys (a replay, all answers cached, counts the same prefixes)."""
        messages = request.messages
        prompt = messages[0].content if len(messages) == 1 else "\n".join([m.content for m in messages])
        cached = response.cached
        # positional: the record's fields in order (an answer's row is made per call)
        self._emit(LLMCallRecord(
            self.run_round(), request.agent_id, request.purpose, response.provider or self.provider.name,
            response.model or self.provider.model, "cached" if cached else "ok", response.prompt_tokens,
            response.completion_tokens, response.latency_ms,
            0.0 if cached or self.price is None else self.price(response), None, None,
            (response.meta.get("mode") if response.meta else None) or request.mode, _ISSUE.get(), prompt_blocks(prompt),
            len(prompt)))

    def _emit(self, call: LLMCallRecord) -> None:
        if call.issue is None:
            call.issue = _ISSUE.get()
        self.record(call)
        for observer in self.observers:
            observer(call)


def compose(provider: LLMProvider, middleware: Sequence[Middleware]) -> Handler:
    """Chain ``middleware`` (outermost first) around ``provider.complete``."""
    handler: Handler = provider.complete
    for link in reversed(middleware):
        handler = _Bound(link, handler, provider)
    return handler


def answer_mode(request: LLMRequest, response: LLMResponse) -> str | None:
    """The mode an answer ran in: the provider's word for it, else the one asked for."""
    return (response.meta or {}).get("mode") or request.mode


def provider_of(handler: Any) -> Any:
    """The provider at the end of a handler made by :func:`compose` (or a bare ``complete``)."""
    return getattr(handler, "provider", None) or getattr(handler, "__self__", None)


class _Bound:
    """``link`` with its ``call_next``: calling it returns the link's own coroutine, so a call
    through N links runs N coroutines, not 2N (measured: 2 % of the client's CPU at 2,560
    calls a second). ``provider``: the one at the end of the chain."""

    __slots__ = ("link", "call_next", "provider")

    def __init__(self, link: Middleware, call_next: Handler, provider: Any = None):
        self.link, self.call_next, self.provider = link, call_next, provider

    def __call__(self, request: LLMRequest) -> Awaitable[LLMResponse]:
        return self.link(request, self.call_next)


@dataclass(frozen=True)
class Answer:
    """A structured answer and how it came out (:data:`townsquare.llm_modes.OUTCOMES`).

    ``value``: the label, the (validated) JSON value, or the opening a prefixed answer starts
    with; the caller's default on ``fallback``. ``text``: the answer as the model wrote it (a
    prefixed answer: its opening and what follows). ``mode``: how it was held to its format.
    ``probabilities``: the labels' (or openings') probabilities where the backend scored them
    (the local model's label scoring), else None.
    """

    value: Any
    outcome: str
    mode: str | None
    text: str = ""
    probabilities: dict[str, float] | None = None

    @property
    def fallback(self) -> bool:
        return self.outcome == "fallback"


_UNSET: Any = object()


class LLMClient:
    """What components use. Bound to one agent (``for_agent``) so every call is attributed.

    Structured requests (:meth:`ask`, :meth:`choose`, :meth:`json`) run in the strongest mode the
    provider can enforce for their kind (``modes``: kind -> mode, by default read from the
    provider at the end of ``handler``, :func:`townsquare.llm_modes.structured_modes`); where it
    cannot constrain (``prompt`` mode) the answer is parsed and a malformed one gets one repair
    request. ``on_parse_failure(request, answer, kind)`` is told when an answer falls back to
    its default after the repair also failed (the engine records it in ``llm_calls`` with
    status ``parse_failure`` and the kind: ``unparsable``, ``empty``, ``binary``, ``not_text``).

    Each of :meth:`text`, :meth:`ask`, :meth:`choose` and :meth:`json` is one issue number for
    its request, its repair and a parse failure it reports (set where the work starts, in
    :meth:`text`, :meth:`_labels`, :meth:`_prefixes` and :meth:`_json`: a call through the
    client costs no coroutine more than its work).
    """

    def __init__(self, handler: Handler, *, model: str, agent_id: str | None = None,
                 on_parse_failure: Callable[[LLMRequest, str, str], None] | None = None,
                 modes: dict[str, str] | None = None,
                 issued: dict[str, Any] | None = None, current_round: Callable[[], int] | None = None):
        self._handler = handler
        self.model = model
        self.agent_id = agent_id
        self.on_parse_failure = on_parse_failure
        self.modes = modes if modes is not None else structured_modes(provider_of(handler))
        #: per agent, (round, counter of the calls issued in it), shared by every client ``for_agent`` makes
        self._issued = issued if issued is not None else {}
        #: the run's round: issue numbers count from 0 in each round, so a resumed round numbers its calls as before
        self.current_round = current_round

    def for_agent(self, agent_id: str) -> "LLMClient":
        return LLMClient(self._handler, model=self.model, agent_id=agent_id, on_parse_failure=self.on_parse_failure,
                         modes=self.modes, issued=self._issued, current_round=self.current_round)

    def _issue(self) -> Any:
        """Mark what follows in this task as the agent's next call in the round (part 0); a token to undo it."""
        round = self.current_round() if self.current_round is not None else 0
        held = self._issued.get(self.agent_id or "")
        if held is None or held[0] != round:
            held = self._issued[self.agent_id or ""] = (round, itertools.count())
        return _ISSUE.set(_issue_of(next(held[1]), 0, round))

    def report_parse_failure(self, purpose: str, answer: str, kind: str = "unparsable") -> None:
        """Record that an answer in a format of the caller's own (a plan, a numbered list...)
        could not be parsed and a fallback was used; it appears in ``llm_calls`` as
        ``parse_failure``. :meth:`ask`, :meth:`choose`, :meth:`json` and :meth:`text` do this
        themselves."""
        self._failed(LLMRequest(messages=(), purpose=purpose, agent_id=self.agent_id), answer, kind)

    def _failed(self, request: LLMRequest, answer: str, kind: str = "unparsable") -> None:
        if self.on_parse_failure is not None:
            if _ISSUE.get() is None:  # reported on its own (report_parse_failure): a place of its own
                token = self._issue()
                try:
                    return self._failed(request, answer, kind)
                finally:
                    _ISSUE.reset(token)
            request = replace(request, agent_id=request.agent_id or self.agent_id)
            self.on_parse_failure(request, answer, kind)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if request.agent_id is None and self.agent_id is not None:
            request = replace(request, agent_id=self.agent_id)
        if _ISSUE.get() is not None:  # a part of :meth:`text`, :meth:`choose` or :meth:`json`
            return await self._handler(request)
        token = self._issue()
        try:
            return await self._handler(request)
        finally:
            _ISSUE.reset(token)

    async def _repair(self, request: LLMRequest) -> LLMResponse:
        """The repair request of the call under way: its issue number, part 1."""
        issue = _ISSUE.get()
        if issue is not None:
            _ISSUE.set(_issue_of(issue[0], 1, issue.round))  # undone with the call's own issue when it returns
        return await self.complete(request)

    async def text(self, prompt: str | Sequence[Message], *, purpose: str = "text", **options: Any) -> str:
        """Free text (a post, a comment, a summary). An answer that is no text (empty, only
        blanks, NUL bytes or other control characters, undecodable bytes) gets one repair
        request; if that is no text either, the call records a ``parse_failure`` and returns
        ``""``, which every caller reads as "nothing written": garbage never becomes content."""
        token = self._issue()
        try:
            request = LLMRequest(messages=_messages(prompt), purpose=purpose, agent_id=self.agent_id, **options)
            answer = (await self._handler(request)).text
            problem = not_text(answer)
            if problem is None:
                return answer
            # the bad answer is not echoed back: binary bytes have no business in a prompt
            repair = request.messages + (Message("user", f"Your answer was {_PROBLEMS[problem]}. Answer again, in plain text."),)
            answer = (await self._repair(replace(request, messages=repair, purpose=f"{purpose}.repair"))).text
            if not_text(answer) is None:
                return answer
            self._failed(request, answer if isinstance(answer, str) else repr(answer), not_text(answer) or "unparsable")
            return ""
        finally:
            _ISSUE.reset(token)

    def ask(self, prompt: str | Sequence[Message], answer: AnswerFormat, *, purpose: str | None = None,
            default: Any = _UNSET, validate: Callable[[Any], Any] | None = None, **options: Any) -> Awaitable[Answer]:
        """The answer to a declared structured purpose (:class:`~townsquare.llm_answers.AnswerFormat`:
        a label set, a JSON schema or answer openings), with how it came out. ``purpose`` and
        ``default`` default to the declaration's; ``validate`` (JSON only) checks and converts
        the parsed value and may raise ``ValueError``. The request, its repair and a fallback's
        parse failure share one issue number. (Awaitable: ``await llm.ask(...)``.)"""
        purpose = purpose or answer.purpose
        default = answer.default if default is _UNSET else default
        if answer.labels is not None:
            return self._labels(prompt, answer.labels, purpose, default, options)
        if answer.prefixes is not None:
            return self._prefixes(prompt, answer.prefixes, purpose, default, options)
        return self._json(prompt, answer.schema or {}, purpose, default, validate, options)

    def choose(self, prompt: str | Sequence[Message], labels: Sequence[str], *, purpose: str, default: str,
               **options: Any) -> Awaitable[str]:
        """One of ``labels``: whatever a model writes, the result is in the label set (a
        malformed answer gets one repair request, then ``default``). (Awaitable.)"""
        return self._labels(prompt, tuple(labels), purpose, default, options, whole=False)

    def json(self, prompt: str | Sequence[Message], schema: dict[str, Any], *, purpose: str, default: Any,
             validate: Callable[[Any], Any] | None = None, **options: Any) -> Awaitable[Any]:
        """JSON of ``schema`` (checked by ``validate`` if given, which may raise ``ValueError``);
        one repair request where it does not parse, then ``default``. (Awaitable.)"""
        return self._json(prompt, schema, purpose, default, validate, options, whole=False)

    async def _labels(self, prompt: Any, labels: tuple[str, ...], purpose: str, default: Any, options: dict[str, Any],
                      whole: bool = True) -> Any:
        """The :class:`Answer` of a label decision (its value alone unless ``whole``)."""
        token = self._issue()
        try:
            messages = _messages(prompt)
            request = LLMRequest(messages=messages, labels=labels, purpose=purpose, max_tokens=options.pop("max_tokens", 8),
                                 agent_id=self.agent_id, mode=options.pop("mode", self.modes.get("labels", "prompt")), **options)
            response = await self._handler(request)
            try:
                value = match_label(response.text, labels)
            except ParseFailure:
                pass
            else:
                return _answer(value, request, response) if whole else value
            repair = messages + (
                Message("assistant", response.text),
                Message("user", f"Answer with exactly one of: {', '.join(labels)}."),
            )
            response = await self._repair(replace(request, messages=repair, purpose=f"{purpose}.repair"))
            try:
                value = match_label(response.text, labels)
            except ParseFailure:
                self._failed(request, response.text)
                return Answer(default, "fallback", request.mode, response.text) if whole else default
            return _answer(value, request, response, repaired=True) if whole else value
        finally:
            _ISSUE.reset(token)

    async def _prefixes(self, prompt: Any, prefixes: tuple[str, ...], purpose: str, default: Any, options: dict[str, Any]) -> Answer:
        """An answer that starts with one of ``prefixes`` (a prefix ending in ``:`` goes on in
        free text): ``value`` is the opening, ``text`` the whole answer."""
        token = self._issue()
        try:
            messages = _messages(prompt)
            request = LLMRequest(messages=messages, answer_prefixes=tuple(prefixes), purpose=purpose, agent_id=self.agent_id,
                                 mode=options.pop("mode", self.modes.get("prefixes", "prompt")), **options)
            response = await self._handler(request)
            for repaired in (False, True):
                text = response.text
                if not_text(text) is None:
                    try:
                        return _answer(match_prefix(text, prefixes), request, response, repaired=repaired)
                    except ParseFailure:
                        pass
                if repaired:
                    self._failed(request, text if isinstance(text, str) else repr(text), not_text(text) or "unparsable")
                    return Answer(default, "fallback", request.mode, "")
                repair = messages + (Message("user", "Begin your answer with one of: " + ", ".join(f'"{p}"' for p in prefixes) + "."),)
                response = await self._repair(replace(request, messages=repair, purpose=f"{purpose}.repair"))
            raise AssertionError("unreachable")
        finally:
            _ISSUE.reset(token)

    async def _json(self, prompt: Any, schema: dict[str, Any], purpose: str, default: Any, validate: Callable[[Any], Any] | None,
                    options: dict[str, Any], whole: bool = True) -> Any:
        """The :class:`Answer` of a JSON request (its value alone unless ``whole``)."""
        token = self._issue()
        try:
            messages = _messages(prompt)
            request = LLMRequest(messages=messages, json_schema=schema, purpose=purpose, agent_id=self.agent_id,
                                 mode=options.pop("mode", self.modes.get("json", "prompt")), **options)
            response = await self._handler(request)
            for repaired in (False, True):
                try:
                    value = extract_json(response.text)
                    value = validate(value) if validate else value
                except (ParseFailure, ValueError, TypeError, KeyError) as exc:
                    if repaired:
                        self._failed(request, response.text)
                        return Answer(default, "fallback", request.mode, response.text) if whole else default
                    repair = messages + (
                        Message("assistant", response.text),
                        Message("user", f"That was not valid ({exc}). Reply with JSON only, matching: {json.dumps(schema)}"),
                    )
                    response = await self._repair(replace(request, messages=repair, purpose=f"{purpose}.repair"))
                else:
                    return _answer(value, request, response, repaired=repaired) if whole else value
            raise AssertionError("unreachable")
        finally:
            _ISSUE.reset(token)


def _answer(value: Any, request: LLMRequest, response: LLMResponse, repaired: bool = False) -> Answer:
    mode = answer_mode(request, response)
    outcome = "repaired" if repaired else "constrained" if is_constrained(mode) else "parsed"
    probabilities = (response.meta or {}).get("label_probs")
    return Answer(value, outcome, mode, response.text, dict(probabilities) if probabilities else None)


#: control characters that never belong in text (tab, newline and carriage return do)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


_PROBLEMS = {"empty": "empty", "binary": "unreadable (binary characters)", "not_text": "not text"}


def not_text(answer: Any) -> str | None:
    """None when ``answer`` is readable text; else what it is instead: ``"empty"`` (nothing or
    only blanks), ``"binary"`` (NUL or other control characters, or mostly U+FFFD, the mark of
    undecodable bytes) or ``"not text"`` (not a string at all)."""
    if not isinstance(answer, str):
        return "not text"
    if not answer.strip():
        return "empty"
    if _CONTROL.search(answer) or answer.count("\ufffd") * 4 > len(answer):
        return "binary"
    return None


def _messages(prompt: str | Sequence[Message]) -> tuple[Message, ...]:
    if isinstance(prompt, str):
        return (Message("user", prompt),)
    return tuple(prompt)
