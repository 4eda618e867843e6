"""Pages about the whole run: the follower graph, metric plots over rounds, the LLM calls."""

from __future__ import annotations

import math
from collections import defaultdict

from .follower_graph import graph_svg
from .html_parts import Raw, agent_link, cards, join, money, number, pager, section, table, tag
from .run_reader import RunReader
from .svg_chart import line_chart

CALLS_PER_PAGE = 50
#: per-agent or per-item keys of a metric (``town_metrics.party.heard.<agent>``) are not plotted
MAX_SERIES_PER_METRIC = 8


def graph_page(reader: RunReader) -> tuple[str, Raw]:
    agents = reader.agents()
    edges = reader.follow_edges()
    top = sorted(agents, key=lambda a: (-a["followers"], a["name"]))[:10]
    names = {a["id"]: a["name"] for a in agents}
    return "Follower graph", join([
        cards([("agents", number(len(agents))), ("follow edges", number(len(edges))),
               ("agents nobody follows", number(sum(1 for a in agents if not a["followers"])))]),
        tag("p", "Now: every follow and unfollow so far, replayed. An arrow points from follower to followee; "
                 "a node's area grows with its followers. Click an agent to open it.", class_="note"),
        tag("div", graph_svg(agents, edges), class_="graph-box"),
        section("Most followed", table(("agent", "population", "followers", "follows"),
                                       [(agent_link(a["id"], names), a["population"], a["followers"], a["following"]) for a in top])),
    ])


def metric_groups(values: dict[str, dict[int, float]]) -> dict[str, dict[str, dict[int, float]]]:
    """``name.key`` series grouped by metric name, one chart each."""
    groups: dict[str, dict[str, dict[int, float]]] = defaultdict(dict)
    for name, series in sorted(values.items()):
        metric, _, key = name.partition(".")
        groups[metric][key or metric] = series
    return dict(groups)


#: series share a panel only when their largest values are within this factor of each other
SCALE_FACTOR = 20.0


def by_scale(series: dict[str, dict[int, float]]) -> list[dict[str, dict[int, float]]]:
    """A metric's series split into panels of one scale each, so a rate (0-1) never shares its y
    axis with a count (0-111), which would flatten it to a line at 0: shares and rates (every
    value within [-1, 1]) apart from the rest, and within each, series whose largest values
    differ by more than :data:`SCALE_FACTOR` apart."""
    def top(values: dict[int, float]) -> float:
        finite = [abs(v) for v in values.values() if math.isfinite(v)]
        return max(finite, default=0.0)

    panels: list[tuple[bool, float, dict[str, dict[int, float]]]] = []
    for name, values in sorted(series.items(), key=lambda item: -top(item[1])):
        rate, size = top(values) <= 1.0, top(values)
        for is_rate, largest, members in panels:
            if is_rate == rate and (size == 0 or largest / size <= SCALE_FACTOR):
                members[name] = values
                break
        else:
            panels.append((rate, size, {name: values}))
    order = list(series)
    return [dict(sorted(members.items(), key=lambda item: order.index(item[0]))) for _, _, members in panels]


def metrics_page(reader: RunReader) -> tuple[str, Raw]:
    rounds = reader.rounds()
    charts = [line_chart(reader.actions_per_round(), "Accepted actions per round, by kind", "actions"),
              line_chart({"active agents": {r["round"]: float(r["active"] or 0) for r in rounds},
                          "LLM calls": {r["round"]: float(r["llm_calls"] or 0) for r in rounds}}, "Activity per round")]
    for metric, series in metric_groups(reader.metrics()).items():
        # a metric that reports one key per agent (or item) would be a bundle of lines: plot its summary keys only,
        # those less deep than its deepest (``party.heard`` beside ``party.heard.<agent>``)
        deepest = max((k.count(".") for k in series), default=0)
        summary = {k: v for k, v in series.items() if k.count(".") < deepest} or series
        panels = by_scale(dict(list(summary.items())[:MAX_SERIES_PER_METRIC]))
        for panel in panels:
            title = metric if len(panels) == 1 else f"{metric}: {', '.join(panel)}"
            charts.append(line_chart(panel, title))
    return "Metrics", join([tag("p", "Over rounds, as the run's metric plugins measured them (the metrics table).", class_="note"),
                            tag("div", join(charts), class_="charts")])


def llm_page(reader: RunReader, offset: int) -> tuple[str, Raw]:
    summary = reader.llm_summary()
    totals = summary["totals"]
    calls, total = reader.llm_calls(CALLS_PER_PAGE, offset)
    names = reader.names()
    purposes = [(r["purpose"], number(r["calls"]), number(r["ok"]), number(r["errors"]), number(r["parse_failures"]),
                 number(r["prompt_tokens"]), number(r["completion_tokens"]), number(r["mean_latency_ms"], 1), money(r["cost"]))
                for r in summary["purposes"]]
    rows = [(c["seq"], c["round"], agent_link(c["agent"], names) if c["agent"] else "–", c["purpose"], c["model"],
             tag("span", c["status"], class_=f"status-{c['status']}"), number(c["prompt_tokens"]), number(c["completion_tokens"]),
             number(c["latency_ms"], 1), money(c["cost"]), c["error_kind"] or (c["error"] or "")[:80]) for c in calls]
    per_round = summary["per_round"]
    return "LLM calls", join([
        cards([("calls", number(totals["calls"])), ("failed attempts", number(totals["errors"])),
               ("parse failures", number(totals["parse_failures"])), ("prompt tokens", number(totals["prompt_tokens"])),
               ("completion tokens", number(totals["completion_tokens"])), ("cost", money(totals["cost"])),
               ("mean latency", f"{number(totals['mean_latency_ms'], 1)} ms" if totals["mean_latency_ms"] is not None else "–")]),
        tag("div", join([line_chart({"calls": per_round["calls"]}, "LLM calls per round (round -1: while the run was built)"),
                         line_chart({"tokens": per_round["tokens"]}, "Tokens per round (prompt + completion)"),
                         line_chart({"mean latency (ms)": per_round["latency"]}, "Mean latency per round", "ms")]), class_="charts"),
        section("By purpose", table(("purpose", "calls", "ok", "failed", "parse failures", "prompt tokens", "completion tokens",
                                     "mean latency (ms)", "cost"), purposes, empty="no LLM calls")),
        section("Calls, newest first", join([pager("/llm", offset, CALLS_PER_PAGE, total),
                                             table(("#", "round", "agent", "purpose", "model", "status", "prompt", "completion",
                                                    "latency (ms)", "cost", "error"), rows, empty="no LLM calls")])),
    ])
