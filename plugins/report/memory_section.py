"""The report's memory section (Park et al.'s agents): per agent, its latest
reflections (with how many records each rests on) and its plan for the last simulated day.

Read from the newest checkpoint's memory records (:func:`townsquare.api.memory_rows`, the rows
``townsquare export`` writes as the ``memories`` table), so it works for any memory design that
keeps reflection or plan records; absent when a run has none.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Sequence

from . import html

#: agents shown, reflections per agent, plan lines per agent
MAX_AGENTS = 12
REFLECTIONS = 3
PLAN_LINES = 8


def agent_minds(rows: Sequence[Sequence[Any]]) -> dict[str, dict[str, list[tuple[str, str, int]]]]:
    """agent -> {"reflection": [(created, text, evidence count)], "plan": [...]}, oldest first;
    the plans only of the agent's last simulated day with a plan."""
    minds: dict[str, dict[str, list[tuple[str, str, int]]]] = defaultdict(lambda: {"reflection": [], "plan": []})
    for agent, _slot, _id, kind, text, created, _importance, evidence in rows:
        if kind in ("reflection", "plan"):
            minds[agent][kind].append((created or "", text or "", len(json.loads(evidence or "[]"))))
    for mind in minds.values():
        for kind in mind:
            mind[kind].sort()
        if mind["plan"]:
            last_day = mind["plan"][-1][0][:10]
            mind["plan"] = [p for p in mind["plan"] if p[0][:10] == last_day]
    return {a: m for a, m in minds.items() if m["reflection"] or m["plan"]}


def _lines(texts: Sequence[str]) -> html.Raw:
    return html.Raw("<br>".join(html.escape(t) for t in texts) or "–")


def memory_section(rows: Sequence[Sequence[Any]], names: dict[str, str]) -> str | None:
    minds = agent_minds(rows)
    if not minds:
        return None
    table_rows = []
    for agent in sorted(minds)[:MAX_AGENTS]:
        mind = minds[agent]
        reflections = [f"{text} (from {n} memories)" for _, text, n in mind["reflection"][-REFLECTIONS:]]
        day = [mind["plan"][-1][0][:10]] if mind["plan"] else []
        plan = day + [text for _, text, _ in mind["plan"][-PLAN_LINES:]]
        table_rows.append((names.get(agent, agent), _lines(reflections), _lines(plan)))
    shown = min(len(minds), MAX_AGENTS)
    return (html.table(["agent", f"latest reflections (up to {REFLECTIONS})", "plan of the last planned day"], table_rows)
            + html.note(f"{shown} of {len(minds)} agents with reflections or plans, from the newest checkpoint's "
                        "memory records (the memories table of townsquare export)."))
