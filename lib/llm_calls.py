"""A run's ``llm_calls`` table summed: its totals and its calls per purpose. One computation,
so every page that shows a run's LLM use (the report, the dashboard) shows the same numbers."""

from __future__ import annotations

import sqlite3
from typing import Any

#: ``parse_failure`` rows record an unusable answer, not an extra request to the provider.
NOT_A_CALL = ("parse_failure",)


def llm_totals(db: sqlite3.Connection) -> dict[str, Any]:
    calls, prompt, completion, cost, latency = db.execute(
        "SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost), AVG(latency_ms) FROM llm_calls "
        "WHERE status NOT IN (%s)" % ",".join("?" * len(NOT_A_CALL)), NOT_A_CALL).fetchone()
    return {"calls": int(calls), "prompt_tokens": int(prompt or 0), "completion_tokens": int(completion or 0),
            "cost": cost, "mean_latency_ms": latency}


def llm_by_purpose(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """Per purpose: calls, tokens, cost, mean latency and the status counts."""
    rows = db.execute(
        "SELECT COALESCE(purpose, '-'), status, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost), "
        "SUM(latency_ms) FROM llm_calls GROUP BY 1, 2").fetchall()
    out: dict[str, dict[str, Any]] = {}
    for purpose, status, n, prompt, completion, cost, latency in rows:
        row = out.setdefault(purpose, {"purpose": purpose, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                       "cost": None, "latency_ms": 0.0, "statuses": {}})
        row["statuses"][status] = int(n)
        if status in NOT_A_CALL:
            continue
        row["calls"] += int(n)
        row["prompt_tokens"] += int(prompt or 0)
        row["completion_tokens"] += int(completion or 0)
        row["latency_ms"] += float(latency or 0.0)
        if cost is not None:
            row["cost"] = (row["cost"] or 0.0) + float(cost)
    for row in out.values():
        row["mean_latency_ms"] = row.pop("latency_ms") / row["calls"] if row["calls"] else None
    return sorted(out.values(), key=lambda r: (-r["calls"], r["purpose"]))
