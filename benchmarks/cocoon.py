"""The information-cocoon effect, mechanically and offline (Wang et al., fig. 4a).

Runs ``examples/cocoon.toml`` (50 embedding-baseline users, 50 rounds) four times per
recommender: alone, + Rec-Strategy, + Soc-Strategy, both (strategies from round 20), and
prints each curve's entropy: its highest value, the mean of rounds 15-19 (before the
strategies), the mean of the last five rounds (the end value) and the end relative to the
highest. Recommenders: ``item_mf`` (the paper's) and ``item_embedding`` (content-based).
Usage: ``python benchmarks/cocoon.py [--rounds 50] [--seed 7] [--recommender item_mf ...]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "examples" / "cocoon.toml"
CURVES = {
    "alone": [],
    "+ Rec": ["plugins.rec_strategy.enabled=true"],
    "+ Soc": ["plugins.soc_strategy.enabled=true"],
    "+ both": ["plugins.rec_strategy.enabled=true", "plugins.soc_strategy.enabled=true"],
}


def entropy_curve(overrides: list[str], rounds: int, seed: int, out: Path) -> list[float]:
    from townsquare.runner import start_run

    run_dir, _ = start_run(SCENARIO, overrides=[*overrides, f"rounds={rounds}"], seed=seed, out=out)
    db = sqlite3.connect(run_dir.events_path)
    rows = db.execute("SELECT value FROM metrics WHERE name = 'cocoon_entropy.entropy' ORDER BY round").fetchall()
    db.close()
    return [v for (v,) in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--recommender", nargs="+", default=["item_mf", "item_embedding"])
    args = parser.parse_args()
    from townsquare import logs

    logs.configure(json_lines=False, level="warning")
    print(f"{'recommender':<15} {'curve':<10} {'max':>7} {'r15-19':>7} {'end':>7} {'end/max':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for recommender in args.recommender:
            for n, (label, overrides) in enumerate(CURVES.items()):
                out = Path(tmp) / f"{recommender}-{n}"
                curve = entropy_curve([*overrides, f"recommender.name={recommender}"], args.rounds, args.seed, out)
                before = sum(curve[15:20]) / len(curve[15:20]) if len(curve) >= 20 else float("nan")
                end = sum(curve[-5:]) / len(curve[-5:])
                print(f"{recommender:<15} {label:<10} {max(curve):>7.3f} {before:>7.3f} {end:>7.3f} {end / max(curve):>8.1%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
