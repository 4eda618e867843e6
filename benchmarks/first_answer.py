"""Seconds from the start of a run to what its progress shows: the model loaded, round 0 begun,
round 0's first LLM call counted (the bar's count above 0), round 0 done. Reads the engine's
progress events (``live``), on the quickstart by default (the offline model), one round.

    python benchmarks/first_answer.py [--scenario examples/quickstart.toml] [--rounds 1]

Print the load average beside it: on a shared machine every number grows with the load.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "examples" / "quickstart.toml"))
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    from townsquare.launch.runner import start_run

    start = time.monotonic()
    seen: dict[str, float] = {}

    def live(event: dict) -> None:
        now = time.monotonic() - start
        if event["event"] == "phase" and event["text"].startswith("loading the model"):
            seen.setdefault("loading the model", now)
        elif event["event"] == "phase" and "loading the model" in seen:
            seen.setdefault("model loaded", now)
        elif event["event"] == "round_start" and event["round"] == 0:
            seen.setdefault("round 0 begun", now)
        elif event["event"] == "llm_call" and event["round"] == 0 and event["totals"]["llm_calls"] > 0:
            seen.setdefault("round 0's first call counted", now)

    def progress(round: int, totals: dict) -> None:
        if round == 0:
            seen.setdefault("round 0 done", time.monotonic() - start)

    with tempfile.TemporaryDirectory() as tmp:
        start_run(args.scenario, overrides=[f"rounds={args.rounds}"], out=Path(tmp) / "run", live=live, progress=progress)
    print(f"{args.scenario}, load average {os.getloadavg()[0]:.1f}:")
    for what, at in seen.items():
        print(f"  {what:32s} {at:7.1f} s")
    first, begun = seen.get("round 0's first call counted"), seen.get("round 0 begun")
    if first is not None and begun is not None:
        print(f"  the bar counts a call {first - begun:.1f} s into round 0")


if __name__ == "__main__":
    main()
