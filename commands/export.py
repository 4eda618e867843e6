"""``townsquare export``: the run's tables as CSV, JSON lines or Parquet, for notebooks, and the
agents' memories (:mod:`townsquare.lib.memory_export`)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterable, Iterator

import click

from townsquare.api import hookimpl
from townsquare.cli.options import common_options
from townsquare.errors import UsageError
from townsquare.lib.memory_export import MEMORY_TABLE, memory_rows
from townsquare.store import EXPORT_TABLES, EventStore

FORMATS = ("csv", "jsonl", "parquet")


def export_run(events_path: Path, fmt: str, out_dir: Path, tables: tuple[str, ...] = tuple(EXPORT_TABLES)) -> list[Path]:
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise UsageError("--format parquet needs pyarrow: pip install 'townsquare[parquet]'") from None
    if not Path(events_path).is_file():
        raise UsageError(f"{events_path}: no such file (nothing to export)")  # never create an empty database
    EventStore(events_path).close()  # a damaged file is said before anything is made
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot create the folder: {exc.strerror}") from None
    written = []
    for table, columns, rows in read_tables(events_path, (*tables, MEMORY_TABLE)):
        path = out_dir / f"{table}.{fmt}"
        try:
            _WRITERS[fmt](path, columns, rows)
        except OSError as exc:
            raise UsageError(f"--out {out_dir}: cannot write {path.name}: {exc.strerror}") from None
        written.append(path)
    return written


def read_tables(events_path: Path, tables: Iterable[str]) -> Iterator[tuple[str, list[str], Iterable[tuple]]]:
    """``(name, columns, rows)`` of each table named: a table of ``events.sqlite`` (rows in
    :data:`~townsquare.store.EXPORT_TABLES` order) or ``memories`` (from the newest checkpoint).
    Read each table's rows before asking for the next."""
    store = EventStore(events_path)
    try:
        for table in tables:
            columns, rows = memory_rows(Path(events_path).parent) if table == MEMORY_TABLE else store.rows(table)
            yield table, columns, rows
    finally:
        store.close()


def _write_csv(path: Path, columns: list[str], rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows(rows)


def _write_jsonl(path: Path, columns: list[str], rows) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(dict(zip(columns, row)), ensure_ascii=False) + "\n")


def _write_parquet(path: Path, columns: list[str], rows) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = list(rows)
    arrays = {name: [row[i] for row in data] for i, name in enumerate(columns)}
    pq.write_table(pa.table(arrays), path)


_WRITERS = {"csv": _write_csv, "jsonl": _write_jsonl, "parquet": _write_parquet}


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.command("export")
    @click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
    @click.option("--format", "fmt", type=click.Choice(FORMATS), default="csv", show_default=True)
    @click.option("--out", type=click.Path(file_okay=False), required=True, help="Folder for the table files.")
    @common_options
    def export(run_dir: str, fmt: str, out: str, **_: Any) -> None:
        """Write the tables agents, posts, actions, follows, llm_calls and metrics."""
        from townsquare.launch.run_lock import open_run

        run = open_run(run_dir)
        if not run.events_path.is_file():
            raise UsageError(f"{run_dir}: no events.sqlite yet (the run has not started): nothing to export")
        for path in export_run(run.events_path, fmt, Path(out)):
            click.echo(str(path))
