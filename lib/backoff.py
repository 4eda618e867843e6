"""How long to wait before retrying a provider call: the server's ``Retry-After`` or full-jitter
exponential backoff. Shared by the ``llm_retry`` middleware and the API embedders; the kernel's
:mod:`townsquare.llm_faults` says whether a fault is worth a retry at all."""

from __future__ import annotations

import email.utils
import random

from townsquare.llm_faults import LLMFault


def retry_after(exc: BaseException, now: float) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms``, ``retry-after``: seconds or an HTTP
    date), or None."""
    if isinstance(exc, LLMFault):
        exc = exc.original or exc
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def backoff_delay(attempt: int, exc: BaseException, rng: random.Random, now: float, *, base_s: float, max_s: float,
                  max_retry_after_s: float) -> float:
    """Seconds to wait before attempt ``attempt + 1``: the server's ``Retry-After`` (at most
    ``max_retry_after_s``), else full jitter, uniform in ``[0, min(max_s, base_s * 2**(attempt-1))]``
    (Brooker, "Exponential Backoff and Jitter", AWS Architecture Blog, 2015)."""
    after = retry_after(exc, now)
    if after is not None:
        return min(after, max_retry_after_s)
    return rng.uniform(0, min(max_s, base_s * 2 ** (attempt - 1)))
