"""Smallville's day plans on the offline model: does every plan parse, and is every activity a
sentence with a time?

Runs ``examples/smallville.toml`` (Park et al.'s 3-agent base; ``townsquare data fetch
smallville-3`` first) on the local SmolLM2-135M-Instruct model, or reads a finished run
(``--run DIR``), and prints from the run's last checkpoint and ``llm_calls``:

* per agent, where its day plan came from (``llm``: the model's plan as it wrote it; ``cut``:
  more items than asked for, cut; ``fallback``: the built-in day), its number of strokes and
  how many have a time;
* how the plan answers came out per purpose (``plan.day``, ``plan.hourly``, ``plan.actions``:
  constrained / parsed / repaired / fallback, :mod:`townsquare.llm_modes`);
* activities: the strokes, hour chunks and decomposed actions, the share that are a sentence
  (start with a letter, at least two words, no clock time inside) with a time, and a sample.

Usage::

    python benchmarks/smallville_plans.py [--agents 3] [--rounds 2] [--seed 7] [--model smollm2-135m-instruct] [--keep DIR]
    python benchmarks/smallville_plans.py --run runs/smallville
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SMALLVILLE = ROOT / "examples" / "smallville.toml"
PLAN_PURPOSES = ("plan.day", "plan.hourly", "plan.actions", "plan.replan")
_CLOCK_INSIDE = re.compile(r"\d{1,2}:\d{2}")


def is_sentence(text: str) -> bool:
    """Starts with a letter, has at least two words, and no clock time or JSON inside."""
    text = text.strip()
    return bool(text) and text[0].isalpha() and len(text.split()) >= 2 and not _CLOCK_INSIDE.search(text) \
        and not any(c in text for c in '{}[]"')


def planners(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each agent's ``planner`` state in the run's last checkpoint."""
    checkpoints = sorted((run_dir / "checkpoints").glob("round-*.json.gz"))
    if not checkpoints:
        return {}
    state = json.loads(gzip.decompress(checkpoints[-1].read_bytes()))
    return {agent: entry["components"]["planner"] for agent, entry in sorted(state.get("agents", {}).items())
            if entry.get("components", {}).get("planner")}


def activities(planner: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    """(level, text, minute) of every stroke, hour chunk and decomposed action."""
    found = [("stroke", s["text"], s.get("minute")) for s in planner.get("strokes", [])]
    for chunk in planner.get("chunks", []):
        found.append(("hour", chunk.get("text", ""), chunk.get("start")))
        found += [("action", step.get("text", ""), step.get("start")) for step in chunk.get("steps") or []]
    return found


def plan_report(run_dir: Path, sample: int = 8) -> dict[str, Any]:
    """The numbers the benchmark prints (see the module docstring)."""
    from townsquare.llm_modes import answers_in_db

    with sqlite3.connect(run_dir / "events.sqlite") as db:
        answers = {p: e for p, e in answers_in_db(db).items() if p in PLAN_PURPOSES}
    agents = planners(run_dir)
    every = [(agent, *a) for agent, planner in agents.items() for a in activities(planner)]
    timed_sentences = [a for a in every if a[3] is not None and is_sentence(a[2])]
    return {
        "agents": {agent: {"source": p.get("source"), "strokes": len(p.get("strokes", [])),
                           "timed_strokes": sum(1 for s in p.get("strokes", []) if s.get("minute") is not None)}
                   for agent, p in agents.items()},
        "answers": answers,
        "activities": len(every),
        "timed_sentences": len(timed_sentences),
        "not_sentences": [a for a in every if a not in timed_sentences][:sample],
        "sample": [a for a in every if a[1] != "hour"][:sample],
    }


def clock(minute: int | None) -> str:
    if minute is None:
        return "no time"
    hour, rest = divmod(minute % 1440, 60)
    return f"{(hour % 12) or 12}:{rest:02d} {'am' if hour < 12 else 'pm'}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="read this finished run instead of running one")
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--keep", type=Path, help="keep the run under this folder")
    args = parser.parse_args(argv)
    run_dir = args.run
    if run_dir is None:
        from townsquare.launch.runner import start_run

        out = args.keep or Path(tempfile.mkdtemp(prefix="smallville-plans-"))
        overrides = ["llm.name=local", f'llm.model="{args.model}"', f"rounds={args.rounds}", f"populations.0.count={args.agents}"]
        run, summary = start_run(SMALLVILLE, overrides=overrides, seed=args.seed, out=out / f"smallville-seed{args.seed}")
        if summary.stopped:
            print(f"stopped: {summary.stopped}", file=sys.stderr)
        run_dir = run.path
    report = plan_report(Path(run_dir))
    sources = [a["source"] for a in report["agents"].values()]
    print(f"run: {run_dir}")
    print(f"day plans: {len(sources)} agents, {sources.count('llm') + sources.count('cut')} from the model "
          f"({sources.count('cut')} cut to length), {sources.count('fallback')} fallback")
    for agent, entry in report["agents"].items():
        print(f"  {agent}: {entry['source']}, {entry['strokes']} strokes, {entry['timed_strokes']} with a time")
    for purpose, entry in report["answers"].items():
        counts = ", ".join(f"{entry[o]} {o}" for o in ("constrained", "parsed", "repaired", "fallback"))
        print(f"  {purpose} ({'/'.join(entry['modes']) or 'no mode'}): {counts}")
    print(f"activities (strokes, hours, actions): {report['activities']}, "
          f"{report['timed_sentences']} are a sentence with a time")
    for agent, level, text, minute in report["sample"]:
        print(f"  {agent} {level:6s} {clock(minute):>8s}  {text}")
    for agent, level, text, minute in report["not_sentences"]:
        print(f"  not a timed sentence: {agent} {level} {clock(minute)} {text!r}")


if __name__ == "__main__":
    main()
