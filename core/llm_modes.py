"""How a structured answer is held to its format: each provider's capabilities, the mode the LLM
layer picks per request, and the count of how answers came out.

A structured request is one of three kinds (:func:`request_kind`): a closed label set
(``labels``: like / no operation, a user id or "do not follow"), a JSON schema (``json``: a
plan, a topic list) or fixed answer openings (``prefixes``: Zhou et al.'s "no comment" /
"Comment content: ..."). A provider says which *modes* it can enforce for each kind in its
optional ``describe()`` (``{"structured": {"labels": ["logprob"], "json": ["grammar"]}}``);
:func:`choose_modes` picks the strongest of them per kind (:data:`MODES`, strongest first) and
the client puts it on every request (``LLMRequest.mode``, part of the cache key, so a replay
asks for the same constraint). A kind a provider cannot constrain runs in ``prompt`` mode: the
format is asked for in the prompt, and the answer is parsed and, once, repaired.

Each structured answer ends in one of four outcomes (:data:`OUTCOMES`):

* ``constrained``: the backend enforced the format and the answer parsed;
* ``parsed``: the format was only asked for (``prompt``, ``json_object``) and the answer parsed;
* ``repaired``: the first answer did not parse, the repair request's did;
* ``fallback``: neither did; the caller's safe default was used (a ``parse_failure`` row).

They are counted from the ``llm_calls`` rows alone (each row carries the mode its answer ran
in), the same way for the progress display (:func:`count_answer`, one row at a time) and for
the run's summary line, the manifest and the report (:func:`tally_answers` over the table).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Iterable, Mapping

#: the kinds of structured request
KINDS = ("labels", "json", "prefixes")

#: every mode, strongest first, with how the run's output names it
MODES: dict[str, str] = {
    "logprob": "label scoring (the labels' probabilities from the model, recorded)",
    "guided_choice": "guided choice (the server decodes only the labels)",
    "grammar": "grammar (llama.cpp GBNF from the JSON schema)",
    "json_schema": "strict JSON schema (response_format json_schema)",
    "structured_output": "LangChain with_structured_output",
    "rules": "oracle rules (TEST model: answers shaped to the request)",
    "scripted": "scripted TEST model (labels by construction)",
    "json_object": "JSON mode (syntax only: parsed and repaired)",
    "prompt": "asked for in the prompt (parsed and repaired)",
}
#: modes in which the backend does not enforce the format: the answer is parsed, maybe repaired
UNCONSTRAINED = frozenset({"json_object", "prompt"})
_RANK = {mode: rank for rank, mode in enumerate(MODES)}

#: how a structured answer came out
OUTCOMES = ("constrained", "parsed", "repaired", "fallback")
#: the engine's running totals of the outcomes (:mod:`townsquare.llm_journal`)
TOTAL_KEYS = {outcome: f"answers_{outcome}" for outcome in OUTCOMES}

REPAIR = ".repair"


def request_kind(request: Any) -> str:
    """``labels``, ``prefixes``, ``json`` or ``text`` (a request with no format)."""
    if request.labels:
        return "labels"
    if request.answer_prefixes:
        return "prefixes"
    if request.json_schema is not None:
        return "json"
    return "text"


def provider_capabilities(provider: Any) -> dict[str, tuple[str, ...]]:
    """What ``provider`` can enforce, per kind (from its optional ``describe()``); unknown modes
    are left out, and a kind it does not name gets nothing (``prompt``)."""
    describe = getattr(provider, "describe", None)
    info = describe() if callable(describe) else {}
    structured = (info or {}).get("structured") or {}
    return {kind: tuple(m for m in structured.get(kind, ()) if m in MODES and m != "prompt") for kind in KINDS
            if structured.get(kind)}


def choose_modes(capabilities: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """The strongest mode per kind (``prompt`` where there is none)."""
    return {kind: min(capabilities.get(kind, ()) or ("prompt",), key=lambda m: _RANK.get(m, len(_RANK))) for kind in KINDS}


def structured_modes(provider: Any) -> dict[str, str]:
    """The mode each kind of request runs in with ``provider``."""
    return choose_modes(provider_capabilities(provider))


def mode_for(request: Any, capabilities: Mapping[str, Iterable[str]]) -> str | None:
    """The mode a provider serves ``request`` in: the one the request asks for when the provider
    can enforce it, else its strongest for the kind (``prompt`` when it has none); None for text."""
    kind = request_kind(request)
    if kind == "text":
        return None
    offered = tuple(capabilities.get(kind, ()))
    if request.mode in offered or request.mode == "prompt":
        return request.mode
    return choose_modes({kind: offered})[kind]


def is_constrained(mode: str | None) -> bool:
    return mode is not None and mode not in UNCONSTRAINED


def describe_modes(modes: Mapping[str, str]) -> str:
    """One line: ``labels: label scoring (...); JSON: grammar (...); answer openings: ...``."""
    names = {"labels": "labels", "json": "JSON", "prefixes": "answer openings"}
    return "; ".join(f"{names[kind]}: {MODES.get(modes.get(kind, 'prompt'), modes.get(kind))}" for kind in KINDS)


# --------------------------------------------------------------------------- counting outcomes


def count_answer(tally: dict[str, float], purpose: str | None, mode: str | None, status: str, n: int = 1,
                 keys: Mapping[str, str] | None = None) -> None:
    """Add ``n`` ``llm_calls`` rows of one kind to ``tally`` (outcome -> count).

    A structured answer's first row (``ok`` or ``cached``, a mode set, a purpose not ending in
    ``.repair``) counts as ``constrained`` or ``parsed`` by its mode; its repair row moves it to
    ``repaired``; a ``parse_failure`` row after a repair moves it on to ``fallback``. A
    ``parse_failure`` row without a mode (a caller's own format that failed) is a ``fallback``
    on its own. ``error`` rows (failed attempts, retried) and free text count nothing.
    ``keys`` renames the outcomes (the engine's totals use :data:`TOTAL_KEYS`).
    """
    keys = keys or {o: o for o in OUTCOMES}
    purpose = purpose or ""
    if status == "parse_failure":
        tally[keys["fallback"]] = tally.get(keys["fallback"], 0) + n
        if mode is not None:  # the failure followed a repair that was counted as one
            tally[keys["repaired"]] = tally.get(keys["repaired"], 0) - n
        return
    if mode is None or status not in ("ok", "cached"):
        return
    first = keys["parsed"] if mode in UNCONSTRAINED else keys["constrained"]  # is_constrained: mode is not None here
    if purpose.endswith(REPAIR):
        tally[first] = tally.get(first, 0) - n
        tally[keys["repaired"]] = tally.get(keys["repaired"], 0) + n
    else:
        tally[first] = tally.get(first, 0) + n


def tally_answers(rows: Iterable[tuple[str | None, str | None, str, int]]) -> dict[str, dict[str, Any]]:
    """Per purpose (repairs folded into it): the mode(s) it ran in and its outcome counts, from
    ``(purpose, mode, status, n)`` rows (``SELECT purpose, mode, status, COUNT(*) ... GROUP BY``)."""
    rows = list(rows)
    table: dict[str, dict[str, Any]] = {}
    # repairs after first answers, failures last: the counts never go below zero on the way
    order = {"ok": 0, "cached": 0, "parse_failure": 2}
    for purpose, mode, status, n in sorted(rows, key=lambda r: ((r[0] or "").endswith(REPAIR) + order.get(r[2], 3), r[0] or "")):
        base = (purpose or "").removesuffix(REPAIR)
        entry = table.setdefault(base, {"modes": [], **dict.fromkeys(OUTCOMES, 0)})
        if mode is not None and status in ("ok", "cached") and mode not in entry["modes"]:
            entry["modes"].append(mode)
        count_answer(entry, purpose, mode, status, int(n))
    return {purpose: entry for purpose, entry in sorted(table.items()) if any(entry[o] for o in OUTCOMES)}


def answers_in_db(db: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """:func:`tally_answers` over a run's ``llm_calls`` (a run made before the ``mode`` column
    counts only its fallbacks)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(llm_calls)")}
    mode = "mode" if "mode" in columns else "NULL"
    return tally_answers(db.execute(
        f"SELECT purpose, {mode}, status, COUNT(*) FROM llm_calls WHERE status IN ('ok', 'cached', 'parse_failure') "
        f"GROUP BY purpose, {mode}, status").fetchall())


def totals_of(table: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    return {outcome: int(sum(entry[outcome] for entry in table.values())) for outcome in OUTCOMES}
