"""Secrets (API keys, Mastodon tokens) kept out of what a run writes and prints.

Plugins read secrets through :mod:`townsquare.lib.secret_files`, which never logs them. Every
value read there is remembered here (:func:`remember_secret`) so that error texts can be
scrubbed with :func:`redact_text` before they are stored or printed: a server that echoes the
API key back in a 401 message must not put it in the manifest, the log or the terminal.
Settings named like a secret value (:func:`is_secret_key`) are never shown either.
"""

from __future__ import annotations

import re
from typing import Any


#: Names of settings that would hold a secret value itself. Settings that say where a secret
#: lives (``api_key_env``, ``api_key_file``, ``tokens``) are not secrets and are kept.
SECRET_VALUE_KEY = re.compile(r"^(api_?key|access_?token|token|secret|client_?secret|password|authorization)$", re.IGNORECASE)


#: Values shorter than this are not scrubbed: replacing "a" or "1" everywhere would garble
#: every message, and no real key is that short.
MIN_REDACTED_LENGTH = 6

_known: set[str] = set()


def is_secret_key(name: str) -> bool:
    return bool(SECRET_VALUE_KEY.match(str(name)))


def remember_secret(value: str) -> None:
    """Add a secret value to those :func:`redact_text` removes."""
    if len(value) >= MIN_REDACTED_LENGTH:
        _known.add(value)


def remember_url_secrets(url: str) -> None:
    """The password (and a user name that is a key) of ``http://user:key@host/`` as secrets:
    an endpoint's URL may carry its key, and ``--debug`` or an error must not show it."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return
    for value in (parts.password, parts.username):
        if value:
            remember_secret(value)


def redact_text(text: str) -> str:
    """``text`` with every known secret value replaced by ``***`` (longest first, so a key
    that contains another is removed whole)."""
    if not _known or not isinstance(text, str):
        return text
    for value in sorted(_known, key=len, reverse=True):
        if value in text:
            text = text.replace(value, "***")
    return text


def redact_value(value: Any) -> Any:
    """``value`` with known secrets scrubbed from its text and settings named like a secret
    value replaced by ``***``, inside lists and dicts too (a log line's fields, a manifest)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, BaseException):
        return redact_text(f"{type(value).__name__}: {value}")
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(item) for item in value)
    if isinstance(value, dict):
        return {key: "***" if is_secret_key(key) else redact_value(item) for key, item in value.items()}
    return value
