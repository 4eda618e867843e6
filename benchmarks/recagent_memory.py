"""What RecAgent's memory keeps (Wang et al., "Memory Module"): after a run with the oracle test
model, how many of the agents' watches are still remembered, and how much of long-term memory is
routine (entering, leaving, pages shown) rather than experiences of items.

Runs a RecAgent scenario (default ``examples/recagent.toml``, its datasets installed with
``townsquare data fetch recagent-profiles movielens-latest-small``, or the
synthetic ``examples/conformity.toml`` with ``--synthetic``) for ``--rounds`` rounds with
``-p townsquare.testing.oracle --llm oracle`` and reads the last checkpoint: per agent the
short- and long-term records, the forgotten count; a watch is remembered when a record of either
tier names its title. ``--mode reference`` runs the long-term memory in the reference code's
forgetting mode.

Usage: ``python benchmarks/recagent_memory.py [--rounds 30] [--synthetic] [--mode power|reference]``.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUTINE = re.compile(r"\b(enters|entered|leaves|left|is recommended|looks at the next page|searched for)\b", re.I)


def measure(run_dir: Path) -> dict[str, float]:
    from townsquare.launch.run_lock import open_run

    _, state = open_run(str(run_dir)).latest_checkpoint()
    db = sqlite3.connect(run_dir / "events.sqlite")
    try:
        watches = db.execute("SELECT agent_id, json_extract(detail, '$.title') FROM actions WHERE kind = 'watch' AND ok = 1").fetchall()
    finally:
        db.close()
    long_kinds: Counter = Counter()
    routine = remembered = forgotten = long_total = 0
    for agent, title in watches:
        comps = state["agents"][agent]["components"]
        texts = [r["text"] for slot in ("memory.short_term", "memory.long_term") for r in comps.get(slot, {}).get("records", [])]
        remembered += any(f"<{title}>".lower() in t.lower() or title.lower() in t.lower() for t in texts)
    for agent in state["agents"].values():
        long_term = agent["components"].get("memory.long_term", {})
        forgotten += long_term.get("forgotten", 0)
        for record in long_term.get("records", []):
            long_total += 1
            long_kinds[record.get("kind", "observation")] += 1
            routine += bool(ROUTINE.search(record["text"])) and "<" not in record["text"].split(":", 1)[0] and "watched" not in record["text"]
    return {"watches": len(watches), "watches_remembered": remembered, "long_term_records": long_total,
            "long_term_routine": routine, "forgotten": forgotten, **{f"long_term_{k}": v for k, v in long_kinds.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--synthetic", action="store_true", help="examples/conformity.toml (no shared data needed)")
    parser.add_argument("--mode", choices=["power", "reference"], default="power")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    from townsquare.lib import logs
    from townsquare.launch.runner import start_run

    logs.configure(json_lines=False, level="error")
    scenario = ROOT / "examples" / ("conformity.toml" if args.synthetic else "recagent.toml")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, _ = start_run(scenario, seed=args.seed, out=Path(tmp) / "run", plugin_options=["townsquare.testing.oracle"],
                               overrides=["llm.name=oracle", f"rounds={args.rounds}", f"plugins.long_term_memory.mode={args.mode}"])
        result = measure(run_dir.path)
    share = result["watches_remembered"] / result["watches"] if result["watches"] else 0.0
    routine = result["long_term_routine"] / result["long_term_records"] if result["long_term_records"] else 0.0
    print(f"{scenario.name}, {args.rounds} rounds, forgetting {args.mode}: {result['watches']} watches, "
          f"{result['watches_remembered']} remembered ({share:.0%}); long-term memory: {result['long_term_records']} records, "
          f"{result['long_term_routine']} routine ({routine:.0%}); {result['forgotten']} forgotten")
    print({k: v for k, v in result.items() if k.startswith("long_term_")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
