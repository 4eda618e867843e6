"""The report's "Run health" section: the run-health monitors (:mod:`townsquare.plugins.monitors`)
read back from the ``metrics`` table (per monitor its last and peak value and the first round
it raised its alert), then how the structured answers came out per purpose (the mode each ran
in, and how many were constrained, parsed, repaired or fell back to a default; from
``llm_calls``, :func:`townsquare.api.answers_in_db`). Absent when there is neither."""

from __future__ import annotations

from typing import Any

from townsquare.api import answers_in_db

from . import html

#: monitor -> what its value means
MONITORS = {
    "repetition": "share of recent posts repeating the author's own earlier posts",
    "homogenisation": "mean similarity of recent posts by different agents",
    "silent_agents": "share of present agents with nothing but browsing for a window",
    "persona_drift": "mean drop of post-to-persona similarity since an agent's first posts",
    "parse_failures": "share of LLM answers that failed to parse (recent rounds)",
}


def health_section(db: Any) -> str | None:
    parts = [part for part in (monitors_part(db), answers_part(db)) if part]
    return "".join(parts) or None


def answers_part(db: Any) -> str | None:
    """The structured answers per purpose; a fallback row is flagged."""
    table = answers_in_db(db)
    if not table:
        return None
    rows = [[purpose, ", ".join(entry["modes"]) or "-", entry["constrained"], entry["parsed"], entry["repaired"], entry["fallback"]]
            for purpose, entry in table.items()]
    fallbacks = sum(entry["fallback"] for entry in table.values())
    lead = html.note(f"Structured answers (labels, openings, JSON) by purpose: {fallbacks} fell back to a default "
                     "(a parse_failure row each; the run log has a warning each)." if fallbacks else
                     "Structured answers (labels, openings, JSON) by purpose: none fell back to a default.")
    return lead + html.table(["purpose", "mode", "constrained", "parsed", "repaired", "fallback"], rows,
                             ["warn" if entry["fallback"] else "" for entry in table.values()])


def monitors_part(db: Any) -> str | None:
    rows = []
    for name, meaning in MONITORS.items():
        values = db.execute("SELECT round, value FROM metrics WHERE name = ? ORDER BY round", (f"{name}.value",)).fetchall()
        if not values:
            continue
        alert = db.execute("SELECT MIN(round) FROM metrics WHERE name = ? AND value > 0", (f"{name}.alert",)).fetchone()[0]
        peak = max(v for _, v in values)
        rows.append(([name, meaning, round(values[-1][1], 4), round(peak, 4), "—" if alert is None else f"round {alert}"],
                     "" if alert is None else "warn"))
    if not rows:
        return None
    flagged = sum(1 for _, cls in rows if cls)
    lead = (html.note(f"{flagged} of {len(rows)} monitors crossed their threshold (the run log has one warning line each; "
                      "thresholds: [plugins.NAME] threshold).") if flagged else html.note("No monitor crossed its threshold."))
    return lead + html.table(["monitor", "measures", "last", "peak", "first alert"], [r for r, _ in rows], [c for _, c in rows])
