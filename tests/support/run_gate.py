"""Test plugin: holds a run at the start of a chosen round until the test lets it go.

RUN_GATE=PATH and RUN_GATE_ROUND=R: at the start of round R the run writes PATH.reached and
waits until PATH exists, so a test can act while the run is certainly alive and mid-run (no
sleeps, no timing). Inactive without the env var.
"""

import os
import time
from pathlib import Path

from townsquare import hookimpl

#: far above any normal wait: a hang guard, not a timing
GIVE_UP_AFTER_S = 600


@hookimpl
def townsquare_on_round_start(round):
    gate = os.environ.get("RUN_GATE")
    if not gate or str(round) != os.environ.get("RUN_GATE_ROUND", "0"):
        return
    Path(gate + ".reached").write_text(str(os.getpid()))
    deadline = time.monotonic() + GIVE_UP_AFTER_S
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
