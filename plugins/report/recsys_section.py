"""The report's recommender-system section (RecAgent runs on the ``recsys`` platform): watches
by genre over rounds (the information-cocoon view), ratings, and a sample of chats and
broadcasts. Read from the ``actions`` table alone (a watch's ``detail`` carries its genres and
rating), so it needs no catalogue. Absent when a run has no watch, chat or broadcast."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any, Sequence

import numpy as np

from . import html
from .figures import _figure, _png

MAX_GENRES = 8
CHAT_SAMPLE = 3


def watches_by_genre(db: Any) -> tuple[dict[str, dict[int, float]], list[float]]:
    """genre -> round -> watches, and the ratings given."""
    series: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    ratings = []
    for round_, detail in db.execute("SELECT round, detail FROM actions WHERE kind = 'watch' AND ok = 1 ORDER BY seq"):
        data = json.loads(detail or "{}")
        for genre in data.get("genres") or ["(unknown)"]:
            series[genre][round_] += 1
        if isinstance(data.get("rating"), (int, float)):
            ratings.append(float(data["rating"]))
    return {g: dict(v) for g, v in series.items()}, ratings


def figure(series: dict[str, dict[int, float]], buckets: Sequence[int], xlabel: str) -> bytes:
    fig, (ax,) = _figure(10.0, 3.8)
    x = np.asarray(buckets)
    base = np.zeros(len(x))
    for genre, values in series.items():
        y = np.asarray([values.get(b, 0) for b in buckets], dtype=float)
        ax.bar(x, y, bottom=base, width=0.8, label=genre)
        base += y
    ax.set(title=f"Watches per {xlabel} by genre", xlabel=xlabel, ylabel="watches")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return _png(fig)


def recsys_section(db: Any, axis: Any) -> str | None:
    series, ratings = watches_by_genre(db)
    social = db.execute("SELECT round, agent_id, kind, target_agent, text FROM actions "
                        "WHERE kind IN ('chat', 'broadcast') AND ok = 1 ORDER BY seq").fetchall()
    if not series and not social:
        return None
    body = ""
    if series:
        totals = Counter({g: sum(v.values()) for g, v in series.items()})
        top = [g for g, _ in totals.most_common(MAX_GENRES)]
        grouped: dict[str, dict[int, float]] = {g: axis.group(series[g]) for g in top}
        rest = defaultdict(float)
        for g in set(series) - set(top):
            for b, v in axis.group(series[g]).items():
                rest[b] += v
        if rest:
            grouped["other genres"] = dict(rest)
        if axis.buckets:
            body += html.image(figure(grouped, axis.buckets, axis.label), "watches by genre")
        mean = html.Number(f"{sum(ratings) / len(ratings):.2f}") if ratings else None
        body += html.table(("genre", "watches"), [(g, int(n)) for g, n in totals.most_common()])
        body += html.table(("ratings given", "mean rating (1-10)"), [(len(ratings), mean)])
    chats = [row for row in social if row[2] == "chat"][:CHAT_SAMPLE]
    posts = [row for row in social if row[2] == "broadcast"][:CHAT_SAMPLE]
    if chats or posts:
        body += html.note(f"{sum(r[2] == 'chat' for r in social)} chats and {sum(r[2] == 'broadcast' for r in social)} "
                          f"broadcasts; the first {CHAT_SAMPLE} of each:")
        body += html.table(("round", "from", "to", "text"), [(r[0], r[1], r[3] or "all friends", r[4]) for r in chats + posts])
    return body
