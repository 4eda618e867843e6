"""Park et al.'s party (§7.1) under its pathway ablations, beside the paper's numbers.

Runs ``examples/valentines.toml`` (25 agents, February 13 06:00 to February 14 19:00, one round
a simulated quarter-hour) three times: whole; ``-p no:conversation_memory`` (agents talk but do
not remember their conversations); ``-p no:agent_summary`` (plans, reactions and places are made
from the seed description, so nothing remembered reaches a plan). For each it prints, at the
first and the last round: who heard of the party and of Sam's candidacy (seed or remembered
conversation), the relationship density, the party's guests (heard; not host, not staff), those
who came for it (at Hobbs Cafe between 5 and 7 pm on the 14th, doing something about the party)
and those there at all; then the run's LLM calls and wall time.

By default the model is the oracle test model (``--llm oracle``: rules that read only their
prompt, ``townsquare.testing.oracle``): it shows that the information travels through the
pathways, not that a language model chooses to use them. ``--llm openai:MODEL`` (with
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``) runs the same study on a real model; ``--seeds 1,2,3``
repeats each condition and prints the range over seeds (the oracle is deterministic: every seed
gives the same numbers). ``townsquare estimate examples/valentines.toml`` says what a real run
costs. The seed files: ``townsquare data fetch smallville-n25``. Usage:
``python benchmarks/party.py [--llm oracle] [--seeds 7] [--conditions whole,...]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "examples" / "valentines.toml"
ORACLE = "townsquare.testing.oracle"
CONDITIONS = {
    "whole": [],
    "no conversation memory": ["conversation_memory"],
    "no memory-written summary": ["agent_summary"],
}
#: (key, label, Park et al. §7.1)
MEASURES = (
    ("party.heard", "heard of the party", "1 -> 13 of 25"),
    ("candidacy.heard", "heard of Sam's candidacy", "1 -> 8 of 25"),
    ("density", "relationship density", "0.167 -> 0.74"),
    ("party.guests", "party guests (heard; not host, not staff)", "12 invited"),
    ("party.attended_guests", "guests who came for it (Hobbs Cafe, Feb 14, 5-7 pm)", "5 of 12"),
    ("party.present_guests", "guests at Hobbs Cafe then at all", "-"),
)


def measure(run_dir: Path) -> dict[str, tuple[float, float]]:
    """key -> (first round's value, last round's value) of the run's town_metrics."""
    db = sqlite3.connect(run_dir / "events.sqlite")
    try:
        first, last = db.execute("SELECT MIN(round), MAX(round) FROM metrics").fetchone()
        out = {}
        for key, _, _ in MEASURES:
            values = dict(db.execute("SELECT round, value FROM metrics WHERE name = ? AND round IN (?, ?)",
                                     (f"town_metrics.{key}", first, last)).fetchall())
            out[key] = (values.get(first, float("nan")), values.get(last, float("nan")))
        out["llm_calls"] = (0.0, float(db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]))
        return out
    finally:
        db.close()


def run_condition(disabled: list[str], llm: str, seed: int, out: Path) -> tuple[dict[str, tuple[float, float]], float]:
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.runner import llm_overrides, start_run

    plugins = make_plugin_manager(enable=[ORACLE] if llm == "oracle" else [], disable=disabled)
    began = time.monotonic()
    run_dir, _ = start_run(SCENARIO, overrides=llm_overrides(llm), seed=seed, out=out, plugins=plugins)
    return measure(run_dir.path), time.monotonic() - began


def _span(values: list[float], integer: bool) -> str:
    text = (lambda v: f"{v:.0f}") if integer else (lambda v: f"{v:.3f}")
    low, high = min(values), max(values)
    return text(low) if low == high else f"{text(low)}-{text(high)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="oracle", help="oracle (default) or PROVIDER:MODEL, as townsquare run --llm")
    parser.add_argument("--seeds", default="7", help="comma-separated seeds (default 7, the scenario's)")
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated, of: " + ", ".join(CONDITIONS))
    args = parser.parse_args()
    from townsquare.lib import logs

    logs.configure(json_lines=False, level="error")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown:
        print(f"unknown condition {unknown[0]!r}; choose from: {', '.join(CONDITIONS)}", file=sys.stderr)
        return 2
    print(f"Park et al.'s party, {SCENARIO.name}, --llm {args.llm}, seeds {', '.join(map(str, seeds))}"
          + (" (the oracle is a test instrument: rules that read only their prompt)" if args.llm == "oracle" else ""))
    with tempfile.TemporaryDirectory(prefix="party-") as tmp:
        for n, condition in enumerate(conditions):
            results, walls = [], []
            for seed in seeds:
                values, wall = run_condition(CONDITIONS[condition], args.llm, seed, Path(tmp) / f"{n}-{seed}")
                results.append(values)
                walls.append(wall)
            flags = " ".join(f"-p no:{name}" for name in CONDITIONS[condition]) or "(all of Park's components)"
            print(f"\n{condition}: {flags}")
            print(f"  {'measure':<55} {'start':>8} {'end':>9}   Park et al. §7.1")
            for key, label, paper in MEASURES:
                integer = key != "density"
                start = _span([r[key][0] for r in results], integer)
                end = _span([r[key][1] for r in results], integer)
                print(f"  {label:<55} {start:>8} {end:>9}   {paper}")
            calls = _span([r["llm_calls"][1] for r in results], True)
            wall = f"{min(walls):.0f}" if len(walls) == 1 else f"{min(walls):.0f}-{max(walls):.0f}"
            print(f"  LLM calls {calls}, wall {wall} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
