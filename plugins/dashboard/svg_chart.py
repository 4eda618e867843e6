"""Line charts over rounds as inline SVG, drawn on the server: no chart library, nothing to load."""

from __future__ import annotations

import math
from typing import Mapping

from .html_parts import Raw, esc

#: the colours of the lines, in order (colour-blind safe, Okabe-Ito)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 150, 28, 34


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 2.5 or 5 times a power of ten apart)."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    ticks = [math.floor(low / step) * step]
    while ticks[-1] < high - step * 1e-9 and len(ticks) < 50:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _label(value: float) -> str:
    if value == int(value) and abs(value) < 1e6:
        return f"{int(value)}"
    return f"{value:.3g}"


def line_chart(series: Mapping[str, Mapping[int, float]], title: str, y_label: str = "", x_label: str = "round") -> Raw:
    """One line per series (at most :data:`PALETTE`'s length; the rest are named as left out)."""
    shown = {name: values for name, values in list(series.items())[:len(PALETTE)] if values}
    if not shown:
        return Raw(f'<p class="empty">{esc(title)}: no values yet</p>')
    xs = sorted({x for values in shown.values() for x in values})
    ys = [y for values in shown.values() for y in values.values() if math.isfinite(y)]
    x0, x1 = xs[0], max(xs[-1], xs[0] + 1)
    yt = nice_ticks(min(0.0, min(ys)) if min(ys) >= 0 else min(ys), max(ys))
    y0, y1 = yt[0], yt[-1] if yt[-1] > yt[0] else yt[0] + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{esc(title)}">',
             f'<text x="{LEFT}" y="16" class="title">{esc(title)}</text>']
    for tick in yt:
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{py(tick):.1f}" y2="{py(tick):.1f}" class="gridline"/>'
                     f'<text x="{LEFT - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{esc(_label(tick))}</text>')
    for tick in nice_ticks(x0, x1, 6):
        if x0 <= tick <= x1 and tick == int(tick):
            parts.append(f'<text x="{px(tick):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{int(tick)}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 2}" text-anchor="middle" class="axis">{esc(x_label)}</text>')
    if y_label:
        parts.append(f'<text x="12" y="{TOP + plot_h / 2:.0f}" transform="rotate(-90 12 {TOP + plot_h / 2:.0f})" '
                     f'text-anchor="middle" class="axis">{esc(y_label)}</text>')
    for i, (name, values) in enumerate(shown.items()):
        colour = PALETTE[i]
        points = [(x, values[x]) for x in sorted(values) if math.isfinite(values[x])]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points if len(points) <= 60 else ():
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}">'
                         f'<title>{esc(name)}, round {x}: {esc(_label(y))}</title></circle>')
        ly = TOP + 6 + i * 16
        parts.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{WIDTH - RIGHT + 26}" y="{ly + 1}" class="legend">{esc(name[:22])}</text>')
    left_out = len([v for v in series.values() if v]) - len(shown)
    if left_out > 0:
        parts.append(f'<text x="{WIDTH - RIGHT + 12}" y="{TOP + 6 + len(shown) * 16}" class="legend">+{left_out} more</text>')
    parts.append("</svg>")
    return Raw("".join(parts))
