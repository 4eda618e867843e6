"""The LLM journal: every LLM call of a world counted, kept as an ``llm_calls`` row, and heard.

The LLM layer's innermost link (:class:`~townsquare.llm.Accounting`) and the client's parse
failures hand each :class:`~townsquare.llm.LLMCallRecord` to :meth:`LLMJournal.record`, which
counts it in the running totals (a fallback answer is a warning), keeps its ``llm_calls`` row
(unless not ``recording``: a resumed run's second build) and tells its ``listeners`` (the round
loop's ``townsquare_on_llm_call``; an evaluation has none).

Rows are written in issue order, never in completion order: by agent, then by issue number and
part in the round (a request, its retries and repair with it), then by arrival (:func:`kept_row`);
an answered row's ``cached_prefix_tokens`` come from the :class:`~townsquare.prompt_cache.PrefixIndex`
in that order (a failed attempt or a parse failure gets None, and a replay counts the same). The
round loop takes a round's rows at its end (:meth:`take`); an evaluation, whose world never plays
a round, writes what it kept when it is done (:meth:`write`).

``round`` is the journal's clock: the round each call is recorded in (-1 while a run is built),
read by the accounting link and by the clients' issue numbers through :meth:`current_round`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable

import structlog

from .llm import LLMCallRecord
from .llm_modes import TOTAL_KEYS, count_answer
from .prompt_cache import PrefixIndex, cached_tokens
from .secrets import redact_text

log = structlog.get_logger("townsquare.llm_journal")

#: Totals the journal keeps about LLM calls (besides the world's rounds, actions, posts, comments, active agents).
LLM_TOTALS = ("llm_calls", "cached", "prompt_tokens", "completion_tokens", "cost", "llm_errors", "repairs",
              "parse_failures", *TOTAL_KEYS.values())

#: where a kept row's ``llm_calls`` columns start (:func:`kept_row`), its status, a failed row's last column
ROW, STATUS, NOT_ANSWERED = 7, 12, (None,)


def new_totals() -> dict[str, float]:
    """A world's running totals before anything happened."""
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


class LLMJournal:
    """The ``llm_calls`` rows of one world (see the module docstring). ``totals``: the world's
    running totals, which every call is counted in; ``listeners``: ``listener(call)`` for each.
    ``counting=False``: the calls are only handed to the listeners, neither counted nor kept (a
    backend's worker, whose calls the run's own journal takes in: ``World.take_in_calls``)."""

    def __init__(self, totals: dict[str, float] | None = None, listeners: Iterable[Callable[[LLMCallRecord], None]] = (),
                 *, counting: bool = True):
        self.totals = new_totals() if totals is None else totals
        self.listeners = list(listeners)
        self.counting = counting
        #: the round calls are recorded in (-1: while the world is built)
        self.round = -1
        #: whether rows are kept (False while a resumed run builds again: its first build recorded them)
        self.recording = True
        #: whether an answer that fell back to its caller's default is a warning (False when the
        #: provider is a stand-in, ``stand_in = True``: an estimate's answers are no model's)
        self.warn_fallbacks = True
        #: agent id -> its index: the rows' order (a call before the agents exist is ordered by id)
        self.order: dict[str, int] = {}
        #: every prompt prefix of the answered calls so far, in issue order (``cached_prefix_tokens``)
        self.prefix_index = PrefixIndex()
        self._kept: list[tuple] = []
        #: ``round`` as the LLM layer reads it several times a call: a C-level callable, no Python frame
        self.current_round = functools.partial(getattr, self, "round")

    def record(self, call: LLMCallRecord) -> None:
        """Count ``call``, keep its row and tell the listeners."""
        if not self.counting:
            for listener in self.listeners:
                listener(call)
            return
        count_llm_call(self.totals, call)
        if call.status == "parse_failure" and self.warn_fallbacks:
            answers = {outcome: int(self.totals.get(key, 0)) for outcome, key in TOTAL_KEYS.items()}
            log.warning("llm.fallback", purpose=call.purpose, agent=call.agent_id, mode=call.mode or "-", kind=call.kind,
                        fallbacks=answers["fallback"], answers=sum(answers.values()))
        if self.recording:
            self._kept.append(kept_row(call, self.order.get(call.agent_id or "", -1), len(self._kept)))
        for listener in self.listeners:
            listener(call)

    def take(self) -> list[tuple]:
        """The rows kept since the last take, in issue order, each with its ``cached_prefix_tokens``."""
        kept, self._kept = self._kept, []
        return self._ordered(kept)

    def take_failed(self) -> list[tuple]:
        """A stopped round's rows: only its failed attempts (they happened; the replayed round
        gets its answers from the response cache and does not repeat them); the rest is dropped."""
        kept, self._kept = self._kept, []
        return self._ordered([item for item in kept if item[STATUS] == "error"])

    def write(self, store: Any, rows: list[tuple] | None = None) -> list[tuple]:
        """Write ``rows`` (default: :meth:`take`) into ``store``'s ``llm_calls`` now; returns them."""
        rows = self.take() if rows is None else rows
        if rows and self.recording:
            store.write_now("llm_calls", rows)
        return rows

    def discard(self) -> None:
        """Forget the rows kept so far (a resumed run's build, which its first build recorded)."""
        self._kept.clear()

    def _ordered(self, kept: list[tuple]) -> list[tuple]:
        rows: list[tuple] = []
        append, add_blocks = rows.append, self.prefix_index.add_blocks
        for item in sorted(kept):  # by place: its fields are unique, so no row is ever compared
            if item[STATUS] in ("ok", "cached"):  # a prompt shorter than a block shares nothing
                shared = add_blocks(item[5]) if item[5] else 0
                append(item[ROW:] + (cached_tokens(shared, item[6], item[STATUS + 1]) if shared else 0,))
            else:
                append(item[ROW:] + NOT_ANSWERED)
        return rows


def kept_row(call: LLMCallRecord, order: int, arrival: int) -> tuple:
    """A kept ``llm_calls`` row: one flat tuple (each young collection walks every kept object), its
    place first (agent ``order``, the id of a caller that is no agent, issue, part, ``arrival``:
    unique, so sorting compares places only), then the prompt's block keys and length, the row."""
    issue = call.issue or (-1, 0)
    return (order, "" if order >= 0 else call.agent_id or "", issue[0], issue[1], arrival, call.prompt_blocks, call.prompt_chars,
            call.round, call.agent_id, call.purpose, call.provider, call.model, call.status, call.prompt_tokens,
            call.completion_tokens, round(call.latency_ms, 3), call.cost, call.error and redact_text(call.error), call.kind,
            call.mode)
