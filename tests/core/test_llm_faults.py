"""The one classification of provider failures, on the real exception
types of the ``openai`` SDK and ``httpx``, on plain Python ones, and on answers cut off at
the token limit."""

from __future__ import annotations

import json
import random

import httpx
import openai
import pytest

from townsquare.errors import RunStopped
from townsquare.llm import LLMRequest, LLMResponse, Message, match_label
from townsquare.lib.backoff import backoff_delay
from townsquare.llm_faults import FATAL, KINDS, RETRYABLE, LLMFault, answer_fault, classify

URL = "http://llm.test/v1/chat/completions"
REQUEST = httpx.Request("POST", URL)


def status_error(cls, status: int, body: dict | str | None = None, headers: dict | None = None):
    content = json.dumps(body).encode() if isinstance(body, dict) else (body or "").encode()
    response = httpx.Response(status, request=REQUEST, content=content, headers=headers)
    return cls(f"Error code: {status}", response=response, body=body)


def decode_error() -> json.JSONDecodeError:
    try:
        json.loads('{"choices": [{"message": {"content": "hel')
    except json.JSONDecodeError as exc:
        return exc
    raise AssertionError


CONTEXT = {"error": {"message": "This model's maximum context length is 8192 tokens.", "code": "context_length_exceeded"}}


@pytest.mark.parametrize("exc,kind,status", [
    (decode_error(), "bad_body", None),  # a body cut off at 200: what the SDK raises
    (openai.APIResponseValidationError(httpx.Response(200, request=REQUEST), body="<html>"), "bad_body", 200),
    (openai.APIConnectionError(request=REQUEST), "connection", None),
    (openai.APITimeoutError(request=REQUEST), "timeout", None),
    (httpx.ReadTimeout("read", request=REQUEST), "timeout", None),
    (httpx.RemoteProtocolError("peer closed connection without sending complete message body"), "connection", None),
    (ConnectionRefusedError(111, "Connection refused"), "connection", None),
    (ConnectionResetError(104, "Connection reset by peer"), "connection", None),
    (TimeoutError(), "timeout", None),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "bad_body", None),
    (status_error(openai.RateLimitError, 429, {"error": {"message": "slow down"}}, {"retry-after": "2"}), "rate_limit", 429),
    (status_error(openai.RateLimitError, 429, {"error": {"message": "slow down"}}), "rate_limit", 429),
    (status_error(openai.InternalServerError, 502, "<html><h1>502 Bad Gateway</h1></html>"), "server", 502),
    (status_error(openai.InternalServerError, 500, {"error": {"message": "oops"}}), "server", 500),
    (status_error(openai.AuthenticationError, 401, {"error": {"message": "bad key"}}), "auth", 401),
    (status_error(openai.PermissionDeniedError, 403, {"error": {"message": "no"}}), "auth", 403),
    (status_error(openai.NotFoundError, 404, {"error": {"message": "model x does not exist"}}), "not_found", 404),
    (status_error(openai.BadRequestError, 400, CONTEXT), "too_long", 400),
    (status_error(openai.BadRequestError, 400, {"error": {"message": "temperature must be <= 2"}}), "rejected", 400),
    (status_error(openai.APIStatusError, 408, {}), "timeout", 408),
])
def test_sdk_errors(exc, kind, status):
    fault = classify(exc)
    assert isinstance(fault, LLMFault) and (fault.kind, fault.status) == (kind, status)
    assert fault.retryable == (kind in RETRYABLE) and "\n" not in fault.describe()
    if isinstance(exc, openai.APIStatusError):
        assert fault.endpoint == URL and fault.describe().startswith(f"{URL}: HTTP {status} {kind}: ")


def test_the_server_message_is_what_a_stop_says():
    fault = classify(status_error(openai.AuthenticationError, 401, {"error": {"message": "Incorrect API key\nprovided"}}))
    assert fault.describe() == f"{URL}: HTTP 401 auth: Incorrect API key provided"
    assert fault.error.startswith("AuthenticationError: Error code: 401")


class HiccupFromALibrary(Exception):
    pass


def raise_outside_townsquare(exc):
    raise exc


def test_unknown_provider_errors_are_retried_and_bugs_are_not():
    assert classify(HiccupFromALibrary("odd")).kind == "unknown"
    try:
        raise_outside_townsquare(ValueError("a library's own ValueError"))
    except ValueError as exc:
        assert classify(exc).kind == "unknown"
    for bug in (KeyError("x"), TypeError("x"), AttributeError("x"), IndexError("x")):
        assert classify(bug) is None
    try:
        match_label("neither", ["like", "skip"])  # a ValueError raised by townsquare's own code: a bug there
    except ValueError as exc:
        assert classify(exc) is None
    assert classify(RunStopped("budget")) is None and classify(KeyboardInterrupt()) is None
    assert classify(RuntimeError("Requested tokens (9000) exceed context window of 8192")).kind == "too_long"
    assert KINDS == RETRYABLE | FATAL and not RETRYABLE & FATAL


def ask(labels=None, schema=None):
    return LLMRequest(messages=(Message("user", "x"),), labels=labels, json_schema=schema, max_tokens=8)


def test_a_cut_off_decision_is_a_fault_only_when_it_does_not_parse():
    cut = {"finish_reason": "length"}
    assert answer_fault(ask(("like", "skip")), LLMResponse(text="Like. Because the mountains", meta=cut)) is None
    assert answer_fault(ask(("like", "skip")), LLMResponse(text="Well, I think that I w", meta=cut)).kind == "length"
    assert answer_fault(ask(schema={"type": "object"}), LLMResponse(text='{"like": tr', meta=cut)).kind == "length"
    assert answer_fault(ask(schema={"type": "object"}), LLMResponse(text='{"like": true}', meta=cut)) is None
    assert answer_fault(ask(), LLMResponse(text="a long post that was cut", meta=cut)) is None  # text: a long answer
    assert answer_fault(ask(("like", "skip")), LLMResponse(text="Well", meta={"finish_reason": "stop"})) is None


def test_backoff_honours_retry_after_else_full_jitter():
    rng = random.Random(1)
    limited = classify(status_error(openai.RateLimitError, 429, {}, {"retry-after": "7"}))
    assert backoff_delay(1, limited, rng, 0.0, base_s=1, max_s=30, max_retry_after_s=5) == 5
    bare = classify(status_error(openai.RateLimitError, 429, {}))
    delays = [backoff_delay(k, bare, rng, 0.0, base_s=1, max_s=3, max_retry_after_s=5) for k in (1, 2, 3, 4)]
    assert all(0 <= d <= cap for d, cap in zip(delays, (1, 2, 3, 3)))
