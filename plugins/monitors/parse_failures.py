"""Monitor ``parse_failures``: the share of LLM answers that could not be parsed.

Read from the run's ``llm_calls`` rows of the last ``window`` committed rounds (a round's rows
are committed after its metrics are taken, so the monitor lags one round): parse failures
divided by answered calls (``ok`` and ``cached``). Above ``threshold`` (0.1, ours) with at least
``min_calls`` calls in the window the run is flagged: the model does not follow the prompts'
formats and agents keep falling back to safe defaults.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from pydantic import Field

from townsquare.api import MetricSpec, RoundView, hookimpl

from .threshold import Alarm, MonitorConfig


class ParseFailuresConfig(MonitorConfig):
    threshold: float = Field(0.1, ge=0, le=1)
    window: int = Field(6, gt=0)
    min_calls: int = Field(20, gt=0)


class ParseFailures:
    def __init__(self, config: ParseFailuresConfig, ctx: Any):
        self.config = config
        run_dir = getattr(ctx.services, "run_dir", None)
        self.events = Path(run_dir) / "events.sqlite" if run_dir else None
        self.alarm = Alarm("parse_failures", config.threshold, hint="the model's answers often do not parse")

    async def measure(self, view: RoundView) -> dict[str, float]:
        if self.events is None or not self.events.is_file():
            return {}
        db = sqlite3.connect(f"file:{self.events}?mode=ro", uri=True)
        try:
            failed, answered = db.execute(
                "SELECT SUM(status = 'parse_failure'), SUM(status IN ('ok', 'cached')) FROM llm_calls WHERE round >= ? AND round < ?",
                (view.round - self.config.window, view.round)).fetchone()
        except sqlite3.Error:
            return {}
        finally:
            db.close()
        failed, answered = int(failed or 0), int(answered or 0)
        if answered < self.config.min_calls:
            return {}
        return {**self.alarm.check(view.round, failed / answered, failures=failed, calls=answered), "calls": float(answered)}

    def get_state(self) -> dict[str, Any]:
        return {"alarm": self.alarm.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.alarm.set_state(state.get("alarm", {}))


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("parse_failures", lambda config, ctx: ParseFailures(config or ParseFailuresConfig(), ctx),
                       config_model=ParseFailuresConfig, priority=50,
                       description="run health: share of LLM answers that failed to parse (last rounds)")]
