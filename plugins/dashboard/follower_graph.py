"""The follower graph as inline SVG: a force-directed layout (Fruchterman and Reingold, 1991)
computed with numpy on the server, one node per agent (its area grows with its followers, its
colour is its population) linking to the agent's page, one arrow per follow edge."""

from __future__ import annotations

import math
import zlib
from functools import lru_cache
from typing import Any, Sequence
from urllib.parse import quote

import numpy as np

from .html_parts import Raw, esc
from .svg_chart import PALETTE

SIZE = 720
MARGIN = 40
ITERATIONS = 120
#: the pull to the middle, against the repulsion that pushes agents nobody follows to the edges
GRAVITY = 0.3
#: past this many agents the layout is a circle (the force layout is O(n^2) per iteration)
MAX_FORCE_NODES = 600


def layout(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, tuple[float, float]]:
    """Positions in [0, 1]^2; the same graph always gets the same picture (seeded by its nodes),
    computed once while the graph stays the same (an open page re-renders every round)."""
    return dict(_layout(tuple(nodes), tuple(edges)))


@lru_cache(maxsize=8)
def _layout(nodes: tuple[str, ...], edges: tuple[tuple[str, str], ...]) -> tuple[tuple[str, tuple[float, float]], ...]:
    n = len(nodes)
    if n == 0:
        return ()
    angle = np.linspace(0, 2 * math.pi, n, endpoint=False)
    pos = np.stack([np.cos(angle), np.sin(angle)], axis=1) * 0.5
    if 1 < n <= MAX_FORCE_NODES:
        rng = np.random.default_rng(zlib.crc32("\n".join(nodes).encode()))
        pos += rng.normal(scale=0.02, size=pos.shape)
        index = {a: i for i, a in enumerate(nodes)}
        pairs = np.array([(index[a], index[b]) for a, b in edges if a in index and b in index] or np.empty((0, 2)), dtype=int)
        k = math.sqrt(1.0 / n)
        temperature = 0.1
        for _ in range(ITERATIONS):
            delta = pos[:, None, :] - pos[None, :, :]
            dist = np.maximum(np.linalg.norm(delta, axis=2), 1e-4)
            force = (delta / dist[..., None] * (k * k / dist)[..., None]).sum(axis=1)  # repulsion, every pair
            if len(pairs):
                d = pos[pairs[:, 0]] - pos[pairs[:, 1]]
                length = np.maximum(np.linalg.norm(d, axis=1), 1e-4)
                pull = d / length[:, None] * (length * length / k)[:, None]  # attraction along edges
                np.add.at(force, pairs[:, 0], -pull)
                np.add.at(force, pairs[:, 1], pull)
            force -= pos * GRAVITY * n * k  # keeps agents nobody follows near the rest
            step = np.linalg.norm(force, axis=1)
            pos += force / np.maximum(step, 1e-9)[:, None] * np.minimum(step, temperature)[:, None]
            temperature *= 0.97
    low, high = pos.min(axis=0), pos.max(axis=0)
    span = np.where(high - low > 1e-9, high - low, 1.0)
    scaled = (pos - low) / span
    return tuple((a, (float(x), float(y))) for a, (x, y) in zip(nodes, scaled))


def graph_svg(agents: Sequence[dict[str, Any]], edges: set[tuple[str, str]]) -> Raw:
    ids = [a["id"] for a in agents]
    if not ids:
        return Raw('<p class="empty">no agents yet</p>')
    where = layout(ids, sorted(edges))
    populations = sorted({a["population"] for a in agents})
    colour = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(populations)}
    followers = {a["id"]: a["followers"] for a in agents}

    def xy(agent: str) -> tuple[float, float]:
        x, y = where[agent]
        return MARGIN + x * (SIZE - 2 * MARGIN), MARGIN + y * (SIZE - 2 * MARGIN)

    def radius(agent: str) -> float:
        return 5 + 3 * math.sqrt(followers.get(agent, 0))

    parts = [f'<svg class="graph" viewBox="0 0 {SIZE} {SIZE + 24 * len(populations)}" role="img" aria-label="follower graph">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#888"/></marker></defs>']
    for a, b in sorted(edges):
        if a not in where or b not in where:
            continue
        (x1, y1), (x2, y2) = xy(a), xy(b)
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        ux, uy = (x2 - x1) / length, (y2 - y1) / length
        sx, sy = x1 + ux * radius(a), y1 + uy * radius(a)
        ex, ey = x2 - ux * (radius(b) + 2), y2 - uy * (radius(b) + 2)
        parts.append(f'<line class="edge" x1="{sx:.1f}" y1="{sy:.1f}" x2="{ex:.1f}" y2="{ey:.1f}" marker-end="url(#arrow)">'
                     f'<title>{esc(a)} follows {esc(b)}</title></line>')
    for agent in agents:
        x, y = xy(agent["id"])
        parts.append(f'<a href="/agents/{quote(agent["id"], safe="")}" class="node" data-agent="{esc(agent["id"])}">'
                     f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius(agent["id"]):.1f}" fill="{colour[agent["population"]]}">'
                     f'<title>{esc(agent["name"])} ({esc(agent["population"])}): {agent["followers"]} followers, '
                     f'follows {agent["following"]}</title></circle>'
                     f'<text x="{x:.1f}" y="{y - radius(agent["id"]) - 3:.1f}" text-anchor="middle">{esc(agent["name"][:18])}</text></a>')
    for i, population in enumerate(populations):
        y = SIZE + 14 + 24 * i
        parts.append(f'<circle cx="{MARGIN}" cy="{y}" r="6" fill="{colour[population]}"/>'
                     f'<text x="{MARGIN + 12}" y="{y + 4}">{esc(population)}</text>')
    parts.append("</svg>")
    return Raw("".join(parts))
