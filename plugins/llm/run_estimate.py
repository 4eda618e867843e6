"""``townsquare estimate SCENARIO``: the calls, tokens and cost of a run before it is made.

The forecast plays the scenario: every purpose each design calls per agent-step is called, as
often as the run's own code calls it, under the scenario's activity settings (who is active
when, plans' windows, feeds, reflection periods). What cannot be known before a run is what the
model answers, and the answers decide what comes next (a plan that browses, a decision to start
a conversation, a comment). So the dry run answers as the designs declare a typical model does
(:class:`townsquare.lib.answer_priors.AnswerPrior`, ``townsquare_register_answer_priors``; the stand-in is
:class:`townsquare.api.commands.TypicalModel`, which answers without chance), and the range
plays the run twice more, with a model that acts half as much and half again as much (every
declared share and every prior's typical answer scaled by 0.5 and 1.5).

Prompt tokens are characters / 4 (the same count :mod:`townsquare.prompt_cache` uses);
completion tokens as expected per kind of answer (decisions 2, JSON 60, text 80; or
``--completion-tokens PURPOSE=N``), never more than a request's ``max_tokens``. Retries and
repairs of malformed answers are not in it.
Checked against runs whose model acts (docs/llm.md, "Estimate"): the quickstart on the offline
model, valentines, recagent and social_media on the oracle test model.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from townsquare.lib.cache_share import cache_line

#: the dispositions the dry runs play: typical first, then the range's ends
DISPOSITIONS = (1.0, 0.5, 1.5)
DISPOSITION_WORDS = {1.0: "as the designs declare a typical one does", 0.5: "half as much", 1.5: "half again as much"}

Rows = dict[str, list[int]]  # purpose -> [calls, prompt tokens, completion tokens]


def calls_per_day(events_path: Path) -> dict[str, tuple[int, int, int]]:
    """Simulated day (``2023-02-13``) -> (calls, prompt tokens, completion tokens) of a run's
    answered LLM calls, by the day of each call's round (repairs left out, as the stand-in model
    leaves them out of its counts)."""
    db = sqlite3.connect(events_path)
    try:
        rows = db.execute("SELECT substr(r.sim_time, 1, 10), COUNT(*), SUM(c.prompt_tokens), SUM(c.completion_tokens) "
                          "FROM llm_calls c JOIN rounds r ON r.round = c.round WHERE c.status IN ('ok', 'cached') "
                          "AND c.purpose NOT LIKE '%.repair' GROUP BY 1 ORDER BY 1").fetchall()
    finally:
        db.close()
    return {day: (int(n), int(pt or 0), int(ct or 0)) for day, n, pt, ct in rows}


def cached_prefix(events_path: Path) -> tuple[int, int]:
    """(prompt tokens, cached prefix tokens) of a run's answered LLM calls (``llm_calls.cached_prefix_tokens``)."""
    db = sqlite3.connect(events_path)
    try:
        prompt, cached = db.execute("SELECT SUM(prompt_tokens), SUM(cached_prefix_tokens) FROM llm_calls "
                                    "WHERE status IN ('ok', 'cached')").fetchone()
    finally:
        db.close()
    return int(prompt or 0), int(cached or 0)


