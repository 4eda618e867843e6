"""Mastodon REST entities (Status, Account, Relationship) as small immutable records.

The adapter reads what it needs from the server's JSON and nothing else: ids (strings of
digits on Mastodon; Mastodon.py hands them over as ints), the author's counts, and a status's
``favourites_count``, ``reblogs_count`` and ``replies_count``, which the recommenders rank by.
Input may be plain JSON (``dict``) or Mastodon.py's attribute dictionaries: both are mappings.
Times come as ISO 8601 strings (JSON) or ``datetime`` (Mastodon.py); both become aware UTC
datetimes.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_PARAGRAPH = re.compile(r"</p>\s*<p[^>]*>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")
_SPACES = re.compile(r"[ \t]+")


@dataclass(frozen=True)
class RemoteAccount:
    id: str
    username: str
    acct: str
    display_name: str = ""
    note: str = ""
    followers: int = 0
    following: int = 0
    statuses: int = 0
    bot: bool = False


@dataclass(frozen=True)
class RemoteStatus:
    id: str
    account: RemoteAccount
    text: str
    created_at: datetime
    visibility: str = "public"
    in_reply_to_id: str | None = None
    reblog: "RemoteStatus | None" = None
    favourites: int = 0
    reblogs: int = 0
    replies: int = 0

    @property
    def original(self) -> "RemoteStatus":
        """The status a timeline entry shows: the reblogged one for a reblog."""
        return self.reblog if self.reblog is not None else self


@dataclass(frozen=True)
class RemoteRelationship:
    id: str
    following: bool = False
    followed_by: bool = False
    requested: bool = False


def html_to_text(content: str | None) -> str:
    """Plain text of a status's HTML ``content``: paragraphs and line breaks become newlines,
    tags are dropped, entities unescaped (Mastodon sends ``text`` only for deleted statuses)."""
    if not content:
        return ""
    text = _PARAGRAPH.sub("\n\n", content)
    text = _BREAK.sub("\n", text)
    text = html.unescape(_TAG.sub("", text))
    return "\n".join(_SPACES.sub(" ", line).strip() for line in text.split("\n")).strip()


def parse_time(value: Any) -> datetime:
    """An aware UTC datetime from an ISO string (``...Z`` included) or a datetime."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    else:
        raise ValueError(f"not a time: {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def _id(value: Any) -> str | None:
    return None if value is None else str(value)


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return int(value) if value is not None else 0


def parse_account(data: Mapping[str, Any]) -> RemoteAccount:
    return RemoteAccount(
        id=str(data["id"]),
        username=str(data.get("username") or ""),
        acct=str(data.get("acct") or data.get("username") or ""),
        display_name=str(data.get("display_name") or ""),
        note=html_to_text(data.get("note")),
        followers=_count(data, "followers_count"),
        following=_count(data, "following_count"),
        statuses=_count(data, "statuses_count"),
        bot=bool(data.get("bot")),
    )


def parse_status(data: Mapping[str, Any]) -> RemoteStatus:
    reblog = data.get("reblog")
    return RemoteStatus(
        id=str(data["id"]),
        account=parse_account(data["account"]),
        text=html_to_text(data.get("content")),
        created_at=parse_time(data["created_at"]),
        visibility=str(data.get("visibility") or "public"),
        in_reply_to_id=_id(data.get("in_reply_to_id")),
        reblog=parse_status(reblog) if reblog else None,
        favourites=_count(data, "favourites_count"),
        reblogs=_count(data, "reblogs_count"),
        replies=_count(data, "replies_count"),
    )


def parse_relationship(data: Mapping[str, Any]) -> RemoteRelationship:
    return RemoteRelationship(
        id=str(data["id"]),
        following=bool(data.get("following")),
        followed_by=bool(data.get("followed_by")),
        requested=bool(data.get("requested")),
    )


def same_text(posted: str, content_text: str) -> bool:
    """Whether a status whose content renders to ``content_text`` carries ``posted``: the
    server turns text into HTML (links, mentions, line breaks), so compare words only."""
    return posted.split() == content_text.split()
