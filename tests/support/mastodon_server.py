"""Test helper: a mastodon-mock server (the PyPI package) on a free 127.0.0.1 port.

``MockMastodon(folder).start()`` runs ``python -m mastodon_mock serve`` as a subprocess with
its SQLite database in ``folder`` (so its quirks are the real ones: one file, "database is
locked" under parallel writes), waits for ``/health`` and ``stop()`` ends it. ``reset()``
empties it between tests (``POST /api/v1/_mock/reset``), ``fault(...)`` adds a fault rule
(mastodon-mock's fault-injection plane: forced statuses, 429s, latency), ``stats()`` reads
the server-wide counts. The config file lives in ``folder`` and the server runs there, so a
project's pyproject.toml never configures it by accident.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MockMastodon:
    def __init__(self, folder: str | Path, ratelimit: tuple[int, int] | None = None):
        self.folder = Path(folder)
        self.ratelimit = ratelimit
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "MockMastodon":
        self.folder.mkdir(parents=True, exist_ok=True)
        config = f'[database]\npath = "{self.folder / "mock.sqlite"}"\n'
        if self.ratelimit:
            config += f"[ratelimit]\nenabled = true\nlimit = {self.ratelimit[0]}\nwindow_seconds = {self.ratelimit[1]}\n"
        (self.folder / "mock.toml").write_text(config)
        for _ in range(3):  # the free port may be taken between our probe and the bind
            self.port = free_port()
            log = open(self.folder / "server.log", "ab")
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mastodon_mock", "serve", "--host", "127.0.0.1", "--port", str(self.port),
                 "--config", str(self.folder / "mock.toml"), "--log-level", "warning"],
                cwd=self.folder, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            log.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    with urllib.request.urlopen(self.url + "/health", timeout=1) as response:
                        if response.status == 200:
                            return self
                except OSError:
                    time.sleep(0.1)
            self.stop()
        raise RuntimeError(f"mastodon-mock did not start; see {self.folder / 'server.log'}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> "MockMastodon":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ control plane

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def reset(self) -> None:
        self._request("DELETE", "/api/v1/_mock/faults")
        self._request("POST", "/api/v1/_mock/reset", {})

    def fault(self, rule: dict[str, Any]) -> Any:
        """Add a fault rule, e.g. ``{"match": {"methods": ["POST"], "path": "/api/v1/statuses"},
        "effect": {"type": "status", "status": 500}, "count": 2}``."""
        return self._request("POST", "/api/v1/_mock/faults", rule)

    def stats(self) -> dict[str, int]:
        return self._request("GET", "/api/v1/instance")["stats"]

    def client(self, token: str | None = None) -> Any:
        from mastodon import Mastodon

        return Mastodon(access_token=token, api_base_url=self.url, version_check_mode="none", ratelimit_method="throw")


# --------------------------------------------------------------------------- platform helpers


def make_platform(mock: MockMastodon, folder: Path, **settings: Any) -> Any:
    """A Mastodon platform on ``mock`` with its run directory and token store in ``folder``."""
    from townsquare.platforms.mastodon import MastodonConfig, MastodonPlatform

    run_dir = folder / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    platform_table = {"name": "mastodon", "base_url": mock.url, "token_store": str(folder / "store"), "backoff_base": 0.05, **settings}
    # what a real run directory has: the scenario's platform table in the manifest (cleanup reads it)
    (run_dir / "manifest.json").write_text(json.dumps({"scenario": {"platform": platform_table}, "base_dir": str(folder)}))
    config = MastodonConfig(**{k: v for k, v in platform_table.items() if k != "name"})
    return MastodonPlatform(config, run_dir=str(run_dir))


async def register_agents(platform: Any, agents: tuple[str, ...] = ("a-1", "a-2", "a-3")) -> None:
    for agent in agents:
        await platform.register_account(agent, agent.upper(), f"bio of {agent}")


# --------------------------------------------------------------------------- fixtures (import them into a test module)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with MockMastodon(tmp_path_factory.mktemp("mastodon-mock")) as srv:
        yield srv


@pytest.fixture
def mock(server):
    server.reset()
    return server


@pytest.fixture
def proxy(mock):
    """A seeded fault proxy (:mod:`mastodon_proxy`) in front of a fresh mock, faults off until
    ``proxy.configure(...)``; ``proxy.url`` goes where ``mock.url`` would."""
    from mastodon_proxy import FaultProxy

    with FaultProxy(mock.url, seed=8) as fault_proxy:
        yield fault_proxy


# --------------------------------------------------------------------------- the server against a run's export


def export_tables(run_dir: Path) -> dict[str, list[dict[str, str]]]:
    """The run's exported tables (CSV, next to the run directory), as rows of strings."""
    import csv

    from townsquare.commands.export import export_run

    out = run_dir.parent / f"export-{run_dir.name}"
    export_run(run_dir / "events.sqlite", "csv", out)
    result = {}
    for path in sorted(out.glob("*.csv")):
        with open(path, newline="") as fh:
            result[path.stem] = list(csv.DictReader(fh))
    return result


def journal_accounts(run_dir: Path) -> dict[str, str]:
    """Agent id -> Mastodon id, from the run's journal."""
    import sqlite3

    db = sqlite3.connect(run_dir / "mastodon_journal.sqlite")
    try:
        return dict(db.execute("SELECT agent_id, remote_id FROM accounts"))
    finally:
        db.close()


def server_against_export(mock: MockMastodon, run_dir: Path) -> tuple[dict[str, int], list[str]]:
    """(the export's successful actions by kind, where the server's counts differ from them):
    statuses, favourites, reblogs, replies and the follow edges now."""
    from collections import Counter

    data = export_tables(run_dir)
    ok = Counter(row["kind"] for row in data["actions"] if row["ok"] == "1")
    client = mock.client("mock_token")  # the mock's seeded account; it does not enforce visibility on GET
    statuses = [client.status(row["remote_id"]) for row in data["posts"]]
    found = {
        "posts with one remote id each": (len({row["remote_id"] for row in data["posts"]}), len(data["posts"])),
        "statuses (posts, comments, reblogs)": (mock.stats()["status_count"], ok["post"] + ok["comment"] + ok["reblog"]),
        "favourites": (sum(s.favourites_count for s in statuses), ok["like"]),
        "reblogs": (sum(s.reblogs_count for s in statuses), ok["reblog"]),
        "replies": (sum(s.replies_count for s in statuses), ok["comment"]),
    }
    accounts = journal_accounts(run_dir)
    agent_of = {remote: agent for agent, remote in accounts.items()}
    edges = set()
    for agent, remote in accounts.items():
        for account in client.fetch_remaining(client.account_following(remote, limit=80)):
            edges.add((agent, agent_of.get(str(account.id), str(account.id))))
    expected = set()
    for row in data["follows"]:
        edge = (row["follower"], row["followee"])
        (expected.add if row["kind"] == "follow" else expected.discard)(edge)
    found["follow edges"] = (sorted(edges), sorted(expected))
    return dict(ok), [f"{what}: server {a}, export {b}" for what, (a, b) in found.items() if a != b]
