"""matplotlib helpers for the study commands (``compare``, ``ablate``): the object API on an
Agg canvas, imported only when a plot is drawn, so ``townsquare --help`` stays fast."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def figure(rows: int = 1, cols: int = 1, width: float = 8.0, height: float = 3.2) -> tuple[Any, list[Any]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes:
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="y", alpha=0.3)
        ax.tick_params(labelsize=7)
    return fig, axes


def save(fig: Any, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
