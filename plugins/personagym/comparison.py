"""Two designs or more evaluated together (``townsquare eval personagym A B ...``): per task and
for PersonaScore, the paired difference over personas with its 95 % interval and a paired test.

Persona i of every design is the same persona (the same description, the same questions, the
same score examples, the same judges: :mod:`.evaluation`), so the designs' scores pair by
persona. For each design after the first (the reference A) and each task: d_i = score_B(i) -
score_A(i) over the personas both scored; the mean of d, its Student-t 95 % interval
(mean +- t_{0.975, n-1} s_d / sqrt(n)) and the paired two-sided t-test's p-value
(:func:`townsquare.api.paired_test`), n the pairs. Below two pairs there is no interval.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from townsquare.api import mean_interval, paired_test

from .benchmark_data import TASKS
from .persona_score import persona_score, task_scores

COLUMNS = (*TASKS, "persona_score")


def per_persona(results: Sequence[Any]) -> list[dict[str, float | None]]:
    """Each persona's five task scores and PersonaScore, in the results' order."""
    by = task_scores((str(i), q.task, q.score) for i, r in enumerate(results) for q in r.questions)
    out = []
    for i in range(len(results)):
        scores = dict(by.get(str(i), {}))
        out.append({**{t: scores.get(t) for t in TASKS}, "persona_score": persona_score(scores)})
    return out


def paired(results_by_design: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """One row per (design after the first, task or PersonaScore)."""
    labels = list(results_by_design)
    reference = per_persona(results_by_design[labels[0]])
    rows = []
    for label in labels[1:]:
        other = per_persona(results_by_design[label])
        for key in COLUMNS:
            pairs = [(a[key], b[key]) for a, b in zip(reference, other) if a[key] is not None and b[key] is not None]
            a_values, b_values = [p[0] for p in pairs], [p[1] for p in pairs]
            diff = mean_interval([b - a for a, b in pairs])
            test = paired_test(b_values, a_values)
            rows.append({"reference": labels[0], "design": label, "task": key, "pairs": len(pairs),
                         "mean_reference": _mean(a_values), "mean_design": _mean(b_values),
                         "difference": _num(diff.mean), "low": _num(diff.low), "high": _num(diff.high),
                         "t": _num(test.t), "p": _num(test.p)})
    return rows


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _num(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


TITLES = {"expected_action": "Expected Action", "linguistic_habits": "Linguistic Habits", "persona_consistency": "Persona Consistency",
          "toxicity_control": "Toxicity Control", "action_justification": "Action Justification", "persona_score": "PersonaScore"}


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The printed comparison: one block per design against the reference."""
    def f(value: float | None, signed: bool = False) -> str:
        return "-" if value is None else (f"{value:+.2f}" if signed else f"{value:.2f}")

    lines: list[str] = []
    for design in dict.fromkeys(r["design"] for r in rows):
        mine = [r for r in rows if r["design"] == design]
        reference = mine[0]["reference"]
        lines.append(f"{design} - {reference}: paired over personas (same questions, examples and judges)")
        head = f"{'task':<22} {reference[:12]:>12} {design[:12]:>12} {'difference':>10}  {'95% interval':>17} {'p':>7} {'pairs':>5}"
        lines.append(head)
        for r in mine:
            interval = "-" if r["low"] is None else f"[{r['low']:+.2f}, {r['high']:+.2f}]"
            p = "-" if r["p"] is None else (f"{r['p']:.3f}" if r["p"] >= 0.001 else "<0.001")
            lines.append(f"{TITLES[r['task']]:<22} {f(r['mean_reference']):>12} {f(r['mean_design']):>12} "
                         f"{f(r['difference'], True):>10}  {interval:>17} {p:>7} {r['pairs']:>5}")
        lines.append("")
    lines.append("difference = design - reference, mean over personas; 95% Student-t interval; p: paired two-sided t-test")
    return lines
