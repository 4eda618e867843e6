"""Reading secrets (API keys, Mastodon tokens): the one place a plugin gets them from.

A config names where a secret lives, never the secret itself: an environment variable
(``api_key_env = "OPENAI_API_KEY"``) or a file (``api_key_file = "keys.txt"``, one secret per
line; blank lines and ``#`` comments are skipped). Values are returned to the component that
asked and are never logged, stored in the manifest or written to ``events.sqlite``: each is
remembered (:func:`townsquare.secrets.remember_secret`) so that the kernel scrubs it from
error texts, logs and the manifest.
"""

from __future__ import annotations

import os
from pathlib import Path

from townsquare.errors import UsageError
from townsquare.secrets import remember_secret
from .files import read_user_text


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
