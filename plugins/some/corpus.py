"""The data SoMe's tools search: posts, user profiles and a knowledge base.

Two sources fill a :class:`Corpus`:

* a townsquare run (:func:`corpus_from_run`): the ``posts``, ``actions``, ``follows`` and
  ``agents`` tables of its ``events.sqlite``, optionally cut at a round so that the tools only
  see what happened before the period the labels come from (``until_round``);
* a SoMe database folder (:func:`corpus_from_some`), laid out as the benchmark's test scripts
  read it: ``post_data/all_posts.json``, ``user_data/<uid>/<uid>.json`` and
  ``knowledge_data/knowledge_base.json`` (Xue et al., "Data Sources"; the posts are not in the
  benchmark's repository, a user downloads them).

A post keeps SoMe's fields (``weibo_key2entry``: text, created time, region, reposts,
comments, likes); a run's simulated clock gives the created time.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from townsquare.api import UsageError

#: the created-time format of SoMe's posts and of its tools' time arguments
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True)
class Post:
    id: str
    author: str
    text: str
    created: str  # TIME_FORMAT
    author_name: str = ""
    region: str = ""
    reposts: int = 0
    comments: int = 0
    likes: int = 0
    reply_to: str | None = None
    round: int = -1

    def show(self) -> str:
        """One readable line, as SoMe's display function writes a post."""
        where = f" | region: {self.region}" if self.region else ""
        reply = f" | reply to post {self.reply_to}" if self.reply_to else ""
        return (f"[post {self.id}] {self.created} | by {self.author_name or self.author} (ID {self.author}){where}{reply}"
                f" | reposts {self.reposts}, comments {self.comments}, likes {self.likes}\n{self.text}")


@dataclass(frozen=True)
class User:
    id: str
    name: str
    description: str = ""
    location: str = ""
    followers: int = 0
    following: int = 0

    def show(self) -> str:
        return (f"user ID {self.id}, name {self.name}; followers {self.followers}, following {self.following}"
                + (f"; location {self.location}" if self.location else "")
                + (f"\nprofile: {self.description}" if self.description else ""))


@dataclass(frozen=True)
class Document:
    """A knowledge-base report (MID's fact-checking reports)."""

    id: str
    text: str
    title: str = ""

    def show(self) -> str:
        return f"[document {self.id}] {self.title}\n{self.text}" if self.title else f"[document {self.id}]\n{self.text}"


@dataclass
class Corpus:
    posts: list[Post]
    users: dict[str, User]
    knowledge: list[Document] = field(default_factory=list)
    #: where it came from, for messages
    source: str = ""

    def __post_init__(self) -> None:
        self.by_id = {p.id: p for p in self.posts}
        self._by_author: dict[str, list[Post]] = {}
        for post in self.posts:
            self._by_author.setdefault(post.author, []).append(post)

    def posts_of(self, user_id: str) -> list[Post]:
        return self._by_author.get(user_id, [])


# --------------------------------------------------------------------------- a townsquare run


def corpus_from_run(events_path: str | Path, until_round: int | None = None) -> Corpus:
    """The run's posts and accounts; with ``until_round``, only rounds before it (counts too)."""
    path = Path(events_path)
    if not path.is_file():
        raise UsageError(f"{path}: no events.sqlite (not a run directory, or the run has not started)")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return _read_run(db, until_round, str(path))
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"{path}: not a readable event store ({exc})") from None
    finally:
        db.close()


def _read_run(db: sqlite3.Connection, until: int | None, source: str) -> Corpus:
    limit = 10**9 if until is None else until
    names, users = {}, {}
    for agent_id, name, persona in db.execute("SELECT agent_id, name, persona FROM agents ORDER BY idx"):
        names[agent_id] = name
        users[agent_id] = User(agent_id, name, persona_text(persona))
    counts: dict[tuple[str, str], int] = {}
    for kind, target, n in db.execute("SELECT kind, target_post, COUNT(*) FROM actions WHERE ok = 1 AND round < ? "
                                      "AND target_post IS NOT NULL GROUP BY kind, target_post", (limit,)):
        counts[(kind, target)] = n
    posts = [
        Post(id=str(pid), author=author, text=text or "", created=run_time(created), author_name=names.get(author, author),
             reposts=counts.get(("reblog", pid), 0), comments=counts.get(("comment", pid), 0), likes=counts.get(("like", pid), 0),
             reply_to=reply_to, round=r)
        for pid, author, r, created, text, reply_to in db.execute(
            "SELECT post_id, author_id, round, created_at, text, reply_to FROM posts WHERE round < ? ORDER BY round, rowid", (limit,))
    ]
    followers: dict[str, set[str]] = {}
    following: dict[str, set[str]] = {}
    for follower, followee, kind in db.execute("SELECT follower, followee, kind FROM follows WHERE round < ? ORDER BY seq", (limit,)):
        if kind == "unfollow":
            followers.get(followee, set()).discard(follower)
            following.get(follower, set()).discard(followee)
        else:
            followers.setdefault(followee, set()).add(follower)
            following.setdefault(follower, set()).add(followee)
    users = {uid: User(u.id, u.name, u.description, followers=len(followers.get(uid, ())), following=len(following.get(uid, ())))
             for uid, u in users.items()}
    return Corpus(posts, users, source=source)


