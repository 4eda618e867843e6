"""RecAgent's conformity study (Wang et al., fig. 5b) as a pathway proof: does attitude change rise
with the number of friends when friends' opinions can reach a rater only through its memory?

Runs ``examples/conformity.toml`` (20 RecAgent agents with 2-7 friends, five of them watched the
movie before the run) with the oracle test model (``townsquare.testing.oracle``: rules that read
the prompt alone and lean toward the opinions they find in it) for each seed, in variants:

- ``full``: the paper's agents, every memory tier;
- ``no_memory``: ``-p no:short_term_memory -p no:long_term_memory``: what an agent is told is
  still delivered and compressed, but nothing keeps it for the rating prompt;
- ``no_short`` / ``no_long`` (with ``--tiers``): one tier removed, the other still carrying.

Per run: each agent's attitude change AC_u (score changes over rounds 1-10, divided by 10) and
its number of friends, and Spearman's rho between the two over the 20 agents (undefined, and
counted as 0, when no agent changed); per variant the mean rho over seeds with its 95 %
Student-t interval, and AC(i) (the paper's curve) averaged over seeds.

Usage: ``python benchmarks/conformity.py [--seeds 5] [--json] [--tiers]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "conformity.toml"
VARIANTS = {
    "full": [],
    "no_memory": ["no:short_term_memory", "no:long_term_memory"],
}
TIERS = {"no_short": ["no:short_term_memory"], "no_long": ["no:long_term_memory"]}


def ranks(values: list[float]) -> np.ndarray:
    """Ranks from 1, ties sharing their mean rank."""
    order = np.argsort(values, kind="stable")
    out = np.empty(len(values))
    sorted_values = np.asarray(values, dtype=float)[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        out[order[start:end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return out


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rho (Pearson on ranks); None when either side is constant."""
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def run_once(seed: int, plugin_options: list[str], out: Path, rounds_counted: int = 10, overrides: list[str] = ()) -> dict[str, Any]:
    from townsquare.rundir import RunDir
    from townsquare.runner import start_run

    run_dir, _ = start_run(SCENARIO, seed=seed, out=out, plugin_options=["townsquare.testing.oracle", *plugin_options],
                           overrides=["llm.name=oracle", *overrides])
    _, state = RunDir.open(str(run_dir.path)).latest_checkpoint()
    scores = state["metrics"]["conformity"]["scores"]
    friends = {a: len(s["persona"]["fields"].get("friends") or ()) for a, s in state["agents"].items()} \
        if all("persona" in s for s in state["agents"].values()) else friend_counts(run_dir)
    ac = {a: sum(1 for r in range(1, min(len(s), rounds_counted + 1)) if s[r] != s[r - 1]) / rounds_counted for a, s in scores.items()}
    agents = sorted(ac)
    rho = spearman([friends[a] for a in agents], [ac[a] for a in agents])
    return {"rho": rho, "ac": ac, "friends": friends, "changes": sum(ac.values()) * rounds_counted}


def friend_counts(run_dir: Any) -> dict[str, int]:
    import sqlite3

    db = sqlite3.connect(run_dir.events_path)
    try:
        rows = db.execute("SELECT agent_id, persona FROM agents").fetchall()
    finally:
        db.close()
    return {a: len(json.loads(p).get("fields", {}).get("friends") or ()) for a, p in rows}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    from townsquare.api.stats import mean_interval

    rhos = [r["rho"] if r["rho"] is not None else 0.0 for r in runs]
    found = mean_interval(rhos)
    by_friends: dict[int, list[float]] = {}
    for r in runs:
        for agent, value in r["ac"].items():
            by_friends.setdefault(r["friends"][agent], []).append(value)
    return {"spearman": round(found.mean, 4),
            "spearman_ci": [round(found.low, 4), round(found.high, 4)] if not math.isnan(found.low) else [None, None],
            "spearman_by_seed": [None if r["rho"] is None else round(r["rho"], 4) for r in runs],
            "changes_by_seed": [int(r["changes"]) for r in runs],
            "ac_by_friends": {str(i): round(float(np.mean(v)), 4) for i, v in sorted(by_friends.items())}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N")
    parser.add_argument("--tiers", action="store_true", help="also remove one memory tier at a time")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a scenario override for every run (e.g. activity.model=always)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from townsquare import logs

    logs.configure(json_lines=False, level="error")
    variants = {**VARIANTS, **(TIERS if args.tiers else {})}
    results: dict[str, Any] = {"settings": {"seeds": list(range(1, args.seeds + 1)), "llm": "oracle", "agents": 20, "rounds": 11,
                                            "overrides": args.overrides},
                               "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, options in variants.items():
            runs = [run_once(seed, options, Path(tmp) / f"{name}-{seed}", overrides=args.overrides) for seed in range(1, args.seeds + 1)]
            results["variants"][name] = {"plugin_options": [f"-p {o}" for o in options], **summarise(runs)}
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"{'variant':<10} {'Spearman rho':>12} {'95% CI':>18}  rho by seed / AC(i) by friends i")
    for name, v in results["variants"].items():
        ci = v["spearman_ci"]
        ci_text = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci[0] is not None else "-"
        print(f"{name:<10} {v['spearman']:>+12.3f} {ci_text:>18}  {v['spearman_by_seed']}")
        print(f"{'':<42}  {v['ac_by_friends']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
