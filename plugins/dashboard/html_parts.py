"""Small HTML builders for the dashboard's pages: everything text is escaped unless wrapped in
:class:`Raw`. The page shell links only the package's own CSS and JavaScript."""

from __future__ import annotations

from html import escape as _escape
from typing import Any, Iterable, Sequence
from urllib.parse import quote


class Raw(str):
    """Markup that is already safe."""


def esc(value: Any) -> str:
    if isinstance(value, Raw):
        return value
    return _escape("" if value is None else str(value))


def join(parts: Iterable[Any]) -> Raw:
    return Raw("".join(esc(p) for p in parts))


def tag(name: str, body: Any = "", **attrs: Any) -> Raw:
    """``tag("a", "x", href="/y", class_="z")``; None attributes are left out."""
    text = "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items() if v is not None)
    return Raw(f"<{name}{text}>{esc(body)}</{name}>")


def agent_link(agent_id: str | None, names: dict[str, str]) -> Raw:
    if not agent_id:
        return Raw("–")
    return tag("a", names.get(agent_id, agent_id), href=f"/agents/{quote(agent_id, safe='')}", class_="agent")


def number(value: Any, digits: int = 0) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    try:
        return f"{int(round(float(value))):,}"
    except (TypeError, ValueError):
        return str(value)


def money(value: Any) -> str:
    return "–" if value is None else f"${float(value):.4f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], class_: str = "grid", empty: str = "nothing yet") -> Raw:
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return tag("p", empty, class_="empty")
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return Raw(f'<table class="{esc(class_)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


def section(title: str, body: Any, id_: str | None = None) -> Raw:
    return tag("section", join([tag("h2", title), body]), id=id_)


def cards(items: Sequence[tuple[str, Any]]) -> Raw:
    return tag("div", join(tag("div", join([tag("b", value), tag("span", label)]), class_="card") for label, value in items),
               class_="cards")


def pager(path: str, offset: int, limit: int, total: int, extra: str = "") -> Raw:
    """Newer / older links for a list shown ``limit`` at a time."""
    links = []
    if offset > 0:
        links.append(tag("a", "← newer", href=f"{path}?offset={max(0, offset - limit)}{extra}"))
    shown = f"{offset + 1}–{min(total, offset + limit)} of {total}" if offset < total else f"{total} in all"
    links.append(tag("span", shown))
    if offset + limit < total:
        links.append(tag("a", "older →", href=f"{path}?offset={offset + limit}{extra}", class_="older"))
    return tag("nav", join(links), class_="pager")


#: (path, label) of the navigation; ``recsys`` and ``town`` appear only for runs that have them
NAV = (("/", "Timeline"), ("/agents", "Agents"), ("/graph", "Follower graph"), ("/metrics", "Metrics"),
       ("/llm", "LLM calls"), ("/recsys", "Watches & chats"), ("/town", "Town"))


def shell(title: str, run_name: str, nav: Sequence[str], current: str, runbar: Any, content: Any, version: str,
          aside: Any = "") -> str:
    """The whole page: navigation, the run bar, ``aside`` (kept as it is: the interview box) and
    ``content`` (the run bar and the content are replaced in place when the run changes)."""
    links = join(tag("a", label, href=path, class_="here" if path == current else None) for path, label in NAV if path in nav)
    return ("<!doctype html>\n" + str(join([
        Raw('<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'),
        tag("title", f"{title} · {run_name} · townsquare"),
        Raw('<link rel="stylesheet" href="/static/dashboard.css"><script defer src="/static/dashboard.js"></script></head>'),
        Raw(f'<body data-version="{esc(version)}">'),
        tag("header", join([tag("a", "townsquare", href="/", class_="brand"), tag("nav", links, class_="main")])),
        tag("div", runbar, id="runbar"),
        tag("main", join([tag("h1", title), aside, tag("div", content, id="content")])),
        Raw("</body></html>"),
    ])))
