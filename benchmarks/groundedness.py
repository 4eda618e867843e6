"""Groundedness of the offline quickstart: each offline model, the routed policy, the baseline.

Runs ``examples/quickstart.toml`` (Zhou et al.'s agent on the offline model) once per variant,
with the same seed and settings, and prints the ``groundedness`` metric at the last round
(:mod:`townsquare.plugins.report.groundedness`, the run's embedder):

* ``margin``: posts' cosine with their author's persona minus their mean cosine with the other
  personas (> 0: posts fit their own persona better than anyone else's);
* ``slope`` / ``AUC``: how the like rate rises with persona-post cosine over every browsed
  post (AUC 0.5: likes ignore the persona);

plus the number of posts and like decisions, the like rate, LLM calls and wall time. Variants:
``social_agent`` with each offline model, ``social_agent_routed`` (like and reblog by the
embedding baseline's similarity rule, the rest by the LLM) with each model, and the
``embedding_baseline`` policy (no LLM) for reference.

The full quickstart (11 agents, 12 rounds) takes long on a small shared CPU; ``--initial``,
``--regular`` and ``--rounds`` shrink it (the defaults are the settings docs/benchmarks.md's table was
measured with). Usage::

    python benchmarks/groundedness.py [--rounds 4] [--initial 2] [--regular 4] [--variants smollm2 gemma ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart.toml"

#: variant -> overrides on top of the quickstart
#: (each names its policy: the quickstart's own choice must not leak into a variant)
VARIANTS: dict[str, list[str]] = {
    "smollm2": ["llm.name=local", 'llm.model="smollm2-135m-instruct"', *(
        f'populations.{p}.slots.policy="social_agent"' for p in (0, 1))],
    "smollm2-routed": ["llm.name=local", 'llm.model="smollm2-135m-instruct"', *(
        f'populations.{p}.slots.policy="social_agent_routed"' for p in (0, 1))],
    "gemma": ["llm.name=local", 'llm.model="gemma-3-270m"', *(
        f'populations.{p}.slots.policy="social_agent"' for p in (0, 1))],
    "gemma-routed": ["llm.name=local", 'llm.model="gemma-3-270m"', *(
        f'populations.{p}.slots.policy="social_agent_routed"' for p in (0, 1))],
    "baseline": [*(f'populations.{p}.slots.policy="embedding_baseline"' for p in (0, 1)),
                 "plugins.embedding_baseline.feed_size=4", "plugins.embedding_baseline.post_probability=1.0"],
}
NAMES = {
    "smollm2": "SmolLM2-135M-Instruct, social_agent",
    "smollm2-routed": "SmolLM2-135M-Instruct, social_agent_routed",
    "gemma": "Gemma 3 270M, social_agent",
    "gemma-routed": "Gemma 3 270M, social_agent_routed",
    "baseline": "embedding_baseline (no LLM)",
}


def last_metrics(run_dir: Path) -> dict[str, float]:
    with sqlite3.connect(run_dir / "events.sqlite") as db:
        rows = db.execute("SELECT name, value FROM metrics WHERE round = (SELECT MAX(round) FROM metrics)").fetchall()
        calls = db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
    values = {name.removeprefix("groundedness."): value for name, value in rows if name.startswith("groundedness.")}
    values["llm_calls"] = float(calls)
    return values


def run_variant(name: str, args: argparse.Namespace, out: Path) -> tuple[dict[str, float], float]:
    from townsquare.runner import start_run

    overrides = [f"rounds={args.rounds}", f"populations.0.count={args.initial}", f"populations.1.count={args.regular}",
                 *VARIANTS[name]]
    start = time.perf_counter()
    run_dir, summary = start_run(QUICKSTART, overrides=overrides, seed=args.seed, out=out / name)
    seconds = time.perf_counter() - start
    if summary.stopped:
        print(f"{name}: stopped ({summary.stopped})", file=sys.stderr)
    return last_metrics(run_dir.path), seconds


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--initial", type=int, default=2, help="initial agents (they post first)")
    parser.add_argument("--regular", type=int, default=4, help="regular agents")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--keep", type=Path, default=None, help="keep the run directories here")
    args = parser.parse_args(argv)
    from townsquare import logs

    logs.configure(json_lines=False, level="warning")

    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        print(f"quickstart, {args.initial} initial + {args.regular} regular agents, {args.rounds} rounds, seed {args.seed}")
        print("| variant | posts | persona margin | like decisions | like rate | like slope | like AUC | LLM calls | wall s |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name in args.variants:
            m, seconds = run_variant(name, args, out)
            print(f"| {NAMES[name]} | {int(m.get('posts.count', 0))} | {fmt(m.get('posts.margin'), '+.3f')} | "
                  f"{int(m.get('likes.decisions', 0))} | {fmt(m.get('likes.rate'), '.2f')} | {fmt(m.get('likes.slope'), '+.2f')} | "
                  f"{fmt(m.get('likes.auc'), '.2f')} | {int(m['llm_calls'])} | {seconds:.0f} |", flush=True)


if __name__ == "__main__":
    main()
