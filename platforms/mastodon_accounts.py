"""Where the agents' Mastodon accounts come from: a tokens file, an environment variable, or
API sign-up. Tokens are secrets: they are read through :mod:`townsquare.secrets` only, kept in
memory, and never written to the run directory, the journal, the logs or a checkpoint.

Tokens file (``platform.tokens``), one entry per line, ``#`` comments allowed; either

    TOKEN                 (the n-th line is the n-th agent, in the order agents are built)
    AGENT_ID TOKEN        (by agent id, separated by whitespace; e.g. ``users-0001<TAB>...``)

but not both in one file. ``platform.tokens_env`` names an environment variable holding the
same entries separated by newlines or commas.

API sign-up (no tokens given; the server must allow registrations without approval or e-mail
confirmation, as mastodon-mock does): one app, then one account per agent. The tokens go to a
0600 file outside the run directory (:func:`token_store_path`), so that ``resume`` can act as
the same accounts: Mastodon 4.4 and later refuse password logins, so a lost token cannot be
recovered.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Any

from townsquare.errors import UsageError
from townsquare.secrets import read_secret_file, resolve_secrets

APP_LINE = "@app"
_USERNAME_CHARS = re.compile(r"[^a-z0-9_]")
MAX_USERNAME = 30


class Credentials:
    """Tokens by agent id or by position, from the configured sources."""

    def __init__(self, by_agent: dict[str, str] | None = None, ordered: list[str] | None = None, source: str = "none"):
        self.by_agent = dict(by_agent or {})
        self.ordered = list(ordered or [])
        self.source = source

    @property
    def configured(self) -> bool:
        return bool(self.by_agent or self.ordered)

    def token_for(self, agent_id: str, index: int) -> str | None:
        if agent_id in self.by_agent:
            return self.by_agent[agent_id]
        if self.ordered and index < len(self.ordered):
            return self.ordered[index]
        return None

    def __len__(self) -> int:
        return len(self.by_agent) or len(self.ordered)


def parse_entries(entries: list[str], where: str) -> tuple[dict[str, str], list[str]]:
    """``TOKEN`` lines -> ordered list; ``AGENT_ID TOKEN`` lines -> mapping. Mixing is an error."""
    by_agent: dict[str, str] = {}
    ordered: list[str] = []
    for number, entry in enumerate(entries, 1):
        fields = entry.split()
        if len(fields) == 1:
            ordered.append(fields[0])
        elif len(fields) == 2:
            if fields[0] in by_agent:
                raise UsageError(f"{where}: agent {fields[0]!r} appears twice (entry {number})")
            by_agent[fields[0]] = fields[1]
        else:
            raise UsageError(f"{where}: entry {number} is neither TOKEN nor AGENT_ID TOKEN")
    if by_agent and ordered:
        raise UsageError(f"{where}: mixes TOKEN and AGENT_ID TOKEN entries; use one form")
    return by_agent, ordered


def load_credentials(tokens_file: str | None, tokens_env: str | None, base_dir: str) -> Credentials:
    """Tokens from ``tokens_file`` or the variable ``tokens_env``; empty when neither is set."""
    if tokens_file:
        entries = read_secret_file(tokens_file, base_dir, what="Mastodon access token")
        by_agent, ordered = parse_entries(entries, f"tokens file {tokens_file}")
        return Credentials(by_agent, ordered, "file")
    if tokens_env:
        raw = resolve_secrets(env=tokens_env, what="Mastodon access tokens")
        entries = [e.strip() for e in re.split(r"[\n,]", raw[0]) if e.strip() and not e.strip().startswith("#")]
        by_agent, ordered = parse_entries(entries, f"environment variable {tokens_env}")
        return Credentials(by_agent, ordered, "env")
    return Credentials()


# ---------------------------------------------------------------------- the token store

def default_token_store() -> Path:
    """``$XDG_STATE_HOME/townsquare/mastodon`` (``~/.local/state/townsquare/mastodon``)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "townsquare" / "mastodon"


