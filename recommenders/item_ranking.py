"""Shared ordering for scored item recommenders (not a plugin): best score first, items shown
to the viewer ``max_shown`` times last, ties broken at random with the viewer's generator (in
candidate order without one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from townsquare.lib.items import Item, ItemInteractions


def order_items(viewer: str, candidates: Sequence[Item], score: np.ndarray, limit: int, rng: Any,
                interactions: ItemInteractions, max_shown: int) -> list[Item]:
    shown = interactions.shown.get(viewer, {})
    worn = np.fromiter((shown.get(item.id, 0) >= max_shown for item in candidates), dtype=bool, count=len(candidates))
    jitter = rng.random(len(candidates)) if rng is not None else np.arange(len(candidates), dtype=float)
    return [candidates[int(i)] for i in np.lexsort((jitter, -score, worn))[:max(0, limit)]]
