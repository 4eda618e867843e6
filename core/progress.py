"""What the engine counts about a run while it plays: its running totals.

The engine keeps running totals (:func:`new_totals`; every LLM call record goes through
:func:`count_llm_call`) and hands a copy to its ``progress(round, totals)`` callback once
before the first round it plays (``round`` = the last round already done, -1 for a new run)
and after every round. How a front end shows them is its own business
(:mod:`townsquare.cli.progress`: a bar, lines, JSON; the notebook's line in a cell).

Between those, a display that wants to show what happens as it happens passes the engine a
``live(event)`` callback. Its events are dicts with an ``event`` key:

* ``phase`` (``text``, ``rounds``): what the run is doing while it is built (loading the model,
  reading a population's personas, building its agents), before round 0;
* ``llm_call`` (``round``, ``purpose``, ``totals``): an LLM call was answered (or failed, or its
  answer fell back), with a copy of the running totals: persona enrichment and round 0's
  calls count as they land, not when the round ends;
* ``round_start`` (``round``, ``rounds``): a round begins.
"""

from __future__ import annotations

from typing import Any

from .llm_modes import TOTAL_KEYS, count_answer

#: Totals the engine keeps about LLM calls (besides rounds, actions, posts, comments, active agents).
LLM_TOTALS = ("llm_calls", "cached", "prompt_tokens", "completion_tokens", "cost", "llm_errors", "repairs",
              "parse_failures", *TOTAL_KEYS.values())


def new_totals() -> dict[str, float]:
    """The engine's running totals at the start of a run."""
    return {"rounds": 0, "actions": 0, "posts": 0, "comments": 0, "active": 0, **{key: 0 for key in LLM_TOTALS}}


def count_llm_call(totals: dict[str, float], call: Any) -> None:
    """Add one ``llm_calls`` record (:class:`townsquare.llm.LLMCallRecord`) to ``totals``.

    ``llm_calls``: requests answered or failed (status ok, cached or error; a ``parse_failure``
    row records an unusable answer, not a request); ``cached``: answered from the response
    cache; tokens and ``cost`` as recorded (a failed attempt that was paid for counts);
    ``llm_errors``: failed attempts (``llm_retry`` retries each until its attempts run out);
    ``repairs``: requests that asked again after a malformed answer (purpose ``*.repair``);
    ``parse_failures``: answers that stayed unusable after the repair (a safe default was used);
    ``answers_<outcome>``: structured answers by how they came out
    (:func:`townsquare.llm_modes.count_answer`).
    """
    count_answer(totals, call.purpose, getattr(call, "mode", None), call.status, keys=TOTAL_KEYS)
    if call.status == "parse_failure":
        totals["parse_failures"] = totals.get("parse_failures", 0) + 1
        return
    totals["llm_calls"] = totals.get("llm_calls", 0) + 1
    totals["prompt_tokens"] = totals.get("prompt_tokens", 0) + (call.prompt_tokens or 0)
    totals["completion_tokens"] = totals.get("completion_tokens", 0) + (call.completion_tokens or 0)
    totals["cost"] = totals.get("cost", 0) + (call.cost or 0.0)
    if call.status == "cached":
        totals["cached"] = totals.get("cached", 0) + 1
    elif call.status == "error":
        totals["llm_errors"] = totals.get("llm_errors", 0) + 1
    if (call.purpose or "").endswith(".repair"):
        totals["repairs"] = totals.get("repairs", 0) + 1


def phase_event(text: str, rounds: int) -> dict[str, Any]:
    """A ``phase`` event: what the run is doing while it is built."""
    return {"event": "phase", "text": text, "rounds": rounds}


def llm_call_event(round: int, purpose: str | None, totals: dict[str, float]) -> dict[str, Any]:
    """An ``llm_call`` event, with a copy of ``totals``."""
    return {"event": "llm_call", "round": round, "purpose": purpose, "totals": dict(totals)}