@dataclass
class Forecast:
    """The dry runs' counts: ``rows[disposition]`` per purpose, the typical run's days and
    cacheable prefix, the scenario's rounds and prices, and the priors the stand-in used."""

    rows: dict[float, Rows]
    days: dict[str, tuple[int, int, int]]
    prefix: tuple[int, int]
    rounds: int
    llm_config: Any = None
    priors: list[Any] = field(default_factory=list)

    @property
    def typical(self) -> Rows:
        return self.rows[1.0]

    def totals(self, disposition: float = 1.0) -> tuple[int, int, int]:
        rows = self.rows[disposition].values()
        return sum(r[0] for r in rows), sum(r[1] for r in rows), sum(r[2] for r in rows)

    def span(self, purpose: str | None, column: int) -> tuple[int, int] | None:
        """(lowest, highest) of a purpose's (or, None, the total's) column over the dry runs."""
        if len(self.rows) < 2:
            return None
        values = [(self.totals(d) if purpose is None else tuple(rows.get(purpose, [0, 0, 0])))[column] for d, rows in self.rows.items()]
        return min(values), max(values)

    def lines(self, scenario: str) -> list[str]:
        from townsquare.api.commands import DEFAULT_COMPLETION_TOKENS, cost_of, format_table, prices_of

        prices = prices_of(self.llm_config) if self.llm_config is not None else None

        def cost(pt: int, ct: int) -> float | None:
            return cost_of(pt, ct, prices)

        def ranged(purpose: str | None, column: int) -> str:
            span = self.span(purpose, column)
            return "" if span is None else f"{span[0]:,}-{span[1]:,}"

        ranges = len(self.rows) > 1
        header = ("purpose", "calls", *(("range",) if ranges else ()), "prompt tokens", *(("range",) if ranges else ()),
                  "completion tokens", "cost")
        purposes = sorted(set().union(*(rows.keys() for rows in self.rows.values())))
        table = []
        for purpose in [*purposes, None]:
            c, pt, ct = self.totals() if purpose is None else tuple(self.typical.get(purpose, [0, 0, 0]))
            table.append((purpose or "total", c, *((ranged(purpose, 0),) if ranges else ()), pt,
                          *((ranged(purpose, 1),) if ranges else ()), ct, cost(pt, ct)))
        out = [f"ESTIMATE for {scenario} ({self.rounds} rounds): the run played on a stand-in that answers as the designs "
               "declare a typical model does (not a language model)"
               + ("; the range plays a model that acts half as much and half again as much." if ranges else ".")]
        out += format_table(header, table)
        if len(self.days) > 1:
            out.append("per simulated day (typical):")
            out += format_table(("day", "calls", "prompt tokens", "completion tokens", "cost"),
                                [(day, c, pt, ct, cost(pt, ct)) for day, (c, pt, ct) in self.days.items()])
        out.append("prompt tokens ~ characters / 4; completion tokens as expected per call "
                   f"(decisions {DEFAULT_COMPLETION_TOKENS['labels']}, JSON {DEFAULT_COMPLETION_TOKENS['json']}, "
                   f"text {DEFAULT_COMPLETION_TOKENS['text']}; --completion-tokens PURPOSE=N); retries and repairs of malformed answers not included.")
        if self.priors:
            out.append("typical answers declared for: " + "; ".join(
                f"{p.purpose} ({describe_prior(p)})" for p in sorted(self.priors, key=lambda p: p.purpose)))
        if prices is not None:
            out.append(f"prices: {prices[0]} / {prices[1]} per 1k prompt / completion tokens, from the scenario's [llm] table.")
        else:
            out.append("no price table: set llm.price_prompt_per_1k and llm.price_completion_per_1k for a cost.")
        out.append(cache_line(*self.prefix, self.llm_config))
        return out


def describe_prior(prior: Any) -> str:
    if prior.shares:
        return ", ".join(f"{label} {share:.0%}" for label, share in prior.shares.items())
    return prior.note.split(";")[0] if prior.note else "a typical answer"


def forecast_run(scenario: str, plugins: Any, *, overrides: Iterable[str] = (), seed: int | None = None,
                 completion_tokens: dict[str, int] | None = None, dispositions: Iterable[float] = DISPOSITIONS,
                 on_dry_run: Callable[[float], None] | None = None) -> Forecast:
    """Play ``scenario`` once per disposition (:func:`townsquare.api.commands.estimate_scenario`,
    on the typical model with ``plugins``' priors) and gather the counts (see the module's doc)."""
    from townsquare.api.commands import answer_priors, estimate_scenario

    rows: dict[float, Rows] = {}
    days: dict[str, tuple[int, int, int]] = {}
    prefix = (0, 0)
    used: set[str] = set()
    scenario_model = None
    for disposition in dispositions:
        if on_dry_run is not None:
            on_dry_run(disposition)
        estimate = estimate_scenario(scenario, overrides=list(overrides), seed=seed, completion_tokens=completion_tokens,
                                     disposition=disposition, plugins=plugins,
                                     read=lambda events: (calls_per_day(events), cached_prefix(events)))
        if disposition == 1.0:
            days, prefix = estimate.read
        rows[disposition] = {purpose: list(row) for purpose, row in estimate.model.rows.items()}
        used |= estimate.model.used
        scenario_model = estimate.scenario
    llm = scenario_model.llm
    return Forecast(rows=rows, days=days, prefix=prefix, rounds=scenario_model.model.rounds,
                    llm_config=llm.config if llm is not None else None,
                    priors=[p for p in answer_priors(plugins) if p.purpose in used])
