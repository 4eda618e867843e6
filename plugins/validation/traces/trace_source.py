"""``--against DATASET``: an installed dataset by name (``townsquare data fetch NAME``) or a path,
read by the layout its files have: MovieLens (any layout), Twitter15/16 propagation trees,
MADOC-style Parquet, or another run's directory (one design scored against another)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from townsquare.api import UsageError
from townsquare.lib.data_paths import data_path
from townsquare.lib.validation import Trace

from .madoc_parquet import madoc_trace, parquet_files
from .movielens_trace import looks_like_movielens, movielens_trace
from .twitter_trees import looks_like_twitter_trees, twitter_trace

LAYOUTS = "a MovieLens folder, Twitter15/16's label.txt with tree/, MADOC's .parquet files, or a run directory"


def locate(dataset: str) -> tuple[Path, str]:
    """The folder or file ``dataset`` names, and the trace's name."""
    path = Path(dataset).expanduser()
    if path.exists():
        return path, path.stem if path.is_file() else path.name
    if "/" in dataset or "\\" in dataset or dataset.startswith("."):
        raise UsageError(f"--against {dataset}: no such file or folder")
    return data_path(f"data:{dataset}"), dataset  # a one-line error naming `townsquare data fetch` when absent


def read_trace(dataset: str, utc_offset: float = 0.0) -> Trace:
    """The real trace ``dataset`` names; ``utc_offset`` hours move its Unix times onto the local
    clock the simulation's clock stands for."""
    path, name = locate(dataset)
    if path.is_dir() and (path / "manifest.json").is_file() and (path / "events.sqlite").is_file():
        from .run_trace import run_trace

        trace = run_trace(path)
    elif path.is_dir() and looks_like_movielens(path):
        trace = movielens_trace(path, name)
    elif path.is_dir() and looks_like_twitter_trees(path):
        trace = twitter_trace(path, name)
    elif path.is_dir() and [p for p in ("twitter15", "twitter16") if looks_like_twitter_trees(path / p)]:
        found = [p for p in ("twitter15", "twitter16") if looks_like_twitter_trees(path / p)]
        if len(found) > 1:
            raise UsageError(f"--against {dataset}: holds both twitter15/ and twitter16/: name one ({path / found[0]})")
        trace = twitter_trace(path / found[0], found[0])
    elif parquet_files(path):
        trace = madoc_trace(path, name)
    else:
        raise UsageError(f"--against {dataset}: {path} is none of the trace layouts ({LAYOUTS})")
    if utc_offset and trace.absolute_times:
        trace = replace(trace, times=trace.times + utc_offset * 3600.0)
    return trace
