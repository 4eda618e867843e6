"""How far the graders agree: a per-grader table and Krippendorff's alpha.

A grader is an LLM judge (``--judge``) or a human rater (grades read back with ``townsquare eval
personagym-grades``); an item is one answer to one question (``design|persona|question``
positions). The table gives, per grader, the items graded, the mean grade and its mean per
task. Agreement is **Krippendorff's alpha with the interval metric** (Krippendorff 2011,
"Computing Krippendorff's alpha-reliability"): grades 1-5 as numbers, any number of graders,
missing grades allowed; alpha = 1 - D_o / D_e, with

* D_o = (1/n) sum_u [ sum_{i != j in u} (v_i - v_j)^2 / (m_u - 1) ] over the items u that hold
  m_u >= 2 grades (n: the grades in those items),
* D_e = sum_{i != j} (v_i - v_j)^2 / (n (n - 1)) over all those grades pooled.

1 is perfect agreement, 0 what chance gives, below 0 systematic disagreement; None where it is
undefined (fewer than two items with two grades, or every grade the same).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .benchmark_data import TASKS

#: grader -> item -> grade
Grades = Mapping[str, Mapping[str, float]]


def _pair_sum(values: Sequence[float]) -> float:
    """sum over ordered pairs i != j of (v_i - v_j)^2 = 2 (m sum v^2 - (sum v)^2)."""
    m, total, squares = len(values), sum(values), sum(v * v for v in values)
    return 2.0 * (m * squares - total * total)


def krippendorff_alpha(units: Sequence[Sequence[float]]) -> float | None:
    """Krippendorff's alpha (interval metric) of ``units``, each the grades one item got."""
    pairable = [list(map(float, u)) for u in units if len(u) >= 2]
    n = sum(len(u) for u in pairable)
    if len(pairable) < 2 or n < 2:
        return None
    observed = sum(_pair_sum(u) / (len(u) - 1) for u in pairable) / n
    expected = _pair_sum([v for u in pairable for v in u]) / (n * (n - 1))
    return None if expected == 0 else 1.0 - observed / expected


def alpha_of(grades: Grades, graders: Sequence[str], items: Sequence[str] | None = None) -> float | None:
    """Alpha of ``graders`` over ``items`` (default: every item any of them graded)."""
    keys = items if items is not None else sorted({i for g in graders for i in grades.get(g, {})})
    return krippendorff_alpha([[grades[g][i] for g in graders if i in grades.get(g, {})] for i in keys])


def task_of(item: str, tasks_by_item: Mapping[str, str]) -> str:
    return tasks_by_item.get(item, "")


def grader_rows(grades: Grades, tasks_by_item: Mapping[str, str]) -> list[tuple]:
    """Per grader: (grader, items graded, mean grade, mean per task...)."""
    rows = []
    for grader, mine in grades.items():
        values = list(mine.values())
        per_task = []
        for task in TASKS:
            scores = [v for item, v in mine.items() if tasks_by_item.get(item) == task]
            per_task.append(sum(scores) / len(scores) if scores else None)
        rows.append((grader, len(values), sum(values) / len(values) if values else None, *per_task))
    return rows


def alpha_rows(grades: Grades, tasks_by_item: Mapping[str, str], groups: Mapping[str, Sequence[str]]) -> list[tuple]:
    """Per group of graders (``"LLM judges"``, ``"humans"``, ``"all"``): alpha over every item
    and per task."""
    rows = []
    for name, graders in groups.items():
        if len(graders) < 2:
            continue
        items = sorted({i for g in graders for i in grades.get(g, {})})
        per_task = [alpha_of(grades, graders, [i for i in items if tasks_by_item.get(i) == t]) for t in TASKS]
        rows.append((name, ", ".join(graders), alpha_of(grades, graders, items), *per_task))
    return rows


def format_rows(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    def cell(value: object) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.2f}"
        return str(value)

    table = [list(header)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return ["  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))) for r in table]


SHORT = {"expected_action": "Expected", "linguistic_habits": "Linguistic", "persona_consistency": "Consistency",
         "toxicity_control": "Toxicity", "action_justification": "Justifying"}


def report_lines(grades: Grades, tasks_by_item: Mapping[str, str], groups: Mapping[str, Sequence[str]]) -> list[str]:
    """The per-grader table and, with two graders or more, the agreement table."""
    lines = format_rows(("grader", "items", "mean", *(SHORT[t] for t in TASKS)), grader_rows(grades, tasks_by_item))
    alphas = alpha_rows(grades, tasks_by_item, groups)
    if alphas:
        lines += ["", "agreement: Krippendorff's alpha (interval metric; 1 = perfect, 0 = chance)"]
        lines += format_rows(("graders", "who", "all tasks", *(SHORT[t] for t in TASKS)), alphas)
    return lines
