"""Park et al.'s party (§7.1): does it spread and do the invited come, measured as the paper
measured it, across the oracle's rating of news, seeds, the pathway ablations and two recall set-ups.

Each run is ``examples/valentines.toml`` (25 agents, February 13 06:00 to February 14 19:00, one
round a simulated quarter-hour). For every run the script reports, at the start and at the end of
each simulated day:

* **heard, by interview**: the paper's measure. Every agent is asked "Do you know about a
  Valentine's Day party?" (``townsquare eval park RUN --topic party`` machinery, from the checkpoint
  that ends the day; at the start, from the agents as built), and a yes counts only when its
  memory holds the conversation that conveyed it (or its seed does): yeses without one are
  counted apart as hallucinations;
* **heard, by text match**: ``town_metrics.party.heard`` (a remembered conversation, or the seed,
  matches ``valentine|party``), which also counts mentions that never gave a date;
* **density, by interview**: every agent is asked, for every other, "Do you know <name>?"; an
  edge where both say yes (the paper's mutual acquaintance), eta = 2|E| / (|V|(|V|-1));
* **density, by text match**: ``town_metrics.density`` (both name each other in a seed,
  conversation or reflection);
* and at the end: the guests (heard; not host, not staff), those who **came** for it (at Hobbs
  Cafe between 5 and 7 pm on the 14th doing something about the party), the candidacy's spread.

Cells (``--list``): the whole design with the oracle rating dated news 4, 5, 6 and 8
(``llm.news_importance``; a planning note about it one more); the ablations at the default
rating: ``-p no:conversation_memory``, ``-p no:agent_summary`` (yesterday's news no longer
reaches today's plan), and that with ``plugins.day_plan.replan_after_conversation=false`` too
(news heard today no longer reaches today's plan either); and the whole design
under the reference code's recall (MiniLM embeddings, relevance weighted 3:
``RECALL_PRESETS["reference_code"]``) at ratings 5 and 8. Each over ``--seeds`` (default 1, 2,
3), with the mean and the 95 % t-interval over seeds. Under the oracle every seed gives the same
numbers (neither the oracle nor the town draws from the seed), so the intervals have no width:
the seeds are there for a real model (``--llm openai:MODEL``; the ratings are then the model's
own, and only one rating is run).

Runs take minutes each on a shared 2-core machine: every finished run's numbers are written to
``--out`` (default ``runs/party-benchmark``) and a second call skips them, so the grid can be
run in parts (``--only``) and resumed. Run folders are deleted once measured (``--keep`` keeps
them). The seed files: ``townsquare data fetch smallville-n25``. Usage::

    python benchmarks/party.py [--llm oracle] [--seeds 1,2,3] [--only whole@5,...] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "examples" / "valentines.toml"
ORACLE = "townsquare.testing.oracle"
#: condition -> (the plugins it disables, the settings it changes)
CONDITIONS: dict[str, tuple[list[str], list[str]]] = {
    "whole": ([], []),
    "no conversation memory": (["conversation_memory"], []),
    "no memory-written summary": (["agent_summary"], []),
    # and no re-plan after a conversation either: news heard today cannot reach today's plan
    "no summary, no same-day re-plan": (["agent_summary"], ["plugins.day_plan.replan_after_conversation=false"]),
}
#: Park et al. §7.1, per measure
PAPER = {"heard": "1 -> 13 of 25", "candidacy": "1 -> 8 of 25", "density": "0.167 -> 0.74", "came": "5 of 12 invited"}


@dataclass(frozen=True)
class Cell:
    recall: str  # a key of RECALL_PRESETS
    condition: str  # a key of CONDITIONS
    rating: int | None  # the oracle's llm.news_importance (None: the model's own)

    @property
    def name(self) -> str:
        label = self.condition.replace(",", "").replace(" ", "-")
        return f"{label}@{self.rating if self.rating is not None else 'model'}" + \
            ("" if self.recall == "ours" else f"+{self.recall}")

    def overrides(self, presets: dict[str, tuple[str, ...]]) -> list[str]:
        rating = [f"llm.news_importance={self.rating}"] if self.rating is not None else []
        return [*rating, *CONDITIONS[self.condition][1], *presets[self.recall]]

    def flags(self) -> str:
        disabled, settings = CONDITIONS[self.condition]
        return " ".join([*(f"-p no:{p}" for p in disabled), *(f"--set {s}" for s in settings)]) or "all of Park's components"


def default_cells(oracle: bool) -> list[Cell]:
    if not oracle:
        return [Cell("ours", c, None) for c in CONDITIONS] + [Cell("reference_code", "whole", None)]
    return ([Cell("ours", "whole", r) for r in (4, 5, 6, 8)]
            + [Cell("ours", c, 8) for c in CONDITIONS if c != "whole"]
            + [Cell("reference_code", "whole", r) for r in (5, 8)])


def metric_rows(run_dir: Path) -> dict[int, dict[str, float]]:
    """round -> town_metrics values (without the prefix)."""
    db = sqlite3.connect(run_dir / "events.sqlite")
    try:
        rows: dict[int, dict[str, float]] = {}
        for round, name, value in db.execute("SELECT round, name, value FROM metrics WHERE name LIKE 'town_metrics.%'"):
            rows.setdefault(round, {})[name[len("town_metrics."):]] = value
        calls = db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
    finally:
        db.close()
    rows[-1] = {"llm_calls": float(calls)}
    return rows


def measure(run_dir: Path) -> dict:
    """The run's numbers: per moment (the start, each day's end) heard and density by interview and
    by text match; at the end the guests and who came."""
    from townsquare.plugins.generative_agents.evaluation.evaluate_command import interview_run
    from townsquare.plugins.generative_agents.evaluation.social_interviews import day_ends
    from townsquare.rundir import RunDir

    rows = metric_rows(run_dir)
    manifest = RunDir.open(run_dir).read_manifest()
    clock = manifest["scenario"]["clock"]
    start, minutes = datetime.fromisoformat(str(clock["start"])), int(clock["minutes_per_round"])
    last = max(r for r in rows if r >= 0)
    kept = [r for r, _ in RunDir.open(run_dir).checkpoints()]
    ends, missing = day_ends(start, minutes, last, kept)
    if missing:
        raise SystemExit(f"{run_dir}: no checkpoint of {missing[0]}: the scenario must keep its checkpoints")
    asked = asyncio.run(interview_run(str(run_dir), [None, *ends], ["party", "candidacy"], run_dir / "interviews"))
    moments = []
    for round, (party, candidacy) in asked:
        text = rows[0 if round is None else round]
        moments.append({
            "moment": "start" if round is None else str((start + timedelta(minutes=round * minutes)).date()),
            "round": round,
            "heard_interview": len(party.informed), "hallucinated": len(party.hallucinated),
            "heard_text": text["party.heard"],
            "candidacy_interview": len(candidacy.informed), "candidacy_text": text["candidacy.heard"],
            "density_interview": party.density, "density_text": text["density"],
            "answers": party.answers,
        })
    end = rows[last]
    return {"moments": moments, "guests": end["party.guests"], "came": end["party.attended_guests"],
            "present": end["party.present_guests"], "sectors_known": [rows[0].get("sectors_known"), end.get("sectors_known")],
            "llm_calls": rows[-1]["llm_calls"]}


def run_cell(cell: Cell, llm: str, seed: int, out: Path, presets: dict[str, tuple[str, ...]]) -> dict:
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.cli.options import llm_overrides
    from townsquare.launch.runner import start_run

    plugins = make_plugin_manager(enable=[ORACLE] if llm == "oracle" else [], disable=CONDITIONS[cell.condition][0])
    began = time.monotonic()
    run_dir, _ = start_run(SCENARIO, overrides=[*llm_overrides(llm), *cell.overrides(presets)], seed=seed, out=out,
                           plugins=plugins)
    ran = time.monotonic() - began
    result = measure(run_dir.path)
    result.update(cell=cell.name, seed=seed, run_seconds=round(ran, 1), measure_seconds=round(time.monotonic() - began - ran, 1))
    return result


def interval_text(values: list[float], digits: int) -> str:
    from townsquare.lib.stats import mean_interval

    found = mean_interval(values)
    if found.n < 2 or found.high - found.low < 10 ** -digits:
        return f"{found.mean:.{digits}f}"
    return f"{found.mean:.{digits}f} [{found.low:.{digits}f}, {found.high:.{digits}f}]"


def table(cells: list[Cell], results: dict[str, list[dict]]) -> str:
    """One block per cell: a row per moment, columns the measures (mean [95 % interval] over seeds)."""
    lines = []
    for cell in cells:
        runs = results.get(cell.name, [])
        if not runs:
            continue
        flags = cell.flags()
        rating = f"news rated {cell.rating}" if cell.rating is not None else "the model's own ratings"
        lines.append(f"\n{cell.name}: {flags}, {rating}, recall {cell.recall}; {len(runs)} seed(s)")
        lines.append(f"  {'moment':<11} {'heard (interview)':>18} {'heard (text)':>13} {'density (interview)':>20} "
                     f"{'density (text)':>15} {'candidacy (int./text)':>22}")
        for i, moment in enumerate(runs[0]["moments"]):
            at = [r["moments"][i] for r in runs]
            lines.append(f"  {moment['moment']:<11} {interval_text([m['heard_interview'] for m in at], 1):>18} "
                         f"{interval_text([m['heard_text'] for m in at], 1):>13} "
                         f"{interval_text([m['density_interview'] for m in at], 3):>20} "
                         f"{interval_text([m['density_text'] for m in at], 3):>15} "
                         f"{interval_text([m['candidacy_interview'] for m in at], 1) + ' / ' + interval_text([m['candidacy_text'] for m in at], 1):>22}")
        lines.append(f"  guests {interval_text([r['guests'] for r in runs], 1)}, came {interval_text([r['came'] for r in runs], 1)}, "
                     f"there at all {interval_text([r['present'] for r in runs], 1)}; "
                     f"hallucinated yeses at the end {interval_text([r['moments'][-1]['hallucinated'] for r in runs], 1)}; "
                     f"LLM calls {interval_text([r['llm_calls'] for r in runs], 0)}, "
                     f"run {min(r['run_seconds'] for r in runs):.0f}-{max(r['run_seconds'] for r in runs):.0f} s")
    lines.append(f"\nPark et al. §7.1: heard {PAPER['heard']}, candidacy {PAPER['candidacy']}, density {PAPER['density']}, "
                 f"came {PAPER['came']} (by interview; density from mutual 'do you know' answers)")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="oracle", help="oracle (default) or PROVIDER:MODEL, as townsquare run --llm")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds (default 1,2,3)")
    parser.add_argument("--only", default="", help="comma-separated cell names to run (default all; see --list)")
    parser.add_argument("--list", action="store_true", help="print the cells and exit")
    parser.add_argument("--out", default="runs/party-benchmark", help="folder for the runs' numbers (resumable)")
    parser.add_argument("--keep", action="store_true", help="keep each run's folder")
    parser.add_argument("--table-only", action="store_true", help="print the table of what is already measured")
    args = parser.parse_args()
    from townsquare.lib import logs
    from townsquare.plugins.generative_agents.memory.park_retrieval import RECALL_PRESETS

    logs.configure(json_lines=False, level="error")
    oracle = args.llm == "oracle"
    cells = default_cells(oracle)
    if args.list:
        print("\n".join(c.name for c in cells))
        return 0
    wanted = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = [w for w in wanted if w not in {c.name for c in cells}]
    if unknown:
        print(f"--only: unknown cell {unknown[0]!r}; the cells: {', '.join(c.name for c in cells)}", file=sys.stderr)
        return 2
    todo = [c for c in cells if not wanted or c.name in wanted]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    out = Path(args.out)
    (out / "results").mkdir(parents=True, exist_ok=True)
    label = args.llm.replace(":", "-").replace("/", "-")
    print(f"Park et al.'s party, {SCENARIO.name}, --llm {args.llm}, seeds {', '.join(map(str, seeds))}"
          + (" (the oracle is a test instrument: rules that read only their prompt)" if oracle else ""), flush=True)
    # seed by seed, so that a grid cut short has every cell at least once
    pending = [(c, s) for s in seeds for c in todo if not (out / "results" / f"{label}-{c.name}-seed{s}.json").exists()]
    began = time.monotonic()
    for n, (cell, seed) in enumerate([] if args.table_only else pending, 1):
        target = out / "results" / f"{label}-{cell.name}-seed{seed}.json"
        folder = out / "runs" / f"{label}-{cell.name}-seed{seed}"
        shutil.rmtree(folder, ignore_errors=True)
        result = run_cell(cell, args.llm, seed, folder, RECALL_PRESETS)
        target.write_text(json.dumps(result, indent=1), encoding="utf-8")
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
        spent = time.monotonic() - began
        print(f"[{n}/{len(pending)}] {cell.name} seed {seed}: heard {result['moments'][-1]['heard_interview']} by interview, "
              f"{result['moments'][-1]['heard_text']:.0f} by text, came {result['came']:.0f} ({result['run_seconds']:.0f} s run, "
              f"{result['measure_seconds']:.0f} s interviews; about {spent / n * (len(pending) - n) / 60:.0f} min left)",
              flush=True)
    results: dict[str, list[dict]] = {}
    for cell in todo:
        for seed in seeds:
            path = out / "results" / f"{label}-{cell.name}-seed{seed}.json"
            if path.exists():
                results.setdefault(cell.name, []).append(json.loads(path.read_text(encoding="utf-8")))
    print(table(todo, results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
