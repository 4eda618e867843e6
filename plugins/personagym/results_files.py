"""What ``townsquare eval personagym`` prints and writes.

* the table: one row per persona (agent), one column per task and PersonaScore, then the mean
  over personas with the standard deviation in brackets (the layout of the paper's Table 1)
  and its 95 % two-stage bootstrap interval (:func:`.persona_score.intervals`);
* ``personagym_scores.csv``: the same rows (one per persona);
* ``personagym_questions.csv``: one row per question: task, environment, question, answer,
  each evaluator's grade and the ensemble score;
* ``personagym.json``: everything (settings, where the questions and rubrics came from, the
  environments, score examples and grades) plus ``scores``, the summary in the format of the
  released ``evaluations/*/scores.json`` (task title -> mean, ``PersonaScore``);
* with several designs, in the output folder: ``personagym_comparison.csv`` and
  ``personagym_comparison.json`` (the paired differences of :mod:`.comparison`, the judges'
  table and agreement); each design's three files in its own folder;
* ``personagym_raters.csv`` and its key (:mod:`.raters`), for human graders.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Sequence

from .benchmark_data import TASK_NAMES, TASKS
from .evaluation import PersonaResult
from .persona_score import intervals, persona_score, summary, task_scores

RESULTS_FILE = "personagym.json"
INTERVAL_METHOD = ("95 % percentile interval, two-stage bootstrap: personas resampled with replacement, then each "
                   "persona's questions within each task, 2,000 resamples, seed 0")
SCORES_CSV = "personagym_scores.csv"
QUESTIONS_CSV = "personagym_questions.csv"
SHORT = {"expected_action": "Expected", "linguistic_habits": "Linguistic", "persona_consistency": "Consistency",
         "toxicity_control": "Toxicity", "action_justification": "Justifying"}


def scores_by_persona(results: Sequence[PersonaResult]) -> dict[str, dict[str, float]]:
    return task_scores((r.agent_id, q.task, q.score) for r in results for q in r.questions)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(results: Sequence[PersonaResult]) -> str:
    """The per-persona x per-task table, with the mean (std) over personas last."""
    by = scores_by_persona(results)
    width = max([len("persona")] + [len(f"{r.name} ({r.agent_id})") for r in results] + [len("mean (std)")])
    columns = [*TASKS, "persona_score"]
    names = [*(SHORT[t] for t in TASKS), "PersonaScore"]
    lines = [f"{'persona':<{width}}  " + "  ".join(f"{n:>12}" for n in names)]
    for r in results:
        scores = by.get(r.agent_id, {})
        cells = [_cell(scores.get(t)) for t in TASKS] + [_cell(persona_score(scores))]
        lines.append(f"{r.name + ' (' + r.agent_id + ')':<{width}}  " + "  ".join(f"{c:>12}" for c in cells))
    totals = summary({r.agent_id: by.get(r.agent_id, {}) for r in results})
    cells = [f"{_cell(m)} ({_cell(s)})" if m is not None else "-" for m, s, _ in (totals[c] for c in columns)]
    lines.append(f"{'mean (std)':<{width}}  " + "  ".join(f"{c:>12}" for c in cells))
    bounds = score_intervals(results)
    cells = ["-" if bounds[c] is None else f"[{bounds[c][0]:.2f},{bounds[c][1]:.2f}]" for c in columns]
    lines.append(f"{'95% interval':<{width}}  " + "  ".join(f"{c:>12}" for c in cells))
    return "\n".join(lines)


def score_intervals(results: Sequence[PersonaResult]) -> dict[str, tuple[float, float] | None]:
    """Each column's 95 % two-stage bootstrap interval (personas, then their questions)."""
    return intervals((r.agent_id, q.task, q.score) for r in results for q in r.questions)


def released_format(results: Sequence[PersonaResult]) -> dict[str, float | None]:
    """The summary keyed like the released ``scores.json`` files, rounded to 2 places."""
    totals = summary(scores_by_persona(results))
    out = {TASK_NAMES[t][0]: _round(totals[t][0]) for t in sorted(TASKS, key=lambda t: TASK_NAMES[t][0])}
    out["PersonaScore"] = _round(totals["persona_score"][0])
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def write(out: Path, results: Sequence[PersonaResult], info: dict[str, Any], judges: Sequence[str]) -> list[Path]:
    """Write the three files into ``out``; returns their paths."""
    by = scores_by_persona(results)
    totals = summary({r.agent_id: by.get(r.agent_id, {}) for r in results})
    bounds = score_intervals(results)
    payload = {
        **info,
        "judges": list(judges),
        "scores": released_format(results),
        "summary": {k: {"mean": m, "std": s, "personas": n, "interval": bounds[k]} for k, (m, s, n) in totals.items()},
        "interval_method": INTERVAL_METHOD,
        "personas": [{**r.to_dict(), "task_scores": by.get(r.agent_id, {}), "persona_score": persona_score(by.get(r.agent_id, {}))}
                     for r in results],
    }
    paths = [out / RESULTS_FILE, out / SCORES_CSV, out / QUESTIONS_CSV]
    paths[0].write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    with open(paths[1], "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["agent_id", "name", "population", *TASKS, "persona_score", "questions", "environments"])
        for r in results:
            scores = by.get(r.agent_id, {})
            writer.writerow([r.agent_id, r.name, r.population, *(_csv(scores.get(t)) for t in TASKS),
                             _csv(persona_score(scores)), len(r.questions), "; ".join(r.environments)])
    with open(paths[2], "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["agent_id", "task", "environment", "question", "answer", *(f"grade:{j}" for j in judges), "score"])
        for r in results:
            for q in r.questions:
                writer.writerow([r.agent_id, q.task, q.environment or "", q.question, q.answer,
                                 *(_csv(q.grades.get(j)) for j in judges), _csv(q.score)])
    return paths


def _csv(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


COMPARISON_JSON = "personagym_comparison.json"
COMPARISON_CSV = "personagym_comparison.csv"


def write_comparison(out: Path, rows: Sequence[dict[str, Any]], info: dict[str, Any]) -> list[Path]:
    """The paired differences (one row per design and task) as JSON (with ``info``) and CSV."""
    paths = [out / COMPARISON_JSON, out / COMPARISON_CSV]
    paths[0].write_text(json.dumps({**info, "paired": list(rows)}, indent=1, ensure_ascii=False), encoding="utf-8")
    with open(paths[1], "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["design"])
        writer.writeheader()
        writer.writerows(rows)
    return paths
