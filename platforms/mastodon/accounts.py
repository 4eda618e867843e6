"""Where the agents' Mastodon accounts come from: a tokens file, an environment variable, or
API sign-up. Tokens are secrets: they are read through :mod:`townsquare.lib.secret_files` only, kept in
memory, and never written to the run directory, the journal, the logs or a checkpoint.

Tokens file (``platform.tokens``), one entry per line, ``#`` comments allowed; either

    TOKEN                 (the n-th line is the n-th agent, in the order agents are built)
    AGENT_ID TOKEN        (by agent id, separated by whitespace; e.g. ``users-0001<TAB>...``)

but not both in one file. ``platform.tokens_env`` names an environment variable holding the
same entries separated by newlines or commas.

API sign-up (no tokens given; the server must allow registrations without approval or e-mail
confirmation, as mastodon-mock does): one app, then one account per agent. The tokens go to a
0600 file outside the run directory (:func:`token_store_path`), so that ``resume`` can act as
the same accounts. Sign-up is safe to repeat (:func:`sign_up`): an answer lost after the server
made the account is recovered by a password login where the server allows one; where it does
not (Mastodon 4.4 and later), the agent goes on under a new username and the account it cannot
use is recorded as an orphan, for ``townsquare mastodon cleanup`` to remove. A lost answer never
stops a run.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Any, Callable

import structlog

from townsquare.api import UsageError
from townsquare.lib.secret_files import read_secret_file, resolve_secrets

from .client import RemoteError

log = structlog.get_logger("townsquare.platforms.mastodon")

APP_LINE = "@app"
SIGNUP_LINE = "@signup"  # a sign-up about to be sent: agent, username, password
SCOPES = ["read", "write", "follow"]
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
    """Append-only ``AGENT_ID<TAB>TOKEN`` lines in a 0600 file, plus one ``@app`` line with the
    sign-up app's client id and secret and an ``@signup`` line (agent, username, password)
    written before each sign-up request leaves. ``path=None`` keeps them in memory only."""

    def __init__(self, path: Path | None):
        self.path = path
        self.tokens: dict[str, str] = {}
        self.app: tuple[str, str] | None = None
        self.pending: dict[str, tuple[str, str]] = {}
        if path is not None and path.exists():
            for entry in read_secret_file(path, what="Mastodon sign-up token"):
                fields = entry.split("\t")
                if fields[0] == APP_LINE and len(fields) == 3:
                    self.app = (fields[1], fields[2])
                elif fields[0] == SIGNUP_LINE and len(fields) == 4:
                    self.pending[fields[1]] = (fields[2], fields[3])
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

    def put_pending(self, agent_id: str, username: str, password: str) -> None:
        self.pending[agent_id] = (username, password)
        self._append(f"{SIGNUP_LINE}\t{agent_id}\t{username}\t{password}")


def username_for(agent_id: str, run_key: str, prefix: str) -> str:
    """A valid, run-unique Mastodon username (``[a-z0-9_]``, at most 30 characters)."""
    slug = _USERNAME_CHARS.sub("_", agent_id.lower())
    name = f"{prefix}{run_key[:6]}_{slug}"
    if len(name) > MAX_USERNAME:
        name = f"{prefix}{run_key[:6]}_{hashlib.sha256(agent_id.encode()).hexdigest()[:10]}"
    return name[:MAX_USERNAME]


def new_password() -> str:
    return secrets.token_urlsafe(24)


#: usernames an agent may try (its own, then ``_2``, ``_3``...) before its sign-up gives up
MAX_USERNAMES = 6


def alternate_username(username: str, k: int) -> str:
    """The ``k``-th username of an agent (k = 1: its own), at most 30 characters."""
    if k <= 1:
        return username
    suffix = f"_{k}"
    return username[: MAX_USERNAME - len(suffix)] + suffix


def sign_up(transport: Any, store: TokenStore, agent_id: str, username: str, email_domain: str, app_name: str,
            on_orphan: Callable[[str, str, str], None] | None = None) -> str:
    """Create an account for ``agent_id`` by API sign-up and return its token (already stored).

    Every request goes through the transport's retries. The username and password are stored
    before the sign-up request leaves, so an answer lost after the server made the account
    (the retry, or a resume after a crash, hears "username taken") is recognised as this
    agent's own account, and its token is recovered by logging in with the known password.
    Servers from Mastodon 4.4 on refuse password logins: there the account is an orphan,
    reported to ``on_orphan(username, agent_id, reason)`` (the run's journal keeps it for
    ``townsquare mastodon cleanup``), and the agent signs up again under its next username
    (:func:`alternate_username`); so does an agent whose username someone else has taken.
    Raises :class:`RemoteError` (``transient`` for an outage: resumable; ``fatal`` where no
    sign-up can succeed, or after :data:`MAX_USERNAMES` usernames).
    """
    app = _app(transport, store, app_name)
    names = [alternate_username(username, k) for k in range(1, MAX_USERNAMES + 1)]
    pending = store.pending.get(agent_id)
    # a process that died while a sign-up was in flight may have been at a later name already
    start = names.index(pending[0]) if pending is not None and pending[0] in names else 0
    reasons = []
    for name in names[start:]:
        token, reason = _sign_up_as(transport, store, app, agent_id, name, email_domain)
        if token is not None:
            transport.secrets.add(token)
            store.put(agent_id, token)
            if name != username:
                log.warning("mastodon.sign_up_renamed", agent=agent_id, username=name, instead_of=username)
            return token
        reasons.append(f"{name}: {reason}")
        if reason.startswith(ORPHANED) and on_orphan is not None:
            on_orphan(name, agent_id, reason)
    raise RemoteError(f"sign-up of {agent_id}: no username of {len(names)} was usable ({'; '.join(reasons[-2:])}); "
                      "give platform.tokens", status=422, fatal=True)


#: the start of the reason for an account the server made that the run cannot use
ORPHANED = "made by the server, answer lost"


def _app(transport: Any, store: TokenStore, app_name: str) -> Any:
    """The sign-up app's client (registered once, its id and secret kept in the token store)."""
    m = transport.m
    if store.app is None:
        def register_app() -> tuple[str, str]:
            try:
                return m.Mastodon.create_app(app_name, scopes=SCOPES, api_base_url=transport.base_url,
                                             request_timeout=transport.request_timeout, session=transport.session,
                                             user_agent=transport.user_agent)
            except (KeyError, TypeError):  # an error body (a 429, a 5xx) where the app should be
                raise m.MastodonAPIError("Mastodon API returned error", transport.last_status() or 0, "",
                                         "no app in the answer") from None

        client_id, client_secret = transport.retrying(register_app, "register the sign-up app")
        store.put_app(client_id, client_secret)
    client_id, client_secret = store.app
    return transport.new_client(client_id=client_id, client_secret=client_secret)


