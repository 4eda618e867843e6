"""Human validation of the judges (the paper's Table 2 asks people to grade answers too).

``personagym_raters.csv`` (written by every evaluation) holds one row per answer, in a seeded
shuffled order that hides which design answered: ``item``, the task and its rubric (the task's
description and five score levels), the persona, the question, the answer, and an empty
``grade`` column (1-5) with a ``comment``. ``personagym_raters_key.json`` maps each item to
its design, persona and question (for the command, not for the raters). A rater fills in
``grade`` and returns the file; ``townsquare eval personagym-grades OUT FILE...`` reads every
returned file (one rater each, named by the file's stem), checks it (an unknown item, a grade
other than 1-5: one line naming the file and row, exit 2), and prints the per-grader table and
Krippendorff's alpha of the LLM judges, of the humans and of all together, plus the Spearman
correlation of the judges' mean with the humans' mean per item (:mod:`.agreement`).
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any, Mapping, Sequence

from townsquare.api import UsageError
from townsquare.lib.stats import spearman as rank_correlation

from .benchmark_data import Task

RATERS_CSV = "personagym_raters.csv"
RATERS_KEY = "personagym_raters_key.json"
HUMAN_GRADES = "personagym_human_grades.json"
COLUMNS = ("item", "task", "rubric", "persona", "question", "answer", "grade", "comment")


def item_key(design: str, persona: int, question: int) -> str:
    return f"{design}|{persona}|{question}"


def judge_grades(results_by_design: Mapping[str, Sequence[Any]], judges: Sequence[str]) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """(judge -> item -> grade, item -> task) from an evaluation's results."""
    grades: dict[str, dict[str, float]] = {j: {} for j in judges}
    tasks: dict[str, str] = {}
    for design, results in results_by_design.items():
        for p, result in enumerate(results):
            for q, question in enumerate(_questions(result)):
                key = item_key(design, p, q)
                tasks[key] = question["task"]
                for judge in judges:
                    grade = (question.get("grades") or {}).get(judge)
                    if isinstance(grade, (int, float)):
                        grades[judge][key] = float(grade)
    return grades, tasks


def _questions(result: Any) -> list[dict[str, Any]]:
    return result["questions"] if isinstance(result, dict) else [
        {"task": q.task, "question": q.question, "answer": q.answer, "grades": q.grades} for q in result.questions]


def _description(result: Any) -> str:
    return result["description"] if isinstance(result, dict) else result.description


def write_raters_file(out: Path, results_by_design: Mapping[str, Sequence[Any]], tasks: Mapping[str, Task], seed: int = 0) -> Path:
    """The blank grading sheet and its key (see the module docstring)."""
    rows, key = [], {}
    for design, results in results_by_design.items():
        for p, result in enumerate(results):
            for q, question in enumerate(_questions(result)):
                rows.append((item_key(design, p, q), question, _description(result)))
    random.Random(seed).shuffle(rows)
    path = out / RATERS_CSV
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(COLUMNS)
        for n, (full, question, persona) in enumerate(rows, 1):
            item = f"item-{n:05d}"
            key[item] = full
            task = tasks[question["task"]]
            writer.writerow([item, task.title, f"{task.description}\n{task.criteria_lines()}", persona, question["question"],
                             question["answer"], "", ""])
    (out / RATERS_KEY).write_text(json.dumps(key, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def read_rated(path: Path, key: Mapping[str, str]) -> dict[str, float]:
    """item -> grade of one returned sheet (blank grades are left out)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{path}: cannot read the grading sheet ({exc})") from None
    if not rows or "item" not in rows[0] or "grade" not in rows[0]:
        raise UsageError(f"{path}: not a grading sheet (expected the columns item and grade, as in {RATERS_CSV})")
    grades = {}
    for line, row in enumerate(rows, 2):
        item, raw = (row.get("item") or "").strip(), (row.get("grade") or "").strip()
        if item not in key:
            raise UsageError(f"{path}: row {line}: unknown item {item!r} (not in this evaluation's {RATERS_KEY})")
        if not raw:
            continue
        try:
            value = float(raw)
        except ValueError:
            value = 0.0
        if value not in (1, 2, 3, 4, 5):
            raise UsageError(f"{path}: row {line}: grade {raw!r} is not 1, 2, 3, 4 or 5")
        grades[key[item]] = value
    return grades


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None below three pairs or with no spread."""
    if len(a) < 3 or len(a) != len(b):
        return None
    return rank_correlation(a, b)


def judges_against_humans(grades: Mapping[str, Mapping[str, float]], judges: Sequence[str], humans: Sequence[str],
                          items_of: Sequence[str] | None = None) -> tuple[int, float | None]:
    """(items graded by both, Spearman's rho of the judges' mean and the humans' mean per item);
    ``items_of``: only these items (one task's)."""
    items = sorted(i for i in {i for h in humans for i in grades.get(h, {})}
                   if any(i in grades.get(j, {}) for j in judges) and (items_of is None or i in items_of))
    judged = [sum(grades[j][i] for j in judges if i in grades[j]) / sum(1 for j in judges if i in grades[j]) for i in items]
    human = [sum(grades[h][i] for h in humans if i in grades[h]) / sum(1 for h in humans if i in grades[h]) for i in items]
    return len(items), spearman(judged, human)


def agreement_by_task(grades: Mapping[str, Mapping[str, float]], judges: Sequence[str], humans: Sequence[str],
                      tasks_by_item: Mapping[str, str]) -> list[tuple[str, int, float | None, float | None]]:
    """Per task and over all (the paper's Table 2 reports both statistics per task): (task,
    answers graded by judges and people, Spearman's rho, Kendall's tau-b) of the judges' mean
    against the people's mean per answer."""
    from townsquare.lib.stats import kendall_tau

    from .benchmark_data import TASKS

    rows = []
    for task in (*TASKS, "all"):
        chosen = [i for i, t in tasks_by_item.items() if task == "all" or t == task]
        items = sorted(i for i in chosen if any(i in grades.get(h, {}) for h in humans) and any(i in grades.get(j, {}) for j in judges))
        judged = [sum(grades[j][i] for j in judges if i in grades[j]) / sum(1 for j in judges if i in grades[j]) for i in items]
        human = [sum(grades[h][i] for h in humans if i in grades[h]) / sum(1 for h in humans if i in grades[h]) for i in items]
        rows.append((task, len(items), spearman(judged, human), kendall_tau(judged, human)))
    return rows
