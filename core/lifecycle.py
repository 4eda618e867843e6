"""Records passed to the lifecycle (observer) hooks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunInfo:
    """The run being executed, as observers see it."""

    name: str
    run_dir: str
    seed: int
    rounds: int
    start_round: int
    slot_table: list[dict[str, str]]
    scenario: dict[str, Any]


@dataclass
class RunSummary:
    """Totals at the end of a run (or at a clean stop)."""

    rounds_completed: int
    actions: int
    posts: int
    llm_calls: int
    stopped: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
