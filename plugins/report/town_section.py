"""The report's town section (Park et al.'s Smallville on the ``town`` platform): where each
agent was over time, and the diffusion of each topic with the relationship density and the
attendance, beside the paper's numbers.

Where: every town action stores the agent's arena address after it in ``detail["at"]``; an
agent's place holds until its next action (agents that sleep do not act). Diffusion, density
and attendance: the ``town_metrics`` series in the ``metrics`` table (``<topic>.heard``,
``<topic>.heard.<agent>``, ``<topic>.attended_guests``, ``density``...). What each topic is (its
pattern, hosts, staff, place and window) comes from the scenario in the run's manifest. Absent
when a run has neither places nor these metrics.
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
#: Park et al. §7.1's numbers for the topics of their study (25 agents, two game days)
PAPER_SPREAD = {"party": "1 -> 13 of 25 (4 % -> 52 %)", "candidacy": "1 -> 8 of 25 (4 % -> 32 %)"}
PAPER_DENSITY = "0.167 -> 0.74"
PAPER_ATTENDANCE = "5 of the 12 invited came"


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
    """``town_metrics`` key -> round -> value (the per-agent keys, ``<topic>.heard.<agent>``, left out)."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for round_, name, value in db.execute("SELECT round, name, value FROM metrics WHERE name LIKE ? ORDER BY round",
                                          (f"{METRIC}.%",)):
        key = name[len(METRIC) + 1:]
        if key.count(".") < 2:
            out[key][round_] = value
    return dict(out)


def heard_by(db: Any, topic: str) -> dict[str, int]:
    """agent -> the first round its ``<topic>.heard.<agent>`` was 1."""
    prefix = f"{METRIC}.{topic}.heard."
    rows = db.execute("SELECT name, MIN(round) FROM metrics WHERE substr(name, 1, ?) = ? AND value = 1 GROUP BY name",
                      (len(prefix), prefix))
    return {name[len(prefix):]: int(first) for name, first in rows}


def topics_of(manifest: dict[str, Any] | None, values: dict[str, dict[int, float]]) -> dict[str, dict[str, Any]]:
    """Each topic's settings from the run's scenario (``[plugins.town_metrics.topics]``); a topic
    the series show but the scenario does not name has the metric's default settings."""
    configured = ((manifest or {}).get("scenario") or {}).get("plugins", {}).get(METRIC, {}).get("topics") or {}
    names = list(configured) + sorted({k.split(".")[0] for k in values if k.endswith(".heard")} - set(configured))
    return {name: dict(configured.get(name) or {}) for name in names}


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


def diffusion_figure(values: dict[str, dict[int, float]], topics: list[str]) -> bytes:
    fig, (ax,) = _figure(10.0, 3.4)
    curves = [(f"{t}.share", f"share who heard of the {t}") for t in topics] + [("density", "relationship density")]
    for key, label in curves:
        if key in values:
            rounds = sorted(values[key])
            ax.plot(rounds, [values[key][r] for r in rounds], marker=".", label=label)
    ax.set(title="Information diffusion and relationships", xlabel="round", ylim=(0, 1.05))
    ax.legend(frameon=False)
    return _png(fig)


def _window(settings: dict[str, Any]) -> str:
    start, end = settings.get("start"), settings.get("end")
    return f"{start} to {end}" if start else "-"


def diffusion_body(db: Any, values: dict[str, dict[int, float]], manifest: dict[str, Any] | None,
                   names: dict[str, str]) -> str:
    topics = topics_of(manifest, values)
    body = html.image(diffusion_figure(values, list(topics)), "information diffusion")
    agents = len(names) or 1
    definitions, rows, attendance = [], [], []
    for topic, settings in topics.items():
        heard = values.get(f"{topic}.heard", {})
        if not heard:
            continue
        first_round, last_round = min(heard), max(heard)
        first_at = heard_by(db, topic)
        starters = sorted((names.get(a, a) for a, r in first_at.items() if r == first_round))
        hosts = settings.get("hosts")
        definitions.append((topic, f"/{settings.get('pattern', '(default)')}/",
                            ", ".join(hosts) if hosts else f"whose seed mentions it: {', '.join(starters) or 'nobody'}",
                            ", ".join(settings.get("staff") or []) or "-", settings.get("place") or "-", _window(settings)))
        rows.append((f"{topic}: agents who heard of it", html.Number(f"{heard[first_round]:.0f} of {agents}"),
                     html.Number(f"{heard[last_round]:.0f} of {agents}"), PAPER_SPREAD.get(topic, "-")))
        if f"{topic}.attended_guests" in values:
            last = {k: values[f"{topic}.{k}"][last_round] for k in ("guests", "present_guests", "attended_guests", "at_place")
                    if f"{topic}.{k}" in values}
            staff, host_names = set(settings.get("staff") or []), set(hosts or starters)
            guests = sorted(names.get(a, a) for a in first_at if names.get(a, a) not in host_names | staff)
            attendance.append((topic, int(last.get("guests", 0)), int(last.get("attended_guests", 0)),
                               int(last.get("present_guests", 0)), ", ".join(guests) or "-", PAPER_ATTENDANCE))
    if "density" in values:
        density = values["density"]
        rows.append(("relationship density", html.Number(f"{density[min(density)]:.3f}"),
                     html.Number(f"{density[max(density)]:.3f}"), PAPER_DENSITY))
    if definitions:
        body += html.table(("topic", "pattern", "hosts", "staff", "place", "window"), definitions)
    body += html.table(("measure", "start (first round)", "end (last round)", "Park et al. §7.1"), rows)
    if attendance:
        body += html.table(("topic", "guests (heard; not host, not staff)", "came for it (in the place in the window, "
                            "doing something about it)", "there at all", "who the guests are", "Park et al."), attendance)
    body += html.note("An agent has heard of a topic when its seed or a conversation it remembers mentions it (the "
                      "paper counts an interview's yes only when the memory holds the dialogue). Acquaintance: "
                      "conversations, reflections or seed records that name the other agent, both ways for an edge.")
    return body


def town_section(db: Any, axis: Any = None, manifest: dict[str, Any] | None = None) -> str | None:
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
        body += diffusion_body(db, values, manifest, names)
    return body
