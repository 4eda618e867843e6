"""The report's PersonaGym section: the results of ``townsquare eval personagym RUN`` (Samuel et
al.), read from ``RUN/personagym/personagym.json`` (the command's default folder) or any
``RUN/*/personagym.json``: the mean (std) per task and PersonaScore over personas (the layout of
the paper's Table 1), one row per persona, the score distribution (each task's question
scores, the judges' mean per question, and the personas' PersonaScores), the judges' table with
Krippendorff's alpha, and the warnings (a judge or the question generator that is the model under
test). Absent when the run has no evaluation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import structlog

from . import html
from .figures import _figure, _png

log = structlog.get_logger("townsquare.plugins.report")

RESULTS_FILE = "personagym.json"
TASKS = ("expected_action", "linguistic_habits", "persona_consistency", "toxicity_control", "action_justification")
TITLES = {"expected_action": "Expected Action", "linguistic_habits": "Linguistic Habits",
          "persona_consistency": "Persona Consistency", "toxicity_control": "Toxicity Control",
          "action_justification": "Action Justification", "persona_score": "PersonaScore"}


def find_results(run_path: Path) -> list[Path]:
    """The evaluation files of a run, the default folder's first."""
    found = [run_path / "personagym" / RESULTS_FILE, run_path / RESULTS_FILE, *sorted(run_path.glob(f"*/{RESULTS_FILE}"))]
    return list(dict.fromkeys(p for p in found if p.is_file()))


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("report.personagym_unreadable", path=str(path), error=str(exc))
        return None
    return data if isinstance(data, dict) and isinstance(data.get("personas"), list) else None


def _num(value: Any) -> Any:
    return html.Number(f"{value:.2f}") if isinstance(value, (int, float)) else None


def distribution_figure(results: dict[str, Any]) -> bytes:
    """Left: each task's question scores (box and points); right: PersonaScore per persona."""
    fig, (left, right) = _figure(10.0, 3.6, cols=2)
    per_task = [[q["score"] for p in results["personas"] for q in p.get("questions", [])
                 if q.get("task") == t and isinstance(q.get("score"), (int, float))] for t in TASKS]
    positions = [i for i, scores in enumerate(per_task, 1) if scores]
    if positions:
        left.boxplot([per_task[i - 1] for i in positions], positions=positions, widths=0.5, showfliers=False)
        for i in positions:
            scores = per_task[i - 1]
            jitter = [i + 0.18 * ((k * 0.618) % 1 - 0.5) for k in range(len(scores))]
            left.scatter(jitter, scores, s=10, alpha=0.5, color="#29335c")
    left.set_xticks(range(1, len(TASKS) + 1), [TITLES[t].replace(" ", "\n") for t in TASKS], fontsize="small")
    left.set(title="Question scores per task (mean of the judges)", ylabel="score", ylim=(0.5, 5.5))
    persona_scores = [p["persona_score"] for p in results["personas"] if isinstance(p.get("persona_score"), (int, float))]
    if persona_scores:
        right.hist(persona_scores, bins=[1 + 0.25 * k for k in range(17)], color="#2a9d8f", edgecolor="white")
    right.set(title="PersonaScore per persona", xlabel="PersonaScore", ylabel="personas", xlim=(1, 5))
    return _png(fig)


def section_body(results: dict[str, Any], source: str) -> str:
    summary = results.get("summary", {})
    rows = [(TITLES[k], _num(summary.get(k, {}).get("mean")), _num(summary.get(k, {}).get("std")),
             summary.get(k, {}).get("personas", 0)) for k in (*TASKS, "persona_score")]
    body = html.table(("task", "mean", "std over personas", "personas"), rows)
    body += html.image(distribution_figure(results), "PersonaGym score distribution")
    persona_rows = [(p.get("name", ""), p.get("agent_id", ""), *(_num(p.get("task_scores", {}).get(t)) for t in TASKS),
                     _num(p.get("persona_score")), len(p.get("questions", []))) for p in results["personas"]]
    body += html.table(("persona", "agent", *(TITLES[t] for t in TASKS), "PersonaScore", "questions"), persona_rows)
    agreement = results.get("judge_agreement") or {}
    judge_rows = [(j.get("judge"), j.get("items"), _num(j.get("mean")), *(_num(j.get(t)) for t in TASKS))
                  for j in agreement.get("judges") or [] if isinstance(j, dict)]
    if judge_rows:
        body += html.table(("judge", "answers graded", "mean grade", *(TITLES[t] for t in TASKS)), judge_rows)
    for group, row in (agreement.get("alpha_interval") or {}).items():
        body += html.note(f"Krippendorff's alpha (interval) of the {group}: "
                          + ", ".join(f"{TITLES.get(k, k)} {'-' if v is None else f'{v:.2f}'}" for k, v in row.items() if k != "graders"))
    for warning in results.get("warnings") or []:
        body += f"<p><strong>{html.escape(str(warning))}</strong></p>"
    judges = ", ".join(results.get("judges", [])) or "the run's LLM"
    body += html.note(f"Questions: {results.get('questions', '?')}. Rubrics: {' and '.join(results.get('rubrics', []))}. "
                      f"Judges: {judges}. Each question's score is the judges' mean (1-5); a task's score the mean over its "
                      f"questions; PersonaScore the mean of the five tasks (Samuel et al. §3). From {source}.")
    return body


def personagym_section(run_path: str | Path) -> str | None:
    """The section's HTML for the run's PersonaGym evaluations (one part each), or None."""
    parts = []
    found = find_results(Path(run_path))
    for path in found:
        results = _read(path)
        if results is not None:
            head = f"<h3>{html.escape(str(path.parent.relative_to(run_path)))}</h3>" if len(found) > 1 else ""
            parts.append(head + section_body(results, str(path)))
    return "".join(parts) or None
