"""The connection to one Mastodon server that the platform's parts share.

One object, built once by :func:`open_connection` and handed to every part (:mod:`.writes`,
:mod:`.feed`, :mod:`.profiles`, :mod:`.cleanup`): the settings, the transport (Mastodon.py
clients, retries, rate limits), the exactly-once journal, the credentials or token store, the
local state, and the agents' accounts. The parts never reach back into the platform object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .accounts import TokenStore, default_token_store, load_credentials, token_store_path
from .client import Transport
from .config import MastodonConfig
from .journal import JOURNAL_NAME, Journal
from .state import LocalState


@dataclass
class AgentAccount:
    remote_id: str
    acct: str
    token: str = field(repr=False)


@dataclass
class Connection:
    """What the parts of the adapter share (see the module docstring)."""

    config: MastodonConfig
    transport: Transport
    journal: Journal
    credentials: Any
    store: TokenStore | None = None
    recommender: Any = None
    state: LocalState = field(default_factory=LocalState)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    accounts: dict[str, AgentAccount] = field(default_factory=dict)
    agent_of_remote: dict[str, str] = field(default_factory=dict)

    def any_token(self) -> str | None:
        return next(iter(self.accounts.values())).token if self.accounts else None

    def close(self) -> None:
        self.transport.close()
        self.journal.close()


def open_connection(config: MastodonConfig, run_dir: str | None = None, base_dir: str = ".", transport: Transport | None = None,
                    recommender: Any = None) -> Connection:
    """The connection of a run: its journal in ``run_dir`` (in memory if None), its tokens from
    the tokens file / environment, or else the sign-up token store."""
    journal = Journal(Path(run_dir) / JOURNAL_NAME if run_dir else None)
    transport = transport or Transport(
        config.base_url, request_timeout=config.request_timeout, max_retries=config.max_retries,
        backoff_base=config.backoff_base, backoff_cap=config.backoff_cap, max_ratelimit_wait=config.max_ratelimit_wait,
        ratelimit_method=config.ratelimit_method, read_parallelism=config.read_parallelism,
        write_parallelism=config.write_parallelism,
    )
    journal.set_meta("base_url", config.base_url)
    tokens = str((Path(base_dir) / config.tokens).resolve()) if config.tokens else None
    credentials = load_credentials(tokens, config.tokens_env, base_dir)
    store = None
    if not credentials.configured:
        folder = str(Path(config.token_store).expanduser().resolve()) if config.token_store else journal.meta("token_store")
        if folder is None and run_dir:
            # Remembered, so a resume from another shell (another $XDG_STATE_HOME) finds it.
            folder = str(default_token_store())
            journal.set_meta("token_store", folder)
        path = token_store_path(folder, config.base_url, journal.run_key) if folder and run_dir else None
        store = TokenStore(path)
    return Connection(config, transport, journal, credentials, store, recommender)
