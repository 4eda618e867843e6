"""``validate --html``: one self-contained HTML page, the table and, per dimension, the real
trace against each run: empirical CDFs for ``ks`` dimensions, histograms for ``js``, the values
for ``relative_error`` and the curves for ``nrmse`` (PNG, embedded)."""

from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from .table import format_table, write_text

REAL = "#222222"
RUNS = ("#d1495b", "#00798c", "#edae49", "#66a182", "#2e4057", "#8d96a3")


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _cdf(ax: Any, values: np.ndarray, **style: Any) -> None:
    x = np.sort(values)
    if len(x):
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", **style)


def plot(result: Any, runs: list[str]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.6, 3.2))
    real, sims = result.real_measurement, result.measurements
    if result.metric == "ks":
        _cdf(ax, real.sample, color=REAL, linewidth=2.2, label="real")
        for k, m in enumerate(sims):
            _cdf(ax, m.sample, color=RUNS[k % len(RUNS)], linewidth=1.1, label=runs[k])
        ax.set_ylabel("share at or below")
    elif result.metric == "js":
        x = np.arange(len(real.bins))
        share = real.histogram / real.histogram.sum()
        ax.bar(x - 0.2, share, width=0.4, color="#bbbbbb", edgecolor=REAL, label="real")
        sim_shares = np.asarray([m.histogram / m.histogram.sum() for m in sims if m.histogram.sum() > 0])
        if len(sim_shares):
            ax.bar(x + 0.2, sim_shares.mean(axis=0), width=0.4, color=RUNS[0], label="runs (mean)",
                   yerr=[sim_shares.mean(axis=0) - sim_shares.min(axis=0), sim_shares.max(axis=0) - sim_shares.mean(axis=0)])
        ax.set_xticks(x, real.bins, fontsize=7)
        ax.set_ylabel("share of events")
    elif result.metric == "nrmse":
        ax.plot(real.grid, real.curve, color=REAL, linewidth=2.2, label="real")
        for k, m in enumerate(sims):
            ax.plot(m.grid, m.curve, color=RUNS[k % len(RUNS)], linewidth=1.1, label=runs[k])
        ax.set_xlabel("hours since the post")
    else:
        ax.axhline(result.real, color=REAL, linewidth=2.2, label="real")
        ax.scatter(range(len(sims)), result.replicates, color=[RUNS[k % len(RUNS)] for k in range(len(sims))], zorder=3, label="runs")
        ax.set_xticks(range(len(sims)), runs, fontsize=7)
    if result.axis:
        ax.set_xlabel(result.axis, fontsize=8)
    ax.set_title(f"{result.name}: {result.label}", fontsize=9)
    ax.legend(fontsize=7)
    return _png(fig)


def write_report(validation: Any, path: Path) -> Path:
    names = [r.name for r in validation.runs]
    parts = [f"<h1>townsquare validate: {html.escape(', '.join(names))} against {html.escape(validation.against)}</h1>",
             f"<pre>{html.escape(format_table(validation))}</pre>"]
    for result in validation.scored:
        floor = "" if math.isnan(result.floor) else f"; the trace's split-half floor {result.floor:.3g}"
        parts.append(f"<h2>{html.escape(result.name)}</h2><p>{html.escape(result.label)}: real {result.real:.4g}, "
                     f"simulated {result.simulated:.4g}; {result.metric} {result.distance:.3g}{floor}</p>"
                     f"<img alt='{html.escape(result.name)}' src='data:image/png;base64,{plot(result, names)}'>")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>townsquare validate</title>"
            "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}pre{font-size:12px;overflow-x:auto}</style>"
            f"</head><body>{''.join(parts)}</body></html>")
    return write_text(path, page, "the report")
