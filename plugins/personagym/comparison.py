"""Two designs or more evaluated together (``townsquare eval personagym A B ...``): per task and
for PersonaScore, the paired difference over personas with its 95 % interval and a paired test.

Persona i of every design is the same persona (the same description, the same questions, the
same score examples, the same judges: :mod:`.evaluation`), so the designs' scores pair by
persona. For each design after the first (the reference A) and each task: d_i = score_B(i) -
score_A(i) over the personas both scored; the mean of d, its Student-t 95 % interval
(mean +- t_{0.975, n-1} s_d / sqrt(n)) and the paired two-sided t-test's p-value
(:func:`townsquare.api.paired_test`), n the pairs. Below two pairs there is no interval.

Several comparisons (designs x tasks and PersonaScore) are one family: each p-value is also
given Holm-adjusted over all of them (:func:`townsquare.api.holm`), which holds the chance of
any false finding at 5 %.

A comparison that compares: when design B's agents sent exactly the prompts design A's did for
every question, on the same model, their answers differ by sampling alone, whatever their slots
say. :func:`identical_prompts` finds such a pair and names the slots in which the designs differ
(none of which changed a prompt); the pair then gets no t and no p (the mean difference and its
interval stay, as what sampling gives).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from townsquare.lib.stats import holm, mean_interval, paired_test

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


def prompt_overlap(a: Sequence[Any], b: Sequence[Any]) -> tuple[int, int]:
    """(questions whose prompts were the same, questions paired) of two designs' results."""
    pairs = [(qa.prompt, qb.prompt) for ra, rb in zip(a, b) for qa, qb in zip(ra.questions, rb.questions) if qa.prompt and qb.prompt]
    return sum(1 for x, y in pairs if x == y), len(pairs)


def identical_prompts(results_by_design: Mapping[str, Sequence[Any]], slots: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """design -> the one-line warning, for each design after the first that sent the reference's
    prompts for every question on the same model (``slots``: design -> slot -> component, with
    ``llm`` -> ``provider:model``)."""
    labels = list(results_by_design)
    reference, out = labels[0], {}
    for label in labels[1:]:
        same, total = prompt_overlap(results_by_design[reference], results_by_design[label])
        mine, theirs = slots.get(label, {}), slots.get(reference, {})
        if not total or same < total or mine.get("llm") != theirs.get("llm"):
            continue
        differ = [f"{slot} ({theirs.get(slot, '-')} vs {mine.get(slot, '-')})" for slot in sorted({*mine, *theirs})
                  if mine.get(slot) != theirs.get(slot)]
        why = (f"they differ in {', '.join(differ)}, which gave these personas the same prompt" if differ
               else "they fill every slot alike")
        out[label] = (f"designs {reference} and {label} sent identical prompts for all {total} questions ({why}): "
                      "the comparison measures sampling alone, no p-value is reported")
    return out


def paired(results_by_design: Mapping[str, Sequence[Any]], identical: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per (design after the first, task or PersonaScore); ``identical``: designs that
    sent the reference's prompts (:func:`identical_prompts`), which get no test."""
    identical = identical or {}
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
            same = label in identical
            rows.append({"reference": labels[0], "design": label, "task": key, "pairs": len(pairs),
                         "mean_reference": _mean(a_values), "mean_design": _mean(b_values),
                         "difference": _num(diff.mean), "low": _num(diff.low), "high": _num(diff.high),
                         "t": None if same else _num(test.t), "p": None if same else _num(test.p), "identical_prompts": same})
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = adjusted
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
        head = (f"{'task':<22} {reference[:12]:>12} {design[:12]:>12} {'difference':>10}  {'95% interval':>17} {'p':>7} "
                f"{'p (Holm)':>8} {'pairs':>5}")
        lines.append(head)
        for r in mine:
            interval = "-" if r["low"] is None else f"[{r['low']:+.2f}, {r['high']:+.2f}]"
            p, adjusted = (_p(r["p"]), _p(r["p_holm"])) if not r.get("identical_prompts") else ("same", "prompts")
            lines.append(f"{TITLES[r['task']]:<22} {f(r['mean_reference']):>12} {f(r['mean_design']):>12} "
                         f"{f(r['difference'], True):>10}  {interval:>17} {p:>7} {adjusted:>8} {r['pairs']:>5}")
        lines.append("")
    lines.append("difference = design - reference, mean over personas; 95% Student-t interval; p: paired two-sided t-test; "
                 "p (Holm): adjusted over every comparison printed")
    return lines


def _p(value: float | None) -> str:
    return "-" if value is None else (f"{value:.3f}" if value >= 0.001 else "<0.001")
