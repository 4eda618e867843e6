"""The report's "SoMe evaluation" section: the table ``townsquare eval some`` wrote to
``RUN/some/summary.json`` (Xue et al.'s tables 3 and 4: ACC or judged score, and TCR, per task),
with the agent and judge models, the split, the warnings (a judge that is the agent's own model)
and the notes. Absent when the run was not evaluated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import html
from .html import Number


def some_section(run_path: str | Path) -> str | None:
    path = Path(run_path) / "some" / "summary.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tasks = list(data["tasks"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return html.none(f"{path} could not be read ({exc})")
    rows = [[t.get("short"), t.get("queries"), _number(t.get("accuracy")), _number(t.get("score")), _number(t.get("tcr")),
             _number(t.get("mean_tool_calls"), 2), t.get("tool_errors"), t.get("repairs"),
             (t.get("unparsable") or 0) + (t.get("llm_failures") or 0)] for t in tasks if isinstance(t, dict)]
    metrics = [t.get("accuracy") if t.get("accuracy") is not None else t.get("score") for t in tasks if isinstance(t, dict)]
    metrics = [m for m in metrics if isinstance(m, (int, float))]
    lead = html.note(
        f"Agent {_text(data.get('agent_model'))}, judged by {_text(', '.join(data.get('judges') or []))}; ground truth from "
        f"{'the run, labels from round ' + str(data.get('split')) + ' on' if data.get('source') == 'run' else _text(data.get('source'))}; "
        f"{data.get('llm_calls', 0)} LLM calls in {data.get('wall_seconds', 0)} s. ACC and judged scores are 0–100 "
        "(judges rate 0–5 per criterion), TCR is the share of queries completed.")
    # warnings first (a judge that is the agent's own model grades its own answers), then notes
    notes = "".join(f"<p><strong>{html.escape(_text(w))}</strong></p>" for w in data.get("warnings") or [])
    notes += "".join(html.note(_text(n)) for n in data.get("notes") or [])
    mean = html.note(f"Mean of ACC/score over {len(metrics)} tasks: {sum(metrics) / len(metrics):.1f}") if metrics else ""
    headers = ["task", "queries", "ACC", "score", "TCR", "tool calls / query", "tool errors", "repairs", "unfinished"]
    return lead + html.table(headers, rows) + mean + notes


def _number(value: Any, digits: int = 1) -> Any:
    return Number(f"{value:.{digits}f}") if isinstance(value, (int, float)) else None


def _text(value: Any) -> str:
    return "" if value is None else str(value)
