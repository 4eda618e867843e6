"""Pages for runs on the item platforms: the watches and chats of a ``recsys`` run (RecAgent),
where each agent is in a ``town`` run (Park et al.'s Smallville)."""

from __future__ import annotations

from collections import Counter

from .html_parts import Raw, agent_link, cards, join, number, section, table, tag
from .run_reader import RunReader
from .svg_chart import line_chart

#: action kinds that make a run a recommender-system run (and show its page)
RECSYS_KINDS = ("watch", "chat", "broadcast")
SHOWN = 100
TOP_GENRES = 8


def has_recsys(reader: RunReader, platform: str) -> bool:
    return platform == "recsys" or bool(reader.kinds() & set(RECSYS_KINDS))


def recsys_page(reader: RunReader) -> tuple[str, Raw]:
    names = reader.names()
    watches = reader.item_actions(("watch",), 10_000)
    social = reader.item_actions(("chat", "broadcast"), SHOWN)
    genres: Counter = Counter()
    per_round: dict[str, dict[int, float]] = {}
    for w in watches:
        for genre in w["detail"].get("genres") or ["(unknown)"]:
            genres[genre] += 1
    for genre, _ in genres.most_common(TOP_GENRES):
        per_round[genre] = {}
    for w in watches:
        for genre in w["detail"].get("genres") or ["(unknown)"]:
            if genre in per_round:
                per_round[genre][w["round"]] = per_round[genre].get(w["round"], 0.0) + 1
    ratings = [float(w["detail"]["rating"]) for w in watches if isinstance(w["detail"].get("rating"), (int, float))]
    watch_rows = [(w["round"], agent_link(w["agent"], names), w["detail"].get("title") or w["target_post"],
                   ", ".join(w["detail"].get("genres") or []), w["detail"].get("rating", "–"), (w["text"] or "")[:120])
                  for w in watches[:SHOWN]]
    social_rows = [(s["round"], s["kind"], agent_link(s["agent"], names),
                    agent_link(s["target_agent"], names) if s["target_agent"] else "all friends", s["text"] or "") for s in social]
    return "Watches & chats", join([
        cards([("watches", number(len(watches))), ("mean rating", f"{sum(ratings) / len(ratings):.2f}" if ratings else "–"),
               ("chats", number(sum(1 for s in social if s["kind"] == "chat"))),
               ("broadcasts", number(sum(1 for s in social if s["kind"] == "broadcast")))]),
        line_chart(per_round, f"Watches per round by genre (top {TOP_GENRES})", "watches"),
        section(f"Watches, newest first (up to {SHOWN})", table(("round", "agent", "item", "genres", "rating", "feeling"), watch_rows,
                                                               empty="no watches")),
        section(f"Chats and broadcasts, newest first (up to {SHOWN})", table(("round", "kind", "from", "to", "text"), social_rows,
                                                                            empty="no chats or broadcasts")),
    ])


def has_town(reader: RunReader, platform: str) -> bool:
    return platform == "town"


def _place(address: str) -> str:
    """``Hobbs Cafe, cafe`` for ``the Ville:Hobbs Cafe:cafe``."""
    return ", ".join(address.split(":")[1:]) or address


def town_page(reader: RunReader) -> tuple[str, Raw]:
    names = reader.names()
    trails = reader.places()
    now = sorted(((names.get(a, a), a, stops[-1]) for a, stops in trails.items()), key=lambda row: row[0])
    sectors = Counter(_place(stop[2]).split(",")[0] for _, _, stop in now)
    rows = [(agent_link(a, names), _place(stop[2]), stop[0], stop[1]) for _, a, stop in now]
    history = [(agent_link(a, names), len(trails[a]), " → ".join(_place(at) for _, _, at in trails[a][-8:])) for _, a, _ in now]
    return "Town", join([
        cards([(f"in {sector}", n) for sector, n in sectors.most_common(6)] or [("agents placed", 0)]),
        section("Where each agent is now", table(("agent", "place", "since round", "since (simulated)"), rows,
                                                 empty="no agent has moved yet")),
        section("Their last changes of place", table(("agent", "changes", "latest places"), history, empty="none")),
    ])
