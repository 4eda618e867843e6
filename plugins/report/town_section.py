"""The report's town section (Park et al.'s Smallville on the ``town`` platform): where each
agent was over time, and the diffusion curve with the relationship density and the attendance.

Where: every town action stores the agent's arena address after it in ``detail["at"]``; an
agent's place holds until its next action (agents that sleep do not act). Diffusion, density
and attendance: the ``town_metrics`` series in the ``metrics`` table. Absent when a run has
neither.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from . import html
from .figures import _figure, _png

METRIC = "town_metrics"
#: place changes listed per agent in the table, at most
MAX_STOPS = 12
MAX_SECTORS = 12


def trails(db: Any) -> dict[str, list[tuple[int, str, str]]]:
    """agent -> [(round, simulated time, arena address)] at each change of place."""
    out: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for round_, created, agent, detail in db.execute(
            "SELECT round, created_at, agent_id, detail FROM actions WHERE ok = 1 ORDER BY seq"):
        at = json.loads(detail or "{}").get("at") if detail else None
        if isinstance(at, str) and at and (not out[agent] or out[agent][-1][2] != at):
            out[agent].append((round_, created, at))
    return dict(out)


def series(db: Any) -> dict[str, dict[int, float]]:
    """``town_metrics`` key -> round -> value (the per-agent ``knows.*`` keys left out)."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for round_, name, value in db.execute("SELECT round, name, value FROM metrics WHERE name LIKE ? ORDER BY round",
                                          (f"{METRIC}.%",)):
        key = name[len(METRIC) + 1:]
        if not key.startswith("knows."):
            out[key][round_] = value
    return dict(out)


def _place(address: str) -> str:
    """``Hobbs Cafe, cafe`` for ``the Ville:Hobbs Cafe:cafe``."""
    return ", ".join(address.split(":")[1:]) or address


def _sector(address: str) -> str:
    parts = address.split(":")
    return parts[1] if len(parts) > 1 else address


def where_figure(trail: dict[str, list[tuple[int, str, str]]], last_round: int, names: dict[str, str]) -> bytes:
    """One lane per agent, coloured by sector, from each change of place to the next."""
    agents = sorted(trail, key=lambda a: names.get(a, a))
    sectors = sorted({_sector(at) for stops in trail.values() for _, _, at in stops})
    shown = sectors[:MAX_SECTORS]
    fig, (ax,) = _figure(10.0, max(2.5, 0.32 * len(agents) + 1.2))
    colours = {s: f"C{i % 10}" for i, s in enumerate(shown)}
    for lane, agent in enumerate(agents):
        stops = trail[agent]
        for (start, _, at), nxt in zip(stops, stops[1:] + [(last_round + 1, "", "")]):
            sector = _sector(at)
            ax.broken_barh([(start, max(nxt[0] - start, 0.5))], (lane - 0.4, 0.8), color=colours.get(sector, "0.6"),
                           hatch=None if sector in colours else "//")
    ax.set_yticks(range(len(agents)), [names.get(a, a) for a in agents])
    ax.set(title="Where each agent was", xlabel="round")
    ax.grid(axis="y", alpha=0)
    for sector in shown:
        ax.bar(0, 0, color=colours[sector], label=sector)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    return _png(fig)


def diffusion_figure(values: dict[str, dict[int, float]]) -> bytes:
    fig, (ax,) = _figure(10.0, 3.4)
    for key, label in (("knows_topic", "share who know of the event"), ("density", "relationship density")):
        if key in values:
            rounds = sorted(values[key])
            ax.plot(rounds, [values[key][r] for r in rounds], marker=".", label=label)
    ax.set(title="Information diffusion and relationships", xlabel="round", ylim=(0, 1.05))
    ax.legend(frameon=False)
    return _png(fig)


def town_section(db: Any, axis: Any = None) -> str | None:
    trail = trails(db)
    values = series(db)
    if not trail and not values:
        return None
    names = dict(db.execute("SELECT agent_id, name FROM agents").fetchall())
    rounds = db.execute("SELECT MAX(round) FROM rounds").fetchone()
    last_round = int(rounds[0]) if rounds and rounds[0] is not None else 0
    body = ""
    if trail:
        body += html.image(where_figure(trail, last_round, names), "where each agent was")
        rows = []
        for agent in sorted(trail, key=lambda a: names.get(a, a)):
            stops = trail[agent]
            text = "; ".join(f"{created[11:16] or created} {_place(at)}" for _, created, at in stops[:MAX_STOPS])
            more = f" (+{len(stops) - MAX_STOPS} more)" if len(stops) > MAX_STOPS else ""
            rows.append((names.get(agent, agent), len(stops), text + more))
        body += html.table(("agent", "places", "changes of place (simulated time, place)"), rows)
    if values:
        body += html.image(diffusion_figure(values), "information diffusion")
        last = {k: v[max(v)] for k, v in values.items() if v}
        first = {k: v[min(v)] for k, v in values.items() if v}
        rows = [(label, html.Number(f"{first[k]:.3f}"), html.Number(f"{last[k]:.3f}"), paper)
                for k, label, paper in (("knows_topic", "share who know of the event", "0.04 -> 0.52"),
                                        ("density", "relationship density", "0.167 -> 0.74"))
                if k in last]
        body += html.table(("measure", "first round", "last round", "Park et al. §7.1"), rows)
        if "attended" in last:
            body += html.table(("attended (in the place during the event)", "of them informed beforehand", "Park et al."),
                               [(int(last["attended"]), int(last.get("attended_informed", 0)), "5 of 12 invited came")])
        body += html.note("Knowledge and acquaintance come from memory evidence (records that mention the event; "
                          "conversations, reflections or seed records that name the other agent, both ways for an edge).")
    return body