def token_store_path(directory: str | Path, base_url: str, run_key: str) -> Path:
    """The file holding one run's sign-up tokens: named by a hash of the server and the run's
    journal key, so it follows the run directory if that is moved."""
    digest = hashlib.sha256(f"{base_url.rstrip('/')}\n{run_key}".encode()).hexdigest()[:16]
    return Path(directory).expanduser() / f"{digest}.tokens"


class TokenStore:
    """Append-only ``AGENT_ID<TAB>TOKEN`` lines in a 0600 file (plus one ``@app`` line with the
    sign-up app's client id and secret). ``path=None`` keeps them in memory only."""

    def __init__(self, path: Path | None):
        self.path = path
        self.tokens: dict[str, str] = {}
        self.app: tuple[str, str] | None = None
        if path is not None and path.exists():
            for entry in read_secret_file(path, what="Mastodon sign-up token"):
                fields = entry.split("\t")
                if fields[0] == APP_LINE and len(fields) == 3:
                    self.app = (fields[1], fields[2])
                elif len(fields) == 2:
                    self.tokens[fields[0]] = fields[1]

    def _append(self, line: str) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def put(self, agent_id: str, token: str) -> None:
        self.tokens[agent_id] = token
        self._append(f"{agent_id}\t{token}")

    def put_app(self, client_id: str, client_secret: str) -> None:
        self.app = (client_id, client_secret)
        self._append(f"{APP_LINE}\t{client_id}\t{client_secret}")


def username_for(agent_id: str, run_key: str, prefix: str) -> str:
    """A valid, run-unique Mastodon username (``[a-z0-9_]``, at most 30 characters)."""
    slug = _USERNAME_CHARS.sub("_", agent_id.lower())
    name = f"{prefix}{run_key[:6]}_{slug}"
    if len(name) > MAX_USERNAME:
        name = f"{prefix}{run_key[:6]}_{hashlib.sha256(agent_id.encode()).hexdigest()[:10]}"
    return name[:MAX_USERNAME]


def new_password() -> str:
    return secrets.token_urlsafe(24)


def sign_up(transport: Any, store: TokenStore, agent_id: str, username: str, email_domain: str, app_name: str) -> str:
    """Create the account ``username`` by API sign-up and return its token (already stored)."""
    m = transport.m
    if store.app is None:
        client_id, client_secret = transport.retrying(
            lambda: m.Mastodon.create_app(app_name, scopes=["read", "write", "follow"], api_base_url=transport.base_url,
                                          request_timeout=transport.request_timeout, session=transport.session,
                                          user_agent=transport.user_agent),
            "register the sign-up app",
        )
        store.put_app(client_id, client_secret)
    client_id, client_secret = store.app
    app = transport.new_client(client_id=client_id, client_secret=client_secret)
    tries = 0
    while True:
        tries += 1
        try:
            token, error = app.create_account(username, new_password(), f"{username}@{email_domain}", agreement=True,
                                              return_detailed_error=True)
        except (m.MastodonNetworkError, m.MastodonIllegalArgumentError) as exc:
            # Mastodon.py wraps a failed client-credentials step in IllegalArgumentError.
            token, error = None, {"error": str(exc)[:200]}
        if token:
            store.put(agent_id, token)
            return token
        details = dict(error or {}).get("details") or {}
        taken = any(d.get("error") == "ERR_TAKEN" for d in (details.get("username") or []) if hasattr(d, "get"))
        if taken:
            hint = "" if tries == 1 else " (an earlier try may have created it and lost the answer)"
            raise UsageError(
                f"mastodon sign-up for {agent_id}: username {username!r} is taken{hint}; "
                "remove the account (tootctl accounts delete) or give platform.tokens"
            )
        if details or tries > transport.max_retries:
            message = dict(error or {}).get("error") or "refused"
            raise UsageError(f"mastodon sign-up for {agent_id} refused by {transport.base_url}: {message} {dict(details)}".strip())
        transport.sleep(transport._backoff(tries))