def _sign_up_as(transport: Any, store: TokenStore, app: Any, agent_id: str, username: str,
                email_domain: str) -> tuple[str | None, str]:
    """(token, "") for the account ``username``, or (None, why it cannot be this agent's)."""
    m = transport.m
    email = f"{username}@{email_domain}"
    pending = store.pending.get(agent_id)
    sent_before = pending is not None and pending[0] == username  # by a process that died waiting
    if not sent_before:
        store.put_pending(agent_id, username, new_password())
    password = store.pending[agent_id][1]
    transport.secrets.add(password)
    tries = 0

    def attempt() -> str:
        nonlocal tries
        tries += 1
        token, error = app.create_account(username, password, email, agreement=True, return_detailed_error=True)
        if token:
            return token
        # create_account returns error bodies instead of raising them: raise as Mastodon.py does
        body = dict(error or {})
        details = _error_codes(body.get("details"))
        # the status is the answer's own (a JSON 500 or 429 is retried, a 422 is a refusal)
        exc = m.MastodonAPIError("Mastodon API returned error", transport.last_status() or 422, "",
                                 f"{body.get('error') or 'refused'} {details or ''}".strip())
        exc.detail = details
        raise exc

    what = f"sign up {agent_id} as {username}"
    try:
        return transport.retrying(attempt, what), ""
    except RemoteError as exc:
        taken = any("ERR_TAKEN" in codes for codes in dict(exc.detail or {}).values())
        if not taken:
            raise RemoteError(str(exc), status=exc.status, transient=exc.transient, fatal=not exc.transient) from None
        if not (sent_before or tries > 1):
            log.warning("mastodon.username_taken", agent=agent_id, username=username, by="an account this run did not make")
            return None, "taken by an account this run did not make"
    return _recover(transport, app, agent_id, username, email, password)


def _error_codes(details: Any) -> dict[str, list[str]]:
    """``{"username": [{"error": "ERR_TAKEN", ...}], ...}`` -> ``{"username": ["ERR_TAKEN"]}``."""
    if not hasattr(details, "items"):
        return {}
    return {str(k): [str(d.get("error")) for d in v if hasattr(d, "get")] for k, v in details.items() if isinstance(v, list) and v}


def _recover(transport: Any, app: Any, agent_id: str, username: str, email: str, password: str) -> tuple[str | None, str]:
    """The token of the account that a sign-up whose answer was lost made, by a password login;
    (None, the reason) where the server refuses password logins (an orphan)."""
    what = f"log in as {username} (its sign-up answer was lost)"
    try:
        token = transport.retrying(
            lambda: app.log_in(email, password, scopes=SCOPES, allow_http=transport.base_url.startswith("http://")), what)
    except RemoteError as exc:
        if exc.transient:
            raise
        reason = f"{ORPHANED}; the server refuses password logins ({exc})"
        log.warning("mastodon.sign_up_orphaned", agent=agent_id, username=username, reason=reason,
                    cleanup="townsquare mastodon cleanup RUN removes it where the server allows, else tootctl accounts delete")
        return None, reason
    log.info("mastodon.sign_up_recovered", agent=agent_id, username=username)
    return token, ""
