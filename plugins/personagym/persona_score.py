"""PersonaScore (Samuel et al. §3.1, §3.2 "Ensembled Evaluation", Table 1).

* Ensemble: each of the n evaluator models E_k grades every answer 1-5; the question's score is
  the mean over the evaluators, S_t = (1/n) sum_k S_{k,t}. An evaluator whose grade could not be
  read (after its repair request) is left out of that question's mean, so n counts the
  evaluators that graded it; a question no evaluator graded has no score.
* Task score: the mean of the scores of the task's questions, per persona.
* PersonaScore: the mean of the five task scores. A persona with a task that has no scored
  question has no PersonaScore (shown as "-"): a mean of four tasks would not compare with
  the paper's.
* Over personas (Table 1): per task and for PersonaScore, the mean over personas and, in
  brackets, the standard deviation over personas (population, ddof = 0; the paper does not
  say which).
* Intervals (ours; the paper reports none): a 95 % percentile interval for every mean by the
  two-stage bootstrap, personas resampled and then each persona's questions within each task
  (:func:`townsquare.api.two_stage_bootstrap`, :data:`BOOTSTRAP_ROUNDS` resamples, seeded), so
  the spread between personas and that between one persona's questions both count.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from townsquare.lib.stats import two_stage_bootstrap

from .benchmark_data import TASKS

#: bootstrap resamples behind every interval (a setting of ours)
BOOTSTRAP_ROUNDS = 2000


def ensemble(grades: Iterable[float | None]) -> float | None:
    """The mean of the evaluators' grades that were read; None when none was."""
    read = [float(g) for g in grades if g is not None]
    return sum(read) / len(read) if read else None


def task_scores(question_scores: Iterable[tuple[str, str, float | None]]) -> dict[str, dict[str, float]]:
    """persona -> task -> mean score of its scored questions, from (persona, task, score) rows."""
    sums: dict[str, dict[str, list[float]]] = {}
    for persona, task, score in question_scores:
        if score is not None:
            sums.setdefault(persona, {}).setdefault(task, []).append(float(score))
    return {p: {t: sum(v) / len(v) for t, v in by_task.items()} for p, by_task in sums.items()}


def persona_score(scores: Mapping[str, float], tasks: Sequence[str] = TASKS) -> float | None:
    """The mean of the five task scores; None if a task has none."""
    if any(scores.get(t) is None for t in tasks):
        return None
    return sum(float(scores[t]) for t in tasks) / len(tasks)


def mean_std(values: Iterable[float | None]) -> tuple[float | None, float | None, int]:
    """(mean, population standard deviation, count) of the values that are not None."""
    read = [float(v) for v in values if v is not None]
    if not read:
        return None, None, 0
    mean = sum(read) / len(read)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in read) / len(read)), len(read)


def summary(by_persona: Mapping[str, Mapping[str, float]], tasks: Sequence[str] = TASKS) -> dict[str, tuple[float | None, float | None, int]]:
    """task (and ``"persona_score"``) -> (mean, std, personas) over personas (Table 1's cells)."""
    out = {t: mean_std(scores.get(t) for scores in by_persona.values()) for t in tasks}
    out["persona_score"] = mean_std(persona_score(scores, tasks) for scores in by_persona.values())
    return out


def intervals(question_scores: Iterable[tuple[str, str, float | None]], tasks: Sequence[str] = TASKS, rounds: int = BOOTSTRAP_ROUNDS,
              seed: int = 0) -> dict[str, tuple[float, float] | None]:
    """task (and ``"persona_score"``) -> the 95 % two-stage bootstrap interval of its mean over
    personas, from (persona, task, question score) rows (see the module docstring)."""
    by: dict[str, dict[str, list[float]]] = {}
    for persona, task, score in question_scores:
        if score is not None:
            by.setdefault(persona, {}).setdefault(task, []).append(float(score))
    units = [[scores.get(t, []) for t in tasks] for scores in by.values()]
    per_task, overall = two_stage_bootstrap(units, rounds=rounds, seed=seed)
    out = dict(zip(tasks, per_task or [None] * len(tasks)))
    out["persona_score"] = overall
    return out
