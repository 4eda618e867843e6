"""``townsquare eval personagym-grades OUT SHEET...``: human raters' grades read back and set
beside the LLM judges' (:mod:`.raters`, :mod:`.agreement`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from townsquare.api import UsageError

from . import agreement, raters
from .results_files import RESULTS_FILE


def evaluation_results(out: Path) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """design -> its personas (as saved), and the judge labels, of the evaluation in ``out``."""
    files = [out / RESULTS_FILE] if (out / RESULTS_FILE).is_file() else sorted(out.glob(f"*/{RESULTS_FILE}"))
    if not files:
        raise UsageError(f"{out}: no {RESULTS_FILE} here or in its design folders (run townsquare eval personagym first)")
    results, judges = {}, []
    for path in files:
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            results[saved.get("design") or path.parent.name] = saved["personas"]
            judges = saved["judges"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{path}: not a PersonaGym result ({exc})") from None
    return results, judges


def register_grades(cli: Any) -> None:
    from townsquare.api.commands import common_options, eval_group

    @eval_group(cli).command("personagym-grades")
    @click.argument("out", metavar="OUT", type=click.Path(file_okay=False))
    @click.argument("sheets", metavar="SHEET...", nargs=-1, required=True, type=click.Path(dir_okay=False))
    @common_options
    def personagym_grades(out: str, sheets: tuple[str, ...], **_: Any) -> None:
        """Read human raters' grading sheets (personagym_raters.csv, filled in) back: a table per
        grader and Krippendorff's alpha of the judges, of the people and of all."""
        folder = Path(out)
        key_path = folder / raters.RATERS_KEY
        if not key_path.is_file():
            raise UsageError(f"{out}: no {raters.RATERS_KEY} (the key of the grading sheet an evaluation writes)")
        key = json.loads(key_path.read_text(encoding="utf-8"))
        results, judges = evaluation_results(folder)
        grades, tasks = raters.judge_grades(results, judges)
        humans = []
        for sheet in sheets:
            name = f"human:{Path(sheet).stem}"
            name = name if name not in grades else f"{name}#{len(humans) + 1}"
            grades[name] = raters.read_rated(Path(sheet), key)
            humans.append(name)
        groups = {"LLM judges": judges, "humans": humans, "all": [*judges, *humans]}
        for line in agreement.report_lines(grades, tasks, groups):
            click.echo(line)
        both, rho = raters.judges_against_humans(grades, judges, humans)
        click.echo(f"judges' mean vs people's mean per answer: Spearman rho {'-' if rho is None else f'{rho:.2f}'} over {both} answers")
        by_task = raters.agreement_by_task(grades, judges, humans, tasks)
        click.echo("")
        for line in agreement.format_rows(("task", "answers", "Spearman rho", "Kendall tau"),
                                          [(agreement.SHORT.get(t, t), n, r, k) for t, n, r, k in by_task]):
            click.echo(line)
        saved = {"humans": {h: grades[h] for h in humans}, "spearman_judges_vs_humans": rho, "answers_graded_by_both": both,
                 "by_task": {t: {"answers": n, "spearman": r, "kendall_tau": k} for t, n, r, k in by_task},
                 "alpha_interval": {row[0]: dict(zip(("graders", "all", *agreement.SHORT), row[1:]))
                                    for row in agreement.alpha_rows(grades, tasks, groups)}}
        (folder / raters.HUMAN_GRADES).write_text(json.dumps(saved, indent=1, ensure_ascii=False), encoding="utf-8")
        click.echo(f"written to {folder / raters.HUMAN_GRADES}")
