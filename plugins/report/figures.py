"""The report's plots, drawn with matplotlib's Agg canvas and returned as PNG bytes.

matplotlib is imported inside each function (it takes a moment to import and only
``townsquare report`` needs it); figures are made with the object API (``Figure``), never
``pyplot``, so no global state or display is involved.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

#: One colour per action kind, the same in every plot.
KIND_COLOURS = {
    "browse": "#9e9e9e", "like": "#e4572e", "reblog": "#29335c", "comment": "#f3a712",
    "post": "#669bbc", "follow": "#2a9d8f", "unfollow": "#8d5a97",
}
ACTED, NOT_ACTED = "#e4572e", "#9e9e9e"


def _figure(width: float = 10.0, height: float = 3.6, cols: int = 1) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, cols, squeeze=False)[0]
    for ax in axes:
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="y", alpha=0.3)
    return fig, axes


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def followers(counts: Sequence[int]) -> bytes:
    """Zhou et al. fig. 6: followers per agent, most followed first; and how many agents have
    each follower count (log scale when the counts span orders of magnitude, so the tail shows)."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    values = np.sort(np.asarray(counts, dtype=int))[::-1]
    fig, (left, right) = _figure(cols=2)
    left.bar(np.arange(1, len(values) + 1), values, width=1.0, color="#29335c")
    left.set(title="Followers per agent (sorted)", xlabel="agent rank (most followed first)", ylabel="followers")
    left.set_xlim(0.5, max(len(values), 1) + 0.5)
    top = int(values.max()) if len(values) else 0
    bins = np.arange(-0.5, top + 1.5) if top <= 40 else np.linspace(0, top + 1, 31)
    heights, _, _ = right.hist(values, bins=bins, color="#2a9d8f", edgecolor="white")
    nonzero = heights[heights > 0]
    if len(nonzero) and nonzero.max() / nonzero.min() > 20:
        right.set_yscale("log")
        right.yaxis.set_major_formatter(ScalarFormatter())
        right.set_ylabel("agents (log scale)")
    else:
        right.set_ylabel("agents")
        right.yaxis.set_major_locator(MaxNLocator(integer=True))
    right.set(title="How many agents have n followers", xlabel="followers (n)")
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    return _png(fig)


def actions(series: dict[str, dict[int, float]], buckets: Sequence[int], xlabel: str) -> bytes:
    """Browse on its own panel (one per session, it dwarfs the rest); the other kinds stacked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(10.0, 5.0), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[1, 2.2])
    x = np.asarray(buckets)
    width = 0.8 if len(x) < 2 else 0.8 * float(np.min(np.diff(x)))
    reads = series.get("browse", {})
    top.plot(x, [reads.get(b, 0) for b in buckets], color=KIND_COLOURS["browse"], linewidth=1.6,
             marker="o" if len(x) <= 30 else None, markersize=3)
    top.set(title=f"Actions per {xlabel} by kind", ylabel="browse")
    base = np.zeros(len(x))
    for kind, values in series.items():
        if kind == "browse":
            continue
        y = np.asarray([values.get(b, 0) for b in buckets], dtype=float)
        bottom.bar(x, y, bottom=base, width=width, label=kind, color=KIND_COLOURS.get(kind))
        base += y
    bottom.set(xlabel=xlabel, ylabel="actions (accepted)")
    if base.any():
        handles, labels = bottom.get_legend_handles_labels()  # top of the stack first, as drawn
        bottom.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    for ax in (top, bottom):
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="y", alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    top.yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
    return _png(fig)


def similarity(rows: Sequence[Any], per_agent: dict[str, tuple[float | None, float | None]], embedder: str) -> bytes:
    """Table 1 as bars (acted vs not, per action) and each agent's engaged vs browsed-only mean."""
    fig, (bars, scatter) = _figure(cols=2, height=3.8)
    labels = [r.action for r in rows]
    x = np.arange(len(rows))
    acted = [np.nan if r.acted is None else r.acted for r in rows]
    not_acted = [np.nan if r.not_acted is None else r.not_acted for r in rows]
    bars.bar(x - 0.2, acted, width=0.4, color=ACTED, label="acted on")
    bars.bar(x + 0.2, not_acted, width=0.4, color=NOT_ACTED, label="browsed, not acted on")
    bars.set_xticks(x, labels)
    bars.set(title="Persona-post similarity by action", ylabel=f"mean cosine ({embedder})")
    bars.legend(frameon=False, fontsize="small")
    pairs = [(e, o) for e, o in per_agent.values() if e is not None and o is not None]
    if pairs:
        e, o = np.asarray(pairs).T
        scatter.scatter(o, e, s=18, color="#29335c", alpha=0.75)
        lo, hi = float(min(e.min(), o.min())), float(max(e.max(), o.max()))
        pad = (hi - lo) * 0.05 or 0.05
        scatter.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="#9e9e9e", linestyle="--", linewidth=1)
        scatter.text(0.02, 0.97, "above the line: engaged posts fit the persona better", transform=scatter.transAxes,
                     va="top", fontsize="small", color="#555555")
    else:
        scatter.text(0.5, 0.5, "no agent both engaged and browsed only", ha="center", va="center", transform=scatter.transAxes)
    scatter.set(title="Per agent", xlabel="mean cosine, browsed-only posts", ylabel="mean cosine, engaged posts")
    return _png(fig)


def llm_usage(calls: dict[str, dict[int, float]], tokens: dict[str, dict[int, float]], buckets: Sequence[int], xlabel: str) -> bytes:
    """LLM calls and tokens over time, stacked by purpose (bars; areas past 60 points)."""
    from matplotlib.ticker import MaxNLocator

    fig, (left, right) = _figure(cols=2, height=3.8)
    x = np.asarray(buckets)
    width = 0.8 if len(x) < 2 else 0.8 * float(np.min(np.diff(x)))
    for ax, data, ylabel in ((left, calls, "calls"), (right, tokens, "tokens (prompt + completion)")):
        keys = list(data)
        ys = np.asarray([[data[k].get(b, 0) for b in buckets] for k in keys], dtype=float)
        if len(x) <= 60:
            base = np.zeros(len(x))
            for k, y in zip(keys, ys):
                ax.bar(x, y, bottom=base, width=width, label=k)
                base += y
        else:
            ax.stackplot(x, ys, labels=keys, alpha=0.85)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(title=f"LLM {ylabel.split()[0]} by purpose", xlabel=xlabel, ylabel=ylabel)
    handles, labels = right.get_legend_handles_labels()  # top of the stack first, as drawn
    right.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    return _png(fig)
