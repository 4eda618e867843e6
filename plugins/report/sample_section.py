"""The report's "Posts and comments" section: a sample of what the agents wrote, each text beside
its author's persona, so a reader judges the run's social life by reading it.

The sample: the top-level posts that drew comments first (most comments first), then others,
spread over the run (every k-th in time), at most :data:`POSTS_SHOWN`; under each post its
comments in order, each with its author and whether it copies the post
(:func:`.comment_copying.copies`). An author's persona is shown as its name and first sentences
(:data:`PERSONA_SENTENCES`).
"""

from __future__ import annotations

import html as escape
import sqlite3

from . import html
from .comment_copying import copies
from .tables import AgentRow

POSTS_SHOWN = 8
COMMENTS_SHOWN = 4
PERSONA_SENTENCES = 2


def persona_line(agent: AgentRow | None, author_id: str) -> str:
    if agent is None:
        return escape.escape(author_id)
    sentences = " ".join(agent.persona.sentences[:PERSONA_SENTENCES])
    fields = agent.persona.fields or {}
    brief = sentences or "; ".join(f"{k}: {v}" for k, v in list(fields.items())[:3] if isinstance(v, (str, int, float)))
    return f'<b>{escape.escape(agent.name)}</b> <span class="none">({escape.escape(author_id)})</span>: {escape.escape(brief[:300])}'


def sample_posts(db: sqlite3.Connection) -> list[tuple[str, str, int, str, list[tuple[str, str]]]]:
    """(post id, author, round, text, [(comment author, comment text)]) of the sample."""
    posts = db.execute("SELECT post_id, author_id, round, text FROM posts WHERE reply_to IS NULL ORDER BY round, rowid").fetchall()
    replies: dict[str, list[tuple[str, str]]] = {}
    for reply_to, author, text in db.execute("SELECT reply_to, author_id, text FROM posts WHERE reply_to IS NOT NULL ORDER BY round, rowid"):
        replies.setdefault(reply_to, []).append((author, text or ""))
    commented = sorted((p for p in posts if p[0] in replies), key=lambda p: -len(replies[p[0]]))[:POSTS_SHOWN]
    rest = [p for p in posts if p[0] not in replies]
    step = max(1, len(rest) // max(1, POSTS_SHOWN - len(commented)))
    chosen = commented + rest[::step][: POSTS_SHOWN - len(commented)]
    return [(pid, author, r, text or "", replies.get(pid, [])) for pid, author, r, text in chosen]


def sample_section(db: sqlite3.Connection, agents: list[AgentRow]) -> str | None:
    sample = sample_posts(db)
    if not sample:
        return None
    by_id = {a.agent_id: a for a in agents}
    parts = []
    for _, author, round, text, comments in sample:
        items = "".join(
            f'<li>{persona_line(by_id.get(c_author), c_author)}<br>{escape.escape(c_text)}'
            + (' <span class="none">(copies the post)</span>' if copies(c_text, text) else "") + "</li>"
            for c_author, c_text in comments[:COMMENTS_SHOWN])
        more = f'<li class="none">… {len(comments) - COMMENTS_SHOWN} more</li>' if len(comments) > COMMENTS_SHOWN else ""
        parts.append(f'<div class="post"><p>{persona_line(by_id.get(author), author)} · round {round}</p>'
                     f"<blockquote>{escape.escape(text)}</blockquote>"
                     + (f"<ul>{items}{more}</ul>" if items else '<p class="none">no comments</p>') + "</div>")
    return "".join(parts) + html.note(
        "A sample: the posts that drew comments (most first), then posts spread over the run; each author with "
        "their persona's first sentences. A comment that repeats its post, verbatim or reshuffled, is marked "
        "(the groundedness metric's copying measure, docs/groundedness.md).")
