"""What ``townsquare eval personagym`` writes and prints once the evaluation is done: each
design's table and files (:mod:`.results_files`), the judges' table and agreement
(:mod:`.agreement`), the paired comparison of several designs (:mod:`.comparison`), the sheet
for human raters (:mod:`.raters`), and where the calls went."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from townsquare.api.commands import calls_line

from . import agreement, comparison, raters
from .evaluation_run import design_folder
from .results_files import table, write, write_comparison


def source_line(plan: Any) -> str:
    inputs = plan.inputs
    if inputs.given is not None:
        files = ", ".join(f.path for f in inputs.given.files)
        return f"the answered questions of {files}" + (" (all released benchmark-v1 questions)" if inputs.given.released else "")
    if plan.inputs.static is not None:
        return "the released static set (benchmark-v1)"
    where = f"environments {', '.join(inputs.fixed)}" if inputs.fixed else f"{plan.environments} environment(s) per persona"
    return f"generated: {plan.per_task} per task per environment, {where}"


def judges_report(plan: Any, results: dict[str, list[Any]]) -> tuple[list[str], dict[str, Any]]:
    """The per-judge table (and Krippendorff's alpha with two judges or more)."""
    grades, tasks = raters.judge_grades(results, plan.judge_labels)
    groups = {"LLM judges": list(plan.judge_labels)}
    lines = agreement.report_lines(grades, tasks, groups)
    saved = {"judges": [dict(zip(("judge", "items", "mean", *agreement.SHORT), row)) for row in agreement.grader_rows(grades, tasks)],
             "alpha_interval": {row[0]: dict(zip(("graders", "all", *agreement.SHORT), row[1:]))
                                for row in agreement.alpha_rows(grades, tasks, groups)}}
    return lines, saved


#: the paper's Table 1 columns, in its order
TABLE_COLUMNS = [("action_justification", "Action Justification"), ("expected_action", "Expected Action"),
                 ("linguistic_habits", "Linguistic Habits"), ("persona_consistency", "Persona Consistency"),
                 ("toxicity_control", "Toxicity Control"), ("persona_score", "PersonaScore")]
TABLE_STEM = "personagym_table"


def table_rows(plan: Any, results: dict[str, list[Any]]) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """The Table-1 rows: each design and answer file (mean and its two-stage bootstrap
    interval); on the released static questions (``--questions benchmark``, or answer files
    whose every question is one), the paper's six models beside them (mean and the Student-t
    interval from the paper's standard deviation over its 200 personas). Notes: the released
    score files' disagreements with the paper (:func:`.benchmark_data.released_scores`)."""
    from townsquare.lib.stats import t_quantile

    from .benchmark_data import PAPER_PERSONAS, PAPER_TABLE_1
    from .persona_score import summary
    from .results_files import score_intervals, scores_by_persona

    rows, notes = [], []
    for label in plan.labels:
        mine = results[label]
        by = scores_by_persona(mine)
        totals = summary({r.agent_id: by.get(r.agent_id, {}) for r in mine})
        bounds = score_intervals(mine)
        rows.append((label, {k: None if totals[k][0] is None else (totals[k][0], *(bounds[k] or (None, None))) for k, _ in TABLE_COLUMNS}))
    if plan.inputs.static is not None or (plan.inputs.given is not None and plan.inputs.given.released):
        half = t_quantile(0.975, PAPER_PERSONAS - 1) / PAPER_PERSONAS ** 0.5
        for model, cells in PAPER_TABLE_1.items():
            rows.append((f"{model} (paper)", {k: (m, m - half * sd, m + half * sd) for k, (m, sd) in cells.items()}))
        if plan.inputs.release is not None:
            notes += plan.inputs.release.released_scores()[1]
    return rows, notes


def write_table(folder: Path, plan: Any, results: dict[str, list[Any]]) -> list[str]:
    """Print and write the Table-1-shaped table (CSV, Markdown, LaTeX); returns the lines."""
    from townsquare.api.commands import table_lines, write_tables

    rows, notes = table_rows(plan, results)
    caption = ("PersonaGym scores (1-5): mean over personas [95 % interval: two-stage bootstrap over personas and their "
               "questions" + ("; the paper's rows: Student-t from its standard deviation over 200 personas" if len(rows) > len(plan.labels)
                              else "") + "].")
    paths = write_tables(folder / TABLE_STEM, TABLE_COLUMNS, rows, caption)
    return [*table_lines(TABLE_COLUMNS, rows), caption, *(f"note: released data: {n}" for n in notes),
            f"table written to {', '.join(str(p) for p in paths)}"]


def write_all(folder: Path, plan: Any, results: dict[str, list[Any]], warnings: list[str], new: int, wall: float,
              with_table: bool = False) -> list[str]:
    """Write every file; return the lines to print (``with_table``: the Table-1 table too)."""
    source = source_line(plan)
    calls = plan.counts
    judge_lines, judges_saved = judges_report(plan, results)
    given = plan.inputs.given
    info = {"targets": plan.sources, "designs": plan.labels,
            "questions_source": "answers" if given is not None else "benchmark" if plan.inputs.static is not None else "generated",
            "questions": source, "rubrics": sorted({t.source for t in plan.inputs.tasks.values()}),
            "environments_from": plan.inputs.environments_from,
            "personas_from": "the answer files" if given is not None else
            "benchmark descriptions" if plan.inputs.descriptions is not None else "the designs' agents",
            "memories": plan.settings.use_memories, "answer_tokens": plan.settings.answer_tokens, "batch": plan.settings.batch,
            "generator": plan.generator or "run", "warnings": warnings, "notes": plan.inputs.notes,
            "llm_calls": calls, "new_answers": new, "wall_seconds": wall, "judge_agreement": judges_saved}
    lines: list[str] = []
    written = []
    for k, label in enumerate(plan.labels):
        where = design_folder(folder, plan, k)
        where.mkdir(parents=True, exist_ok=True)
        paths = write(where, results[label], {**info, "target": plan.sources[k], "design": label}, plan.judge_labels)
        written.append(paths[0])
        if len(plan.labels) > 1:
            lines.append(f"== {label} ({plan.sources[k]})")
        lines += [table(results[label]), ""]
    raters.write_raters_file(folder, results, plan.inputs.tasks)
    rubrics = " and ".join({"ours": "our own words", "released": "the released rubrics"}[r] for r in info["rubrics"])
    lines.append(f"questions: {source}; rubrics: {rubrics}; judges: {', '.join(plan.judges) or 'the run LLM'}; "
                 f"{plan.settings.batch} question(s) a grading call")
    lines += ["", *judge_lines]
    if len(plan.labels) > 1:
        rows = comparison.paired(results, comparison.identical_prompts(results, plan.slots))
        write_comparison(folder, rows, info)
        lines += ["", *comparison.table(rows)]
    if with_table:
        lines += ["", *write_table(folder, plan, results), ""]
    lines.append(f"{calls_line(calls, new)}; {wall} s")
    if calls.get("parse_failure"):
        lines.append(f"note: {calls['parse_failure']} answers could not be read even after a repair request (parse_failure rows)")
    lines.append(f"written to {', '.join(str(p) for p in written)}; grading sheet for people: {folder / raters.RATERS_CSV}")
    return lines
