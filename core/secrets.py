"""The one place secrets (API keys, Mastodon tokens) are read.

A config names where a secret lives, never the secret itself: an environment variable
(``api_key_env = "OPENAI_API_KEY"``) or a file (``api_key_file = "keys.txt"``, one secret per
line; blank lines and ``#`` comments are skipped). Values are returned to the component that
asked and are never logged, stored in the manifest or written to ``events.sqlite``.

Every value resolved here is also remembered (:func:`remember_secret`) so that error texts can
be scrubbed with :func:`redact_text` before they are stored or printed: a server that echoes
the API key back in a 401 message must not put it in the manifest, the log or the terminal.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import UsageError
from .files import read_user_text


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


def read_secret_file(path: str | Path, base_dir: str = ".", what: str = "secret") -> list[str]:
    """All secrets in a file, in order. A missing or empty file is one clear error."""
    full = Path(path) if Path(path).is_absolute() else Path(base_dir) / path
    lines = read_user_text(full, f"{what} file").splitlines()
    values = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not values:
        raise UsageError(f"{full}: no {what} in file")
    for value in values:
        remember_secret(value)
    return values


def resolve_secrets(*, env: str | None = None, file: str | None = None, base_dir: str = ".", what: str = "API key",
                    required: bool = True) -> list[str]:
    """Secrets from ``file`` if given, else from the environment variable ``env``."""
    if file:
        return read_secret_file(file, base_dir, what)
    if env:
        value = os.environ.get(env, "").strip()
        if value:
            remember_secret(value)
            return [value]
        if required:
            raise UsageError(f"{what}: environment variable {env} is not set")
    return []
