"""A results table in the shape of the papers' Table 1 (``eval ... --table``): rows are the
models or designs, columns the tasks, every cell a score with its interval
(``4.12 [3.98, 4.25]``), printed and written as CSV, Markdown and LaTeX beside the results.

A cell is ``(mean, low, high)``; an interval bound that is None prints as ``-`` (it never is in
the evaluations' own rows: each carries its bootstrap interval); None is an empty cell.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Mapping, Sequence

Cell = tuple[float, float | None, float | None] | None


def cell_text(cell: Cell, digits: int = 2) -> str:
    if cell is None:
        return "-"
    mean, low, high = cell
    bound = "-" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"
    return f"{mean:.{digits}f} {bound}"


def table_lines(columns: Sequence[tuple[str, str]], rows: Sequence[tuple[str, Mapping[str, Cell]]], digits: int = 2) -> list[str]:
    """The table as aligned text (``columns``: (key, heading); ``rows``: (label, key -> cell))."""
    cells = [["", *(heading for _, heading in columns)]] + [[label, *(cell_text(row.get(k), digits) for k, _ in columns)]
                                                            for label, row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    return ["  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))) for r in cells]


def write_tables(stem: Path, columns: Sequence[tuple[str, str]], rows: Sequence[tuple[str, Mapping[str, Cell]]], caption: str,
                 digits: int = 2) -> list[Path]:
    """``stem``.csv, ``stem``.md and ``stem``.tex; returns their paths."""
    headings = [heading for _, heading in columns]
    texts = [(label, [cell_text(row.get(k), digits) for k, _ in columns]) for label, row in rows]
    paths = [stem.with_suffix(".csv"), stem.with_suffix(".md"), stem.with_suffix(".tex")]
    with open(paths[0], "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["", *headings])
        writer.writerows([label, *cells] for label, cells in texts)
    md = [f"| | {' | '.join(headings)} |", "|---|" + "---|" * len(headings)]
    md += [f"| {label} | {' | '.join(cells)} |" for label, cells in texts]
    paths[1].write_text("\n".join([*md, "", caption, ""]), encoding="utf-8")
    tex = ["\\begin{table}[t]", "\\centering", "\\begin{tabular}{l" + "c" * len(headings) + "}", "\\toprule",
           " & ".join(["", *(_tex(h) for h in headings)]) + " \\\\", "\\midrule"]
    tex += [" & ".join([_tex(label), *(_tex(c) for c in cells)]) + " \\\\" for label, cells in texts]
    tex += ["\\bottomrule", "\\end{tabular}", f"\\caption{{{_tex(caption)}}}", "\\end{table}", ""]
    paths[2].write_text("\n".join(tex), encoding="utf-8")
    return paths


def _tex(text: str) -> str:
    for char, escaped in (("\\", "\\textbackslash{}"), ("&", "\\&"), ("%", "\\%"), ("_", "\\_"), ("#", "\\#"), ("$", "\\$")):
        text = text.replace(char, escaped)
    return text
