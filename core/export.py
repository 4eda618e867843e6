"""``townsquare export``: the run's tables as CSV, JSON lines or Parquet, for notebooks, and the
agents' memories (:mod:`townsquare.memory_export`)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .errors import UsageError
from .memory_export import MEMORY_TABLE, memory_rows
from .store import EXPORT_TABLES, EventStore

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
    store = EventStore(events_path)  # a damaged file is said before anything is made
    written = []
    try:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--out {out_dir}: cannot create the folder: {exc.strerror}") from None
        for table in tables:
            columns, rows = store.rows(table)
            path = out_dir / f"{table}.{fmt}"
            try:
                _WRITERS[fmt](path, columns, rows)
            except OSError as exc:
                raise UsageError(f"--out {out_dir}: cannot write {path.name}: {exc.strerror}") from None
            written.append(path)
        columns, rows = memory_rows(events_path.parent)  # from the newest checkpoint
        written.append(out_dir / f"{MEMORY_TABLE}.{fmt}")
        _WRITERS[fmt](written[-1], columns, rows)
    finally:
        store.close()
    return written


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
