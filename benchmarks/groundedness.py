"""Groundedness of the offline quickstart: each offline model, the routed policy, the baseline.

Runs ``examples/quickstart.toml`` (Zhou et al.'s agent on the offline model) once per variant,
with the same seed and settings, and prints the ``groundedness`` metric at the last round
(:mod:`townsquare.plugins.report.groundedness`, the run's embedder):

* ``margin``: posts' cosine with their author's persona minus their mean cosine with the other
  personas (> 0: posts fit their own persona better than anyone else's);
* ``slope`` / ``AUC``: how the like rate rises with persona-post cosine over every browsed
  post (AUC 0.5: likes ignore the persona);

* ``voice``: the shares of posts in the first person, leaking the prompt, and addressing
  someone (a letter, an assistant's reply) (:mod:`townsquare.plugins.report.post_voice`);

plus the number of posts, comments and like decisions, the like rate, how the structured
answers came out (constrained / parsed / repaired / fallback, :mod:`townsquare.llm_modes`), the
regular agents' plan sources, LLM calls and wall time. Variants: ``quickstart`` (the scenario as
it is), ``social_agent`` with each offline model, ``social_agent_routed`` (like and reblog by the
embedding baseline's similarity rule, the rest by the LLM) with each model, and the
``embedding_baseline`` policy (no LLM) for reference. ``--seeds 1 2`` runs each variant per
seed and adds a line pooling the posts of all seeds.

The full quickstart (11 agents, 12 rounds) takes long on a small shared CPU; ``--initial``,
``--regular`` and ``--rounds`` shrink it (the defaults are the settings docs/benchmarks.md's table was
measured with). Usage::

    python benchmarks/groundedness.py [--rounds 4] [--initial 2] [--regular 4] [--seeds 1 2] [--variants smollm2 gemma ...] [--keep DIR]

The README's numbers for the quickstart as it runs: ``--variants quickstart --initial 3
--regular 8 --rounds 12 --seeds 1 2``. ``--runs DIR ...`` summarises finished quickstart runs
instead (likes, comments and the share that copy their post, the plans' browsing windows)::

    python benchmarks/groundedness.py --runs runs/quickstart
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart.toml"

#: variant -> overrides on top of the quickstart
#: (each names its policy: the quickstart's own choice must not leak into a variant)
VARIANTS: dict[str, list[str]] = {
    "quickstart": [],
    "quickstart-model-topics": ['plugins.social_agent.topics="model"'],
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
    "quickstart": "quickstart (SmolLM2, routed likes, topics among interests)",
    "quickstart-model-topics": "quickstart, topics written by the model",
    "smollm2": "SmolLM2-135M-Instruct, social_agent",
    "smollm2-routed": "SmolLM2-135M-Instruct, social_agent_routed",
    "gemma": "Gemma 3 270M, social_agent",
    "gemma-routed": "Gemma 3 270M, social_agent_routed",
    "baseline": "embedding_baseline (no LLM)",
}


def last_metrics(run_dir: Path) -> dict[str, Any]:
    from townsquare.llm_modes import answers_in_db, totals_of

    with sqlite3.connect(run_dir / "events.sqlite") as db:
        rows = db.execute("SELECT name, value FROM metrics WHERE round = (SELECT MAX(round) FROM metrics)").fetchall()
        calls = db.execute("SELECT COUNT(*) FROM llm_calls WHERE status != 'parse_failure'").fetchone()[0]
        values: dict[str, Any] = {name.removeprefix("groundedness."): value for name, value in rows if name.startswith("groundedness.")}
        values["llm_calls"] = float(calls)
        values["post_texts"] = [text for (text,) in db.execute("SELECT text FROM posts WHERE reply_to IS NULL")]
        values["comments"] = db.execute("SELECT COUNT(*) FROM posts WHERE reply_to IS NOT NULL").fetchone()[0]
        values["answers"] = totals_of(answers_in_db(db))
        active = {}
        for agent, rounds in db.execute("SELECT agent_id, GROUP_CONCAT(DISTINCT round) FROM actions "
                                        "WHERE agent_id LIKE 'regular-%' GROUP BY agent_id"):
            active[agent] = tuple(sorted(int(r) for r in rounds.split(",")))
        values["active_patterns"] = len(set(active.values()))
    values["plan_sources"] = plan_sources(run_dir)
    return values


def social_life(run_dir: Path) -> dict[str, Any]:
    """What a reader of the run sees of its social life: likes (accepted), comments and the share
    that copy their post (``groundedness``'s ``comments.copying``), and the browsing windows of
    the plans the model wrote (``start-end`` as written; ``starts``: their distinct start times)."""
    import gzip
    import json

    with sqlite3.connect(run_dir / "events.sqlite") as db:
        likes = db.execute("SELECT COUNT(*) FROM actions WHERE kind = 'like' AND ok = 1").fetchone()[0]
        comments = db.execute("SELECT COUNT(*) FROM posts WHERE reply_to IS NOT NULL").fetchone()[0]
        copying = db.execute("SELECT value FROM metrics WHERE name = 'groundedness.comments.copying' ORDER BY round DESC LIMIT 1").fetchone()
    windows = []
    checkpoints = sorted((run_dir / "checkpoints").glob("round-*.json.gz"))
    if checkpoints:
        state = json.loads(gzip.decompress(checkpoints[-1].read_bytes()))
        for entry in state.get("agents", {}).values():
            planner = entry.get("components", {}).get("planner") or {}
            plan = planner.get("plan")
            if plan and planner.get("source") in ("llm", "llm_repaired"):
                start, end = plan["browse"]["start"], plan["browse"]["end"]
                windows.append(f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}")
    return {"likes": likes, "comments": comments, "copying": None if copying is None else copying[0], "windows": sorted(windows),
            "starts": len({w.split("-")[0] for w in windows})}


def plan_sources(run_dir: Path) -> dict[str, int]:
    """How many agents' plans came from the model, after a repair, or from the fallback (the last checkpoint)."""
    import gzip
    import json

    checkpoints = sorted((run_dir / "checkpoints").glob("round-*.json.gz"))
    if not checkpoints:
        return {}
    state = json.loads(gzip.decompress(checkpoints[-1].read_bytes()))
    sources: dict[str, int] = {}
    for entry in state.get("agents", {}).values():
        planner = entry.get("components", {}).get("planner")
        if planner and planner.get("source"):
            sources[planner["source"]] = sources.get(planner["source"], 0) + 1
    return sources


def run_variant(name: str, args: argparse.Namespace, out: Path, seed: int) -> tuple[dict[str, Any], float]:
    from townsquare.launch.runner import start_run

    overrides = [f"rounds={args.rounds}", f"populations.0.count={args.initial}", f"populations.1.count={args.regular}",
                 *VARIANTS[name]]
    start = time.perf_counter()
    run_dir, summary = start_run(QUICKSTART, overrides=overrides, seed=seed, out=out / f"{name}-seed{seed}")
    seconds = time.perf_counter() - start
    if summary.stopped:
        print(f"{name}: stopped ({summary.stopped})", file=sys.stderr)
    return last_metrics(run_dir.path), seconds


def voice_cell(texts: list[str]) -> str:
    from townsquare.plugins.report.post_voice import voice_shares

    v = voice_shares(texts)
    return f"{v['first_person']:.0%} / {v['leaks']:.0%} / {v['addresses']:.0%}"


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--initial", type=int, default=2, help="initial agents (they post first)")
    parser.add_argument("--regular", type=int, default=4, help="regular agents")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--keep", type=Path, default=None, help="keep the run directories here")
    parser.add_argument("--runs", type=Path, nargs="+", default=None,
                        help="summarise these finished quickstart runs (the README's runs/quickstart) instead of running")
    args = parser.parse_args(argv)
    from townsquare.lib import logs

    if args.runs:
        print("| run | likes | comments | copying their post | plans from the model: browsing windows | distinct starts |")
        print("|---|---|---|---|---|---|")
        for run in args.runs:
            life = social_life(run)
            print(f"| {run} | {life['likes']} | {life['comments']} | {fmt(life['copying'], '.0%')} | {', '.join(life['windows'])} | "
                  f"{life['starts']} |")
        return

    logs.configure(json_lines=False, level="warning")

    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        print(f"quickstart, {args.initial} initial + {args.regular} regular agents, {args.rounds} rounds, seeds {args.seeds}")
        print("| variant | seed | posts | voice: first person / leaks / addresses | persona margin | comments | like decisions | like rate | "
              "like slope | like AUC | answers: constrained / parsed / repaired / fallback | plans | active-round patterns | LLM calls | wall s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name in args.variants:
            pooled: list[str] = []
            for seed in args.seeds:
                m, seconds = run_variant(name, args, out, seed)
                pooled += m["post_texts"]
                a = m["answers"]
                plans = ", ".join(f"{n} {source}" for source, n in sorted(m["plan_sources"].items())) or "-"
                print(f"| {NAMES[name]} | {seed} | {int(m.get('posts.count', 0))} | {voice_cell(m['post_texts'])} | "
                      f"{fmt(m.get('posts.margin'), '+.3f')} | {m['comments']} | {int(m.get('likes.decisions', 0))} | "
                      f"{fmt(m.get('likes.rate'), '.2f')} | {fmt(m.get('likes.slope'), '+.2f')} | {fmt(m.get('likes.auc'), '.2f')} | "
                      f"{a['constrained']} / {a['parsed']} / {a['repaired']} / {a['fallback']} | {plans} | "
                      f"{m['active_patterns']} of {args.regular} | {int(m['llm_calls'])} | {seconds:.0f} |", flush=True)
            if len(args.seeds) > 1:
                print(f"| {NAMES[name]} | all | {len(pooled)} | {voice_cell(pooled)} | | | | | | | | | | | |", flush=True)


if __name__ == "__main__":
    main()
