"""The ``memories`` table of ``townsquare export``: every agent's memory records.

Read from the newest checkpoint: each memory slot's state (see :mod:`townsquare.memory`) that
holds a ``"records"`` list of ``MemoryRecord.to_dict()`` contributes its rows, so any memory
design that keeps that key is exported. ``evidence`` is the JSON list of the ids a reflection
or insight rests on (ids are unique within an agent's slot), so the reflection tree can be
rebuilt from the table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from townsquare.memory import MEMORY_TIERS
from townsquare.rundir import RunDir

MEMORY_TABLE = "memories"
MEMORY_COLUMNS = ["agent", "slot", "id", "kind", "text", "created", "importance", "evidence"]


def memory_rows(run_path: Path) -> tuple[list[str], list[tuple[Any, ...]]]:
    """``(columns, rows)`` of the memories table; no rows when the run has no checkpoint."""
    checkpoint = RunDir(run_path).latest_checkpoint()
    rows: list[tuple[Any, ...]] = []
    if checkpoint is None:
        return MEMORY_COLUMNS, rows
    for agent, saved in checkpoint[1].get("agents", {}).items():
        components = saved.get("components", {})
        for slot in MEMORY_TIERS:
            state = components.get(slot)
            records = state.get("records") if isinstance(state, dict) else None
            for record in records if isinstance(records, list) else ():
                rows.append((agent, slot, record.get("id"), record.get("kind"), record.get("text"), record.get("created"),
                             record.get("importance"), json.dumps(list(record.get("evidence", ())))))
    return MEMORY_COLUMNS, rows
