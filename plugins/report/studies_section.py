"""The report's RecAgent-studies section: information cocoons (Wang et al., fig. 4a: entropy of
the recommended genres per round) and user conformity (fig. 5a: scores per round; 5b: AC by
number of friends). Read from the ``metrics`` table (metrics ``cocoon_entropy`` and
``conformity``); absent when a run has neither.

Cocoon curves are drawn side by side for this run and its sibling runs: the run directories
beside it whose manifest has the same scenario name and which measured the entropy (the MF,
+Rec, +Soc and both runs of ``examples/cocoon.toml``, or branches written next to their run).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from . import html
from .figures import _figure, _png

ENTROPY = "cocoon_entropy.entropy"
MAX_SIBLINGS = 8


def metric_series(db: Any, name: str) -> dict[int, float]:
    return {r: v for r, v in db.execute("SELECT round, value FROM metrics WHERE name = ? ORDER BY round", (name,))}


def sibling_curves(run_path: Path, manifest: dict[str, Any]) -> dict[str, dict[int, float]]:
    """Entropy curves of the runs beside ``run_path`` made from the same scenario name."""
    curves: dict[str, dict[int, float]] = {}
    parent = run_path.parent
    for folder in sorted(p for p in parent.iterdir() if p.is_dir() and p != run_path):
        try:
            other = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
            if other.get("name") != manifest.get("name") or not (folder / "events.sqlite").is_file():
                continue
            db = sqlite3.connect(f"file:{folder / 'events.sqlite'}?mode=ro", uri=True)
            try:
                series = metric_series(db, ENTROPY)
            finally:
                db.close()
        except (OSError, ValueError, sqlite3.DatabaseError):
            continue
        if series:
            curves[folder.name] = series
        if len(curves) >= MAX_SIBLINGS:
            break
    return curves


def entropy_figure(curves: dict[str, dict[int, float]]) -> bytes:
    fig, (ax,) = _figure(10.0, 3.8)
    for label, series in curves.items():
        rounds = sorted(series)
        ax.plot(rounds, [series[r] for r in rounds], label=label, linewidth=1.6)
    ax.set(title="Entropy of recommended genres per round (lower: stronger cocoon)", xlabel="round", ylabel="entropy E")
    ax.legend(frameon=False)
    return _png(fig)


def conformity_figure(ac: dict[int, float], scores: dict[int, dict[int, float]]) -> bytes:
    fig, (left, right) = _figure(10.0, 3.6, cols=2)
    friends = sorted(ac)
    left.bar([str(i) for i in friends], [ac[i] for i in friends], color="#3b75af")
    left.set(title="Attitude change AC(i)", xlabel="number of friends i", ylabel="P(score changes per round)")
    rounds = sorted(scores)
    grid = np.asarray([[scores[r].get(s, 0.0) for r in rounds] for s in range(1, 11)])
    right.imshow(grid, aspect="auto", origin="lower", cmap="Blues", extent=(min(rounds) - 0.5, max(rounds) + 0.5, 0.5, 10.5))
    right.set(title="Scores per round", xlabel="round", ylabel="score")
    return _png(fig)


def cocoon_part(db: Any, run_path: Path, manifest: dict[str, Any]) -> str:
    own = metric_series(db, ENTROPY)
    if not own:
        return ""
    curves = {f"{run_path.name} (this run)": own, **sibling_curves(run_path, manifest)}
    rows = []
    for label, series in curves.items():
        values = [series[r] for r in sorted(series)]
        end = float(np.mean(values[-5:]))
        rows.append((label, len(values), html.Number(f"{max(values):.3f}"), html.Number(f"{end:.3f}"), html.Number(f"{end / max(values):.1%}")))
    return (html.image(entropy_figure(curves), "entropy per round") +
            html.table(("run", "rounds", "highest E", "E, last 5 rounds", "end / highest"), rows))


def conformity_part(db: Any) -> str:
    rows = db.execute("SELECT round, name, value FROM metrics WHERE name LIKE 'conformity.%'").fetchall()
    if not rows:
        return ""
    last = max(r for r, _, _ in rows)
    ac = {int(n.rsplit(".", 1)[1]): v for r, n, v in rows if r == last and n.startswith("conformity.ac.")}
    scores: dict[int, dict[int, float]] = {}
    for r, n, v in rows:
        if n.startswith("conformity.scores."):
            scores.setdefault(r, {})[int(n.rsplit(".", 1)[1])] = v
    body = html.image(conformity_figure(ac, scores), "attitude change by friends") if ac and scores else ""
    return body + html.table(("friends i", "AC(i)"), [(i, html.Number(f"{v:.3f}")) for i, v in sorted(ac.items())])


def studies_section(db: Any, run_path: str | Path, manifest: dict[str, Any]) -> str | None:
    body = cocoon_part(db, Path(run_path), manifest) + conformity_part(db)
    return body or None
