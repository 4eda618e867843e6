"""A MovieLens folder (any layout :func:`townsquare.api.load_movielens_data` reads: GroupLens's
ml-100k, ml-1m and ml-latest, RecBole's atomic files) as a trace: one ``rate`` event per rating,
at its Unix time, on the dataset's scale (1-5, or 0.5-5 in half stars for the "latest" layout),
with the catalogue and its genres."""

from __future__ import annotations

from pathlib import Path

from townsquare.api import UsageError
from townsquare.lib.movielens import load_movielens_data
from townsquare.lib.validation import Trace


def movielens_trace(folder: Path, name: str) -> Trace:
    data = load_movielens_data(folder)
    if not data.ratings:
        raise UsageError(f"{folder}: no ratings: a trace needs what people did")
    lowest = 0.5 if data.layout == "ml-latest-small" else 1.0
    return Trace.from_events(
        name, ((r.user, float(r.timestamp), "rate", r.item, float(r.rating)) for r in data.ratings),
        rating_scale=(lowest, 5.0), genres={item.id: tuple(item.genres) for item in data.items},
        catalogue=tuple(item.id for item in data.items), population=tuple(sorted({r.user for r in data.ratings})),
        source=str(folder))


def looks_like_movielens(folder: Path) -> bool:
    from townsquare.lib.movielens import movielens_layout

    try:
        movielens_layout(folder)
    except UsageError:
        return False
    return True

