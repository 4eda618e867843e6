"""The report's first block, "At a glance": what happened, before how the run was set up.

How the run ended (a stopped run says why and how to continue, a running one that the page is a
snapshot), the key numbers (agents, posts and comments, actions by kind, follows, LLM calls,
tokens, cost and parse failures), the groundedness line, actions over time, the main metrics
over rounds (the first :data:`MAX_PLOTS` of :data:`HEADLINE_METRICS` that the run measured)
and the command that shows the run live in a browser (``townsquare serve RUN``).
"""

from __future__ import annotations

from typing import Any

from . import figures, html, tables
from .figures import _figure, _png
from .groundedness import summary_line

#: (metric, label): the metrics worth a plot at the top of the page, most specific first (a
#: study's own measure before the generic ones every run has).
HEADLINE_METRICS = (
    ("cocoon_entropy.entropy", "recommendation entropy (cocoon)"),
    ("conformity.mean", "mean rating of the conformity item"),
    ("town_metrics.party.share", "share of agents who heard of the party"),
    ("groundedness.posts.margin", "persona margin of posts"),
    ("activity.followers.gini", "follower Gini"),
    ("activity.agents.active", "agents who acted"),
)
MAX_PLOTS = 4


def headline_section(report: Any, key_numbers: str) -> str:
    """``report``: the page's :class:`~townsquare.plugins.report.build.Report`;
    ``key_numbers``: its key-numbers table."""
    db, m, path = report.run.db, report.run.manifest, report.run.path
    body = f"<p>{status_line(m, len(report.rounds), len(report.agents), path)}</p>"
    kinds = tables.action_totals(db)
    kind_table = (html.table(("action", "accepted"), [(r["kind"], r["ok"]) for r in kinds]) if kinds
                  else html.none("no actions in this run"))
    body += (f'<div class="cols"><div><h3>Key numbers</h3>{key_numbers}</div>'
             f'<div><h3>Actions by kind</h3>{kind_table}</div></div>')
    grounded = summary_line(tables.last_metrics(db, "groundedness"))
    if grounded is not None:
        body += f"<p>{html.escape(grounded)}</p>"
    per_round = tables.actions_per_round(db)
    if per_round and report.axis.buckets:
        series = {k: report.axis.group(per_round[k]) for k in tables.KIND_ORDER if k in per_round}
        series.update({k: report.axis.group(v) for k, v in per_round.items() if k not in series})
        body += html.image(figures.actions(series, report.axis.buckets, report.axis.label), "actions over time")
    shown = headline_series(db)
    if shown:
        body += html.image(metrics_figure(shown), "main metrics over rounds")
        body += html.note("Main metrics at each round's end: " + "; ".join(f"{label} ({name})" for name, label, _ in shown) + ".")
    body += (f'<p class="note">Watch the run live (timeline, agents, follower graph, LLM calls): '
             f'<code>townsquare serve {html.escape(str(path))}</code></p>')
    return body


def status_line(m: dict[str, Any], rounds_played: int, agents: int, path: Any) -> str:
    """How the run stands, as HTML: finished, stopped (why, and how to continue) or running."""
    status = str(m.get("status", "unknown"))
    done, planned = m.get("rounds_completed", rounds_played), m.get("rounds", "?")
    counts = f"{done} of {planned} rounds, {agents:,} agents"
    if status == "finished":
        return f'<strong class="status-finished">Finished</strong>: {counts}.'
    if status == "stopped":
        reason = m.get("stop_reason") or "no reason recorded"
        return (f'<strong class="status-stopped">Stopped</strong> after {counts}: {html.escape(str(reason))}. '
                f"Continue with <code>townsquare resume {html.escape(str(path))}</code>.")
    if status == "running":
        return (f'<strong class="status-running">Running</strong> (or killed): {counts} so far; this page is a '
                "snapshot.")
    return f"Status {html.escape(status)}: {counts}."


def headline_series(db: Any) -> list[tuple[str, str, dict[int, float]]]:
    """(metric, label, round -> value) of the headline metrics the run measured, at most :data:`MAX_PLOTS`."""
    out = []
    for name, label in HEADLINE_METRICS:
        rows = db.execute("SELECT round, value FROM metrics WHERE name = ? ORDER BY round", (name,)).fetchall()
        if rows:
            out.append((name, label, {int(r): float(v) for r, v in rows}))
        if len(out) == MAX_PLOTS:
            break
    return out


def metrics_figure(series: list[tuple[str, str, dict[int, float]]]) -> bytes:
    """One small line plot per metric, side by side."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = _figure(10.0, 2.8, cols=len(series))
    for ax, (_, label, values) in zip(axes, series):
        x = sorted(values)
        ax.plot(x, [values[r] for r in x], color="#29335c", linewidth=1.6, marker="o" if len(x) <= 30 else None, markersize=3)
        ax.set_title(label, fontsize="medium")
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _png(fig)
