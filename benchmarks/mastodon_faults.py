"""The Mastodon quickstart behind HTTP faults, sign-up included, over several seeds.

    python benchmarks/mastodon_faults.py [--seeds 10] [--rate 0.15] [--out DIR]

For each seed: a fresh mastodon-mock server (which, like Mastodon 4.4 and later, allows no
password login) behind the seeded fault proxy of ``tests/support/mastodon_proxy.py``, every
kind of fault (HTML 502s before and after the server acted, resets, cut-off bodies, 429s with
and without ``Retry-After``, slow answers, answers held past the client's timeout) at
``--rate`` in all on every request; then ``examples/quickstart.toml`` on the scripted test
model through the CLI, as a user runs it. A seed passes when the run finishes (exit 0), the
server's statuses, favourites, reblogs, replies and follow edges equal the export's, every
account on the server beyond the agents' is an orphan the run recorded, and ``townsquare
mastodon cleanup`` removes the orphans. Prints one line per seed and a summary; exit 1 when
a seed fails.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from mastodon_proxy import KINDS, FaultProxy  # noqa: E402
from mastodon_server import MockMastodon, journal_accounts, server_against_export  # noqa: E402

QUICKSTART = ROOT / "examples" / "quickstart.toml"
AGENTS = 11


def townsquare(*args: str, state: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True, env=env, timeout=3600)


def one_seed(seed: int, rate: float, folder: Path) -> dict:
    with MockMastodon(folder / "mock") as mock, FaultProxy(mock.url, seed=seed, hang_s=1.0) as proxy:
        proxy.configure({kind: rate / len(KINDS) for kind in KINDS})
        started = time.monotonic()
        run = townsquare("run", str(QUICKSTART), "--out", str(folder / "run"), "--llm", "scripted", "--quiet",
                         "--set", "platform.name=mastodon", "--set", f"platform.base_url={proxy.url}",
                         "--set", "platform.request_timeout=0.8", "--set", "platform.max_retries=8",
                         "--set", "platform.backoff_base=0.05", "--set", "platform.backoff_cap=0.5", state=folder / "state")
        seconds = time.monotonic() - started
        faults = sum(proxy.counts.values())
        proxy.configure({})
        row = {"seed": seed, "exit": run.returncode, "seconds": round(seconds, 1), "faults": faults, "problems": []}
        if run.returncode != 0:
            row["problems"].append((run.stderr.strip().splitlines() or ["(no output)"])[-1])
            return row
        _, differences = server_against_export(mock, folder / "run")
        row["problems"] += differences
        db = sqlite3.connect(folder / "run" / "mastodon_journal.sqlite")
        orphans = [name for (name,) in db.execute("SELECT username FROM orphans")]
        db.close()
        row["orphans"] = len(orphans)
        accounts = mock.stats()["user_count"] - 1  # the mock's own seeded account aside
        if len(journal_accounts(folder / "run")) != AGENTS or accounts != AGENTS + len(orphans):
            row["problems"].append(f"{accounts} accounts on the server for {AGENTS} agents and {len(orphans)} recorded orphans")
        cleaned = townsquare("mastodon", "cleanup", str(folder / "run"), state=folder / "state")
        if cleaned.returncode != 0 or mock.stats()["user_count"] - 1 != AGENTS:
            row["problems"].append(f"cleanup left {mock.stats()['user_count'] - 1 - AGENTS} orphans (exit {cleaned.returncode})")
        return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=0.15, help="share of requests that meet a fault (every kind alike)")
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args()
    base = args.out or Path(tempfile.mkdtemp(prefix="mastodon-faults-"))
    passed = 0
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        row = one_seed(seed, args.rate, base / f"seed-{seed}")
        passed += not row["problems"]
        print(f"seed {seed}: exit {row['exit']}, {row['seconds']} s, {row['faults']} faults injected, "
              f"{row.get('orphans', '-')} orphaned sign-ups, " + ("server = export" if not row["problems"] else "; ".join(row["problems"])),
              flush=True)
    print(f"{passed} of {args.seeds} seeds finished with the server's counts equal to the export ({args.rate:.0%} faults; runs in {base})")
    return 0 if passed == args.seeds else 1


if __name__ == "__main__":
    sys.exit(main())