def persona_text(stored: str | None, limit: int = 400) -> str:
    """A persona row (the JSON of :class:`townsquare.api.Persona`) as a short profile text."""
    if not stored:
        return ""
    try:
        data = json.loads(stored)
    except json.JSONDecodeError:
        return stored[:limit]
    if not isinstance(data, dict):
        return str(data)[:limit]
    parts = [str(s) for s in data.get("sentences", [])]
    parts += [f"{k}: {v}" for k, v in (data.get("fields") or {}).items() if isinstance(v, (str, int, float)) and v != ""]
    return " ".join(parts)[:limit]


def run_time(created: str | None) -> str:
    """A stored ISO time as SoMe writes times (``2024-03-04 06:00:00``)."""
    if not created:
        return ""
    try:
        return datetime.fromisoformat(created).strftime(TIME_FORMAT)
    except ValueError:
        return created


def parse_time(value: str, what: str) -> datetime:
    """A time argument as SoMe's tools take it; ValueError names ``what``."""
    text = str(value).strip().replace("T", " ")
    for fmt in (TIME_FORMAT, "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise ValueError(f"{what} {value!r} is not a time like 2025-06-01 08:00:00")


def shift(time: str, minutes: int) -> str:
    return (datetime.strptime(time, TIME_FORMAT) + timedelta(minutes=minutes)).strftime(TIME_FORMAT)


# --------------------------------------------------------------------------- a SoMe database folder


def corpus_from_some(folder: str | Path) -> Corpus:
    """A SoMe ``database`` folder (see the module docstring); any of the three parts may be absent."""
    root = Path(folder)
    if not root.is_dir():
        raise UsageError(f"{root}: no such folder (expected a SoMe database with post_data/, user_data/, knowledge_data/)")
    posts: dict[str, Post] = {}
    users: dict[str, User] = {}
    all_posts = root / "post_data" / "all_posts.json"
    if all_posts.is_file():
        for record in _records(read_json(all_posts), all_posts):
            post = some_post(record, all_posts)
            posts[post.id] = post
    for user_file in sorted((root / "user_data").glob("*/*.json")):
        data = read_json(user_file)
        profile = data.get("user") if isinstance(data, dict) else None
        if not isinstance(profile, dict) or "id" not in profile:
            raise UsageError(f"{user_file}: user: expected an object with an id (SoMe's user record)")
        user = User(id=str(profile["id"]), name=str(profile.get("name") or profile.get("screen_name") or profile["id"]),
                    description=" ".join(str(profile.get(k) or "") for k in ("description", "verified_reason")).strip(),
                    location=str(profile.get("location") or ""), followers=_int(profile.get("followers_count")),
                    following=_int(profile.get("friends_count")))
        users[user.id] = user
        for record in data.get("weibo") or []:
            post = some_post({"user_id": user.id, "user_name": user.name, **record}, user_file)
            posts.setdefault(post.id, post)
    knowledge: list[Document] = []
    kb = root / "knowledge_data" / "knowledge_base.json"
    if kb.is_file():
        knowledge = knowledge_documents(read_json(kb), kb)
    if not posts and not users and not knowledge:
        raise UsageError(f"{root}: found no post_data/all_posts.json, user_data/<uid>/<uid>.json or knowledge_data/knowledge_base.json")
    ordered = sorted(posts.values(), key=lambda p: p.created)
    return Corpus(ordered, users, knowledge, source=str(root))


def some_post(record: Any, where: Path) -> Post:
    if not isinstance(record, dict) or "id" not in record or "text" not in record:
        raise UsageError(f"{where}: a post needs id and text (SoMe's post record), got {str(record)[:80]!r}")
    author = str(record.get("user_id") or record.get("uid") or (record.get("user") or {}).get("id") or "")
    return Post(id=str(record["id"]), author=author, text=str(record["text"]), created=str(record.get("created_time") or ""),
                author_name=str(record.get("user_name") or (record.get("user") or {}).get("name") or ""),
                region=str(record.get("region_name") or ""), reposts=_int(record.get("reposts_count")),
                comments=_int(record.get("comments_count")), likes=_int(record.get("attitudes_count")))


def knowledge_documents(data: Any, where: Path | str) -> list[Document]:
    """Reports from a list (of strings or ``{id, title, text}`` objects) or an ``{id: text}`` map."""
    items = list(data.items()) if isinstance(data, dict) else list(enumerate(data)) if isinstance(data, list) else None
    if items is None:
        raise UsageError(f"{where}: expected a list of reports or an object of id -> report")
    documents = []
    for key, value in items:
        if isinstance(value, str):
            documents.append(Document(str(key), value))
        elif isinstance(value, dict) and isinstance(value.get("text") or value.get("content"), str):
            documents.append(Document(str(value.get("id", key)), value.get("text") or value.get("content"), str(value.get("title") or "")))
        else:
            raise UsageError(f"{where}: report {key!r}: expected text or an object with a text field")
    return documents


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it ({exc})") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None


def _records(data: Any, where: Path) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        return [{"id": key, **value} if isinstance(value, dict) else value for key, value in data.items()]
    raise UsageError(f"{where}: expected a list of posts or an object of id -> post")


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


_WORD = re.compile(r"#[^#\s]+#?|[^\W\d_]{3,}", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased words of three letters or more and hashtags (``#tag`` or Weibo's ``#tag#``)."""
    return [w.lower().strip("#") if w.startswith("#") else w.lower() for w in _WORD.findall(text)]
