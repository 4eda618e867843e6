"""Assembling a self-contained HTML page: inline CSS, images as base64 PNG ``data:`` URIs, no
scripts and no external resources, so the file works offline and can be mailed as it is."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #1d1d1f;
       max-width: 1080px; margin: 2em auto; padding: 0 1.2em; line-height: 1.45; }
h1 { margin-bottom: 0.1em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.7em; text-align: left; vertical-align: top; }
th { background: #f4f4f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.ablated td { background: #fff4e5; }
img { max-width: 100%; height: auto; display: block; margin: 0.6em 0; }
.none { color: #777; font-style: italic; } .note { color: #555; font-size: 0.9em; }
.status-finished { color: #1b7f3b; } .status-running, .status-stopped { color: #b25e00; }
nav a { margin-right: 1em; } code { background: #f4f4f6; padding: 0 0.25em; border-radius: 3px; }
.cols { display: flex; gap: 2em; flex-wrap: wrap; align-items: flex-start; }
"""


class Raw(str):
    """HTML that is inserted as it is (already escaped or built here)."""


class Number(str):
    """A number already formatted (``f"{x:.2f}"``): inserted as it is, aligned right."""


def cell(value: Any) -> tuple[str, bool]:
    """(HTML, is_number) for a table cell."""
    if isinstance(value, Number):
        return escape(str(value)), True
    if isinstance(value, Raw):
        return str(value), False
    if value is None:
        return "–", False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, int):
        return f"{value:,}", True
    if isinstance(value, float):
        return f"{value:,.3f}", True
    return escape(str(value)), False


def table(headers: Sequence[str] | None, rows: Iterable[Sequence[Any]], row_classes: Sequence[str] | None = None) -> str:
    head = f"<thead><tr>{''.join(f'<th>{escape(h)}</th>' for h in headers)}</tr></thead>" if headers else ""
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        cells = []
        for value in row:
            html, number = cell(value)
            cells.append(f'<td class="num">{html}</td>' if number else f"<td>{html}</td>")
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f"<table>{head}<tbody>{''.join(body)}</tbody></table>"


def image(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def none(what: str) -> str:
    return f'<p class="none">{escape(what)}</p>'


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{escape(anchor)}"><h2>{escape(title)}</h2>{body}</section>'


def page(title: str, subtitle: str, sections: Sequence[tuple[str, str, str]]) -> str:
    """``sections``: (anchor, title, body HTML)."""
    nav = "".join(f'<a href="#{escape(a)}">{escape(t)}</a>' for a, t, _ in sections)
    parts = "".join(section(a, t, body) for a, t, body in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{escape(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1><p class=\"sub\">{subtitle}</p>"
        f"<nav>{nav}</nav>{parts}</body></html>\n"
    )
