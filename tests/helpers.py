"""Helpers shared by the tests (plain functions; fixtures live in conftest.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"

PERSONAS = """
[[populations]]
name = "users"
count = {count}
slots = {{ policy = "{policy}" }}
[populations.personas]
name = "inline"
items = [
  {{ name = "Ada", sentences = ["I love hiking in the mountains.", "I cook vegan food."] }},
  {{ name = "Bo", sentences = ["I play jazz piano at night.", "Mountains and hiking relax me."] }},
  {{ name = "Cy", sentences = ["I follow football every weekend.", "I cook spicy food for friends."] }},
]
"""


def scenario_text(rounds: int = 3, count: int = 3, policy: str = "embedding_baseline", extra: str = "", llm: bool = False, top: str = "") -> str:
    """A small scenario with inline personas. ``top`` holds top-level keys, ``extra`` tables."""
    head = f'name = "t"\nseed = 11\nrounds = {rounds}\n{top}\n[activity]\nmodel = "always"\n'
    if llm:
        head += '[llm]\nname = "scripted"\n'
    return head + extra + PERSONAS.format(count=count, policy=policy)


#: columns that hold wall-clock times: the only ones two runs of one scenario may differ in
WALL_CLOCK = {"latency_ms", "wall_seconds"}


def event_log(run_dir: Path | str) -> dict[str, list[tuple]]:
    """Every table of a run's ``events.sqlite`` in row order, without the wall-clock columns."""
    db = sqlite3.connect(f"file:{run_dir}/events.sqlite?mode=ro", uri=True)
    try:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        log = {}
        for table in tables:
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})") if row[1] not in WALL_CLOCK]
            log[table] = db.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid").fetchall()
        return log
    finally:
        db.close()


def read_table(run_dir: Path, table: str) -> list[tuple]:
    db = sqlite3.connect(Path(run_dir) / "events.sqlite")
    try:
        return db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
    finally:
        db.close()


def run_cli(*args: str) -> int:
    """Run the ``townsquare`` command line in this process; its exit status."""
    from townsquare.cli import main

    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def cli_in_process(capsys, *args: str) -> tuple[int, str, str]:
    """``townsquare ARGS`` in this process: (exit status, stdout, stderr)."""
    code = run_cli(*args)
    out, err = capsys.readouterr()
    return code, out, err


def count_scripted_calls(monkeypatch) -> list[str]:
    """The purposes of every request the scripted model answers from now on (a list that grows)."""
    from townsquare.testing.scripted import ScriptedLLM

    calls: list[str] = []
    original = ScriptedLLM.complete

    async def counting(self, request):
        calls.append(request.purpose)
        return await original(self, request)

    monkeypatch.setattr(ScriptedLLM, "complete", counting)
    return calls
