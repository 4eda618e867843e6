"""The text table ``validate`` prints (and the HTML report shows above its plots), and writing
what the commands write."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from townsquare.api import UsageError

from .scoring import comparison_grid, shared_kinds


def cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}g}"


def span(pair: tuple[float, float] | None) -> str:
    return "" if pair is None or any(math.isnan(v) for v in pair) else f" [{cell(pair[0])}, {cell(pair[1])}]"


def format_table(validation: Any) -> str:
    real = validation.real
    grain, _ = comparison_grid(validation.runs)
    lines = [f"{len(validation.runs)} run{'s' * (len(validation.runs) != 1)} against {validation.against} "
             f"({len(real.user_index[0]):,} users, {len(real):,} events; kinds compared: "
             f"{', '.join(shared_kinds(real, validation.runs))}; time grain {grain / 3600:g} h)"]
    headers = ["dimension", "distance", "real", "simulated [95% CI]", "distance [95% CI]", "floor [2.5-97.5%]", "var ratio"]
    rows = []
    for r in validation.scored:
        verdict = {True: " ok", False: " >", None: ""}[r.within_floor]
        rows.append([r.name, r.metric, cell(r.real), cell(r.simulated) + span(r.interval),
                     cell(r.distance) + span(r.distance_interval) + verdict, cell(r.floor) + span(r.floor_range),
                     cell(r.variance_ratio) if r.variance_ratio is not None else "-"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines += ["  ".join(h.ljust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.append("ok: the distance lies within the trace's own split-half range; >: beyond it")
    lines += [f"  {r.name}: {r.label}" for r in validation.scored]
    skipped = [r for r in validation.results if r.skipped is not None]
    if skipped:
        lines.append("not shared: " + "; ".join(f"{r.name} ({r.skipped})" for r in skipped))
    return "\n".join(lines)


def write_text(path: Path, text: str, what: str) -> Path:
    """Write ``text`` to ``path`` (its folder made); one line naming ``what`` if that fails."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot write: {exc.strerror}") from None
    return path
