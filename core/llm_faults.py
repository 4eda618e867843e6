"""What went wrong with a provider call, in one place: every LLM and embedding failure gets a
*kind* and a verdict, retry or stop.

Retryable kinds (a later attempt may succeed):

==================  ===========================================================================
``timeout``         no answer in time (``TimeoutError``, the SDKs' ``*Timeout*`` errors, 408)
``connection``      reset, refused, closed mid-body, DNS (``OSError``, ``*Connection*`` errors)
``bad_body``        a body that is not the JSON promised, cut off, an HTML page at 200, a JSON
                    shape without ``choices`` (``json.JSONDecodeError``, the SDK's
                    ``APIResponseValidationError``, a decode error, a ``str`` where a dict goes)
``rate_limit``      429, with or without ``Retry-After`` (and 409, which OpenAI asks to retry)
``server``          5xx, whatever the body (an HTML 502 from a proxy included)
``empty``           a 200 whose ``choices`` is empty
``null_content``    a choice whose ``message.content`` is null
``length``          ``finish_reason == "length"`` on a decision (labels or JSON) whose answer
                    does not parse: a cut-off decision is no decision
``unknown``         an exception of a type we do not know, raised inside a provider's library
                    (conservative: retried, and stopped cleanly once the attempts are spent)
==================  ===========================================================================

Fatal kinds (the run stops cleanly at its last checkpoint, exit status 3, with one line that
names the endpoint and the status; ``townsquare resume`` continues once the cause is fixed):
``auth`` (401, 403), ``not_found`` (404: an unknown model or path), ``too_long`` (400 saying the
context is too long; prompts are bounded by design, so this is a configuration matter),
``rejected`` (any other 4xx).

Not a provider fault (``classify`` returns None, the exception passes untouched): townsquare's
own errors (a budget stop, a replay miss) and the exceptions that mean a bug in our code
(``TypeError``, ``AttributeError``, ``KeyError``... and any builtin exception raised by a
frame of townsquare itself), so a bug still shows its traceback.

:class:`LLMFault` is the classified exception the kernel's accounting raises in place of the
provider's (the original is its ``__cause__``); providers may raise it themselves for answers
of the wrong shape (:func:`answer_fault`). The wait before a retry (``Retry-After`` or
full-jitter exponential backoff) is :func:`townsquare.lib.backoff.backoff_delay`, shared by
``llm_retry`` and the API embedders.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .errors import RunStopped, TownsquareError

RETRYABLE = frozenset({"timeout", "connection", "bad_body", "rate_limit", "server", "empty", "null_content", "length", "unknown"})
FATAL = frozenset({"auth", "not_found", "too_long", "rejected"})
KINDS = RETRYABLE | FATAL

#: builtin exception types that mean a bug wherever they are raised
_BUG_TYPES = (TypeError, AttributeError, KeyError, IndexError, NameError, AssertionError, ZeroDivisionError,
              RecursionError, NotImplementedError, ImportError, UnboundLocalError)
_TOO_LONG = re.compile(r"context[_ ]length|maximum context|context window|too many tokens|prompt is too long|"
                       r"exceeds? (?:the )?(?:model'?s? )?(?:maximum|max|context)", re.I)
#: townsquare's own source folders: an exception raised by one of their frames is ours
_OWN_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OWN_DIRS = tuple(os.path.join(_OWN_ROOT, d) + os.sep for d in ("core", "plugins", "platforms", "recommenders"))


class LLMFault(TownsquareError):
    """A classified provider failure. ``kind`` is one of :data:`KINDS`; ``status`` the HTTP
    status when there was one; ``endpoint`` where it came from when known; ``detail`` one line
    of what the provider said. ``response`` is the paid answer when one came (``length``...)."""

    def __init__(self, kind: str, detail: str, *, status: int | None = None, endpoint: str | None = None,
                 response: Any = None, error: str | None = None):
        self.kind, self.detail, self.status, self.endpoint, self.response = kind, one_line(detail), status, endpoint, response
        #: the provider's exception this fault classifies (None when the fault was raised as such)
        self.original: BaseException | None = None
        #: the original error as ``Type: message`` (what ``llm_calls.error`` shows)
        self.error = error or f"{kind}: {self.detail}"
        super().__init__(self.error)

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    def describe(self) -> str:
        """``ENDPOINT: STATUS KIND: detail`` on one line, for stop messages."""
        where = self.endpoint or "the LLM endpoint"
        status = f"HTTP {self.status} " if self.status else ""
        return one_line(f"{where}: {status}{self.kind}: {self.detail}")[:400]


class LLMFatal(RunStopped):
    """A provider refused the run's requests for good (a bad key, an unknown model...), or kept
    failing past the retry budget: the run stops at its last checkpoint."""


def classify(exc: BaseException, endpoint: str | None = None) -> LLMFault | None:
    """The :class:`LLMFault` for a provider exception (the exception as its ``original``), or
    None when it is not one (see the module docstring). ``endpoint`` is used when the
    exception does not say where it came from."""
    if isinstance(exc, LLMFault):
        return exc
    fault = _classify(exc, endpoint)
    if fault is not None:
        fault.original = exc
    return fault


def _classify(exc: BaseException, endpoint: str | None) -> LLMFault | None:
    if isinstance(exc, TownsquareError) or not isinstance(exc, Exception):
        return None
    error = one_line(f"{type(exc).__name__}: {exc}")[:500]
    where = _endpoint(exc) or endpoint
    status = status_code(exc)
    if status is not None and status >= 400:
        return LLMFault(_status_kind(status, exc), _message(exc), status=status, endpoint=where, error=error)
    names = [cls.__name__ for cls in type(exc).__mro__]
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)) or status is not None or any(
            "Decod" in n or "Validation" in n for n in names[:3]):
        # status < 400 with an exception: the SDK could not read a 200 (APIResponseValidationError)
        return LLMFault("bad_body", _message(exc), status=status, endpoint=where, error=error)
    if isinstance(exc, TimeoutError) or any("Timeout" in n for n in names):
        return LLMFault("timeout", _message(exc), endpoint=where, error=error)
    if isinstance(exc, OSError) or any("Connection" in n or "Network" in n or "Transport" in n for n in names):
        return LLMFault("connection", _message(exc), endpoint=where, error=error)
    if isinstance(exc, _BUG_TYPES):
        return None
    if _raised_by_us(exc):
        return None
    if _TOO_LONG.search(str(exc)):
        return LLMFault("too_long", _message(exc), endpoint=where, error=error)
    return LLMFault("unknown", _message(exc), endpoint=where, error=error)


def _status_kind(status: int, exc: BaseException) -> str:
    if status == 408:
        return "timeout"
    if status in (409, 429):
        return "rate_limit"
    if status >= 500:
        return "server"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status in (400, 413, 422) and _TOO_LONG.search(f"{exc} {_message(exc)} {getattr(exc, 'code', '')}"):
        return "too_long"
    return "rejected"


def answer_fault(request: Any, response: Any) -> LLMFault | None:
    """``length`` when a decision (labels or JSON) was cut off by the token limit and does not
    parse; None otherwise. Called by the accounting on every answer: cheap when it is fine."""
    meta = response.meta
    if not meta or meta.get("finish_reason") != "length" or not (request.labels or request.json_schema):
        return None
    from .llm_answers import ParseFailure, extract_json, match_label

    try:
        if request.labels:
            match_label(response.text, request.labels)
        else:
            extract_json(response.text)
        return None
    except ParseFailure:
        return LLMFault("length", f"answer cut off at the token limit ({request.max_tokens}): {response.text[:60]!r}",
                        response=response)


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of an SDK error (its own ``status_code`` or its ``response``'s)."""
    for holder in (exc, getattr(exc, "response", None)):
        status = getattr(holder, "status_code", None)
        if isinstance(status, int):
            return status
    return None


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def _message(exc: BaseException) -> str:
    """What the server said: the ``error.message`` of a JSON error body, else the exception text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return one_line(inner["message"])[:300]
    return one_line(str(exc) or type(exc).__name__)[:300]


def _endpoint(exc: BaseException) -> str | None:
    try:  # httpx raises RuntimeError for an error without its request
        url = getattr(getattr(exc, "request", None), "url", None)
        if url is None:
            return None
        return str(url.copy_with(query=None)) if hasattr(url, "copy_with") else str(url)
    except Exception:  # noqa: BLE001 - an odd request or URL object: say nothing rather than fail
        return None


def _raised_by_us(exc: BaseException) -> bool:
    """True when the innermost frame that raised ``exc`` is townsquare's own code."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename.startswith(_OWN_DIRS)
