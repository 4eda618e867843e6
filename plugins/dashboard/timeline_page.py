"""The timeline (posts, newest first, with likes, reblogs, comments and authors) and the list
of agents."""

from __future__ import annotations

from typing import Any

from .html_parts import Raw, agent_link, join, number, pager, table, tag
from .run_reader import RunReader

POSTS_PER_PAGE = 30


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def post_card(post: dict[str, Any], names: dict[str, str]) -> Raw:
    def who(agents: list[str]) -> Raw:
        return join(join([agent_link(a, names), " "]) for a in agents)

    counts = tag("div", join([
        tag("span", plural(len(post["like"]), "like"), class_="likes"),
        tag("span", plural(len(post["reblog"]), "reblog"), class_="reblogs"),
        tag("span", plural(len(post["comments"]), "comment"), class_="comments"),
    ]), class_="counts")
    details = []
    if post["like"]:
        details.append(tag("div", join(["liked by ", who(post["like"])]), class_="by"))
    if post["reblog"]:
        details.append(tag("div", join(["reblogged by ", who(post["reblog"])]), class_="by"))
    comments = join(tag("div", join([tag("div", join([agent_link(c["author"], names), tag("span", f" round {c['round']}", class_="when")]),
                                             class_="meta"), tag("p", c["text"])]), class_="comment") for c in post["comments"])
    return tag("article", join([
        tag("div", join([agent_link(post["author"], names),
                         tag("span", f" round {post['round']} · {post['created_at'] or ''}", class_="when")]), class_="meta"),
        tag("p", post["text"], class_="text"), counts, *details, comments,
    ]), class_="post", id=f"post-{post['id']}", data_post=post["id"])


def timeline_page(reader: RunReader, offset: int) -> tuple[str, Raw]:
    posts, total = reader.timeline(POSTS_PER_PAGE, offset)
    names = reader.names()
    if not total:
        return "Timeline", tag("p", "No posts yet.", class_="empty")
    body = join([pager("/", offset, POSTS_PER_PAGE, total), tag("div", join(post_card(p, names) for p in posts), class_="timeline"),
                 pager("/", offset, POSTS_PER_PAGE, total)])
    return "Timeline", body


def agents_page(reader: RunReader) -> tuple[str, Raw]:
    agents = reader.agents()
    rows = [(agent_link(a["id"], {a["id"]: a["name"]}), a["id"], a["population"], number(a["posts"]), number(a["actions"]),
             number(a["followers"]), number(a["following"])) for a in agents]
    return "Agents", table(("agent", "id", "population", "posts", "actions", "followers", "follows"), rows, empty="no agents yet")
