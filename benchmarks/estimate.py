"""``townsquare estimate`` held against a run that was made: calls and prompt tokens per purpose,
forecast (with its range) beside the run's ``llm_calls``, and the total's error.

    python benchmarks/estimate.py examples/quickstart.toml --run runs/quickstart
    python benchmarks/estimate.py examples/valentines.toml --oracle --out /tmp/valentines-oracle

``--run DIR``: a finished run of the scenario (made with the same ``--set`` and seed; the README's
main job writes ``runs/quickstart``). ``--oracle``: make the run now, on the oracle test model,
into ``--out``. Prompt tokens are compared as the run counted them (the offline model's own
tokenizer; the oracle's characters / 4, as the estimate counts them).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

def actual_calls(run_dir: Path) -> dict[str, tuple[int, int]]:
    with sqlite3.connect(run_dir / "events.sqlite") as db:
        rows = db.execute("SELECT purpose, COUNT(*), SUM(prompt_tokens) FROM llm_calls WHERE status IN ('ok', 'cached') "
                          "GROUP BY purpose").fetchall()
    return {purpose: (int(n), int(tokens or 0)) for purpose, n, tokens in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("--run", type=Path, help="a finished run of the scenario")
    parser.add_argument("--oracle", action="store_true", help="make the run on the oracle test model")
    parser.add_argument("--out", type=Path, default=None, help="with --oracle: the run's directory")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    if (args.run is None) == (not args.oracle):
        parser.error("give --run DIR or --oracle")

    from townsquare.lib import logs
    from townsquare.api.commands import DRY_RUN_DISABLED
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.plugins.llm.run_estimate import forecast_run
    from townsquare.launch.runner import start_run

    logs.configure(level="warning")

    start = time.perf_counter()
    forecast = forecast_run(args.scenario, make_plugin_manager(disable=DRY_RUN_DISABLED), overrides=args.overrides, seed=args.seed)
    seconds = time.perf_counter() - start
    run_dir = args.run
    if args.oracle:
        run_dir, _ = start_run(args.scenario, overrides=[*args.overrides, "llm.name=oracle"], seed=args.seed, out=args.out,
                               plugins=make_plugin_manager(enable=["townsquare.testing.oracle"]))
        run_dir = run_dir.path
    actual = actual_calls(run_dir)
    purposes = sorted(set(actual) | set(forecast.typical))
    print(f"{'purpose':28s} {'calls':>7s} {'range':>13s} {'actual':>7s}   {'prompt tokens':>13s} {'range':>21s} {'actual':>11s}")
    for purpose in [*purposes, None]:
        if purpose is None:
            calls, tokens, _ = forecast.totals()
            real = tuple(map(sum, zip(*actual.values()))) if actual else (0, 0)
            name = "total"
        else:
            calls, tokens = forecast.typical.get(purpose, [0, 0, 0])[:2]
            real, name = actual.get(purpose, (0, 0)), purpose
        span_c, span_t = forecast.span(purpose, 0), forecast.span(purpose, 1)
        print(f"{name:28s} {calls:7,d} {f'{span_c[0]:,}-{span_c[1]:,}':>13s} {real[0]:7,d}   {tokens:13,d} "
              f"{f'{span_t[0]:,}-{span_t[1]:,}':>21s} {real[1]:11,d}")
    calls, tokens, _ = forecast.totals()
    real = tuple(map(sum, zip(*actual.values())))
    print(f"estimate vs run: calls {calls:,} / {real[0]:,} ({(calls - real[0]) / real[0]:+.1%}), prompt tokens "
          f"{tokens:,} / {real[1]:,} ({(tokens - real[1]) / real[1]:+.1%}); three dry runs in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
