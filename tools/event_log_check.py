"""Same examples, same event logs: every offline example run for a few rounds on two checkouts.

    python tools/event_log_check.py --against /path/to/other/checkout [--rounds 3] [--jobs 2]

Runs every scenario of ``examples/`` with the oracle model (``--llm oracle``, the test model
that answers from the prompt alone; examples that need a model's free text get it from the
oracle too) and the ``--rounds`` given, through each checkout's own ``townsquare`` command
(``CHECKOUT/.venv/bin/townsquare``), and compares every table of the two ``events.sqlite``
files row by row, leaving out the wall-clock columns (``rounds.wall_seconds``,
``llm_calls.latency_ms``). Prints one line per example (``same``, the first table and row that
differ, or why the example could not run on this machine) and exits 1 when any example that
ran on both differs. Examples that read installed datasets (``recagent``, ``smallville``) run
when ``$TOWNSQUARE_DATA`` holds them (``townsquare data fetch NAME --from COPY``). A refactor that must not change behaviour is checked with it against the
commit it started from.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: columns that hold wall-clock measurements: never equal between two runs
WALL_CLOCK = {("rounds", "wall_seconds"), ("llm_calls", "latency_ms")}
#: settings that make an example small enough to run here (social_media's second feed stage
#: starts at round 169: it is moved to round 2)
SETTINGS = {
    "social_media": ["populations.0.count=15", "populations.1.count=30",
                     'populations.1.feed_stages=[{start_round = 1, end_round = 2, authors = ["initial"]}, '
                     '{start_round = 2, authors = ["regular"]}]'],
}


def tables(path: Path) -> dict[str, list[tuple]]:
    """Every table's rows (wall-clock columns left out), in rowid order."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        out = {}
        for name in names:
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({name})")]
            kept = [c for c in columns if (name, c) not in WALL_CLOCK]
            out[name] = db.execute(f"SELECT {', '.join(kept)} FROM {name} ORDER BY rowid").fetchall()
        return out
    finally:
        db.close()


def run(checkout: Path, scenario: Path, rounds: int, out: Path) -> str | None:
    """Run ``scenario`` with ``checkout``'s townsquare into ``out``; None, or why it did not run."""
    command = [str(checkout / ".venv" / "bin" / "townsquare"), "run", str(scenario), "--llm", "oracle",
               "--set", f"rounds={rounds}", "--out", str(out), "--quiet"]
    for setting in SETTINGS.get(scenario.stem, []):
        command += ["--set", setting]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True)
    if done.returncode != 0 or not (out / "events.sqlite").is_file():
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        return f"exit {done.returncode}: {lines[-1][:200] if lines else '(no output)'}"
    return None


def differences(a: dict[str, list[tuple]], b: dict[str, list[tuple]]) -> str | None:
    """The first difference between two runs' tables, or None."""
    if sorted(a) != sorted(b):
        return f"tables differ: {sorted(set(a) ^ set(b))}"
    for name in sorted(a):
        rows_a, rows_b = a[name], b[name]
        for k, (row_a, row_b) in enumerate(zip(rows_a, rows_b)):
            if row_a != row_b:
                return f"{name} row {k}: {row_a!r} != {row_b!r}"[:400]
        if len(rows_a) != len(rows_b):
            return f"{name}: {len(rows_a)} rows != {len(rows_b)} rows"
    return None


def check(example: Path, here: Path, other: Path, rounds: int, work: Path) -> tuple[str, str, bool]:
    """``(example, verdict, differs)``."""
    runs = {}
    for label, checkout in (("here", here), ("other", other)):
        out = work / f"{example.stem}-{label}"
        problem = run(checkout, checkout / "examples" / example.name, rounds, out)
        if problem is not None:
            return example.stem, f"not run ({label}: {problem})", False
        runs[label] = tables(out / "events.sqlite")
    found = differences(runs["here"], runs["other"])
    counts = ", ".join(f"{name} {len(rows)}" for name, rows in sorted(runs["here"].items()) if rows)
    return example.stem, (f"DIFFERS: {found}" if found else f"same ({counts})"), found is not None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, type=Path, help="the other checkout (with its own .venv)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None, help="example names (default: every examples/*.toml)")
    args = parser.parse_args(argv)
    examples = sorted((ROOT / "examples").glob("*.toml"))
    if args.only:
        examples = [e for e in examples if e.stem in args.only]
    with tempfile.TemporaryDirectory(prefix="event-log-check-") as work:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda e: check(e, ROOT, args.against.resolve(), args.rounds, Path(work)), examples))
    for name, verdict, _ in results:
        print(f"{name:32} {verdict}")
    return 1 if any(differs for _, _, differs in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
