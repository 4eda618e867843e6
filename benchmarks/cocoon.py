"""The information-cocoon study over seeds (Wang et al., fig. 4a), offline: does the entropy of
what MF recommends fall, and do Rec-Strategy and Soc-Strategy raise it?

Runs ``examples/cocoon.toml`` (50 embedding-baseline users, every one active every round,
``item_mf`` retrained after each round, five items a page, strategies from round 20) under four
conditions, ``mf`` (MF alone), ``rec`` (+ Rec-Strategy: one of the five items random every round),
``soc`` (+ Soc-Strategy: one friend with different interests each) and ``both``, for each seed,
on two catalogues:

- ``synthetic``: 2,000 made-up movies in 8 genres, the 50 users of ``cocoon_personas.jsonl``;
- ``ml-latest-small``: the 9,125 MovieLens movies and the first 50 MovieLens users
  (``movielens_history``: their earlier ratings profile them, enter MF's log and are never
  offered again). The installed dataset ``movielens-latest-small`` (``townsquare data fetch
  movielens-latest-small``) or ``--data PATH``; absent, the catalogue is skipped with one line.

Items are never shown twice to the same user (the platform's ``reshow = false``, as in the
reference code; ``--reshow`` turns it off) and every agent is measured every round by the page
MF would serve it at the round's end (``cocoon_entropy.users = "everyone"``), so a treatment
cannot change who is measured. Per catalogue and condition it reports the entropy curve (mean
over seeds per round), the end value (the mean of the last ``--end-rounds`` rounds of a run)
with its mean and 95 % Student-t interval over seeds, the curve's highest value and how far the
end lies below it (the paper: about 8.5 % under MF), and for each strategy its effect: the
paired difference of end values against ``mf`` run with the same seed, with its interval. The
reference code's measure, the entropy of everything recommended to a user so far, is reported
beside it (``cumulative_end``, ``cumulative_effect``), and, where the personas name interests,
``off_interest``: the share of the movies watched from round 20 on whose genres meet none of
the watcher's interests (what the agents did, beside what MF showed them).

``--agents oracle`` replaces the embedding-baseline users by RecAgent agents
(``recagent_policy``, every memory tier) answered by the oracle test model
(``townsquare.testing.oracle``: rules that act only on what each prompt says). Their choices then
come from their prompts: a page's items that meet the profile's interests or that friends'
messages named, and Soc-Strategy can act only as the paper's does, through what new friends
post and chat about, reaching an agent's memory and its "heard of" list. A test instrument, not
a language model: it shows whether the pathway can carry the strategies, not what an LLM's
users would do.

Usage: ``python benchmarks/cocoon.py [--seeds 5] [--rounds 50] [--json] [--data PATH] [--agents embedding|oracle]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "cocoon.toml"
CONDITIONS = {
    "mf": [],
    "rec": ["plugins.rec_strategy.enabled=true"],
    "soc": ["plugins.soc_strategy.enabled=true"],
    "both": ["plugins.rec_strategy.enabled=true", "plugins.soc_strategy.enabled=true"],
}
#: who the users are: (plugin options, scenario overrides) per ``--agents``
AGENTS = {
    "embedding": ([], []),
    "oracle": (["townsquare.testing.oracle"], ["llm.name=oracle", "populations.0.slots.policy=recagent_policy"]),
}
MOVIELENS = "ml-latest-small"
DATASET = "movielens-latest-small"  # its name in the data home (townsquare data fetch)


def find_movielens(data: str | None, name: str = DATASET) -> Path | None:
    """The ml-latest-small folder: ``--data`` (a folder, the folder holding it directly or under
    ``movielens/``, or ``data:NAME``), else the installed dataset ``movielens-latest-small``
    of the data home (``townsquare data fetch movielens-latest-small``); None when absent.
    The one place that knows where the data lives."""
    from townsquare.lib.data_paths import data_path, dataset_folder, installed_dataset

    if data:
        if data.startswith("data:"):
            try:
                return data_path(data)
            except Exception:
                return None
        root = Path(data)
        for folder in (root, root / MOVIELENS, root / "movielens" / MOVIELENS):
            if (folder / "movies.csv").is_file() and (folder / "ratings.csv").is_file():
                return folder
        return None
    return dataset_folder(name) if installed_dataset(name) is not None else None


def catalogue_overrides(catalogue: str, folder: Path | None) -> list[str]:
    if catalogue == "synthetic":
        return ["platform.catalogue=synthetic", "platform.synthetic_items=2000"]
    return [f"platform.catalogue=movielens", f"platform.path={folder}", "populations.0.personas.name=movielens_history",
            f"populations.0.personas.path={folder}"]


def entropy_curves(overrides: list[str], seed: int, out: Path, plugin_options: list[str] = (),
                   strategies_from: int = 20) -> tuple[list[float], list[float], float | None]:
    """The run's entropy per round, the reference code's cumulative entropy per round, and the
    share of the movies watched from round ``strategies_from`` on whose genres meet none of the
    watcher's persona interests (None when no agent names interests or nothing was watched)."""
    from townsquare.launch.runner import start_run

    run_dir, _ = start_run(SCENARIO, overrides=overrides, seed=seed, out=out, plugin_options=list(plugin_options))
    db = sqlite3.connect(run_dir.events_path)
    try:
        curves = [[v for _, v in db.execute("SELECT round, value FROM metrics WHERE name = ? ORDER BY round", (name,))]
                  for name in ("cocoon_entropy.entropy", "cocoon_entropy.entropy_cumulative")]
        interests = {a: {str(i).lower() for i in json.loads(p).get("fields", {}).get("interests") or ()}
                     for a, p in db.execute("SELECT agent_id, persona FROM agents")}
        watched = [(a, {str(g).lower() for g in json.loads(d or "{}").get("genres", ())})
                   for a, d in db.execute("SELECT agent_id, detail FROM actions WHERE kind = 'watch' AND round >= ?", (strategies_from,))]
    finally:
        db.close()
    judged = [genres.isdisjoint(interests[a]) for a, genres in watched if interests.get(a)]
    return curves[0], curves[1], (sum(judged) / len(judged) if judged else None)


def interval(values: list[float]) -> tuple[float, list[float]]:
    from townsquare.lib.stats import mean_interval

    found = mean_interval(values)
    return round(found.mean, 4), [round(found.low, 4), round(found.high, 4)]


def summarise(curves: dict[str, dict[int, list[float]]], end_rounds: int, strategies_from: int,
              cumulative: dict[str, dict[int, list[float]]] | None = None) -> dict[str, Any]:
    """Per condition: curve, end and end_ci, max, decline; per strategy: the paired effect; and
    the end of the cumulative entropy (the reference code's measure) with its paired effect."""
    seeds = sorted(curves["mf"])
    ends = {c: {s: sum(curves[c][s][-end_rounds:]) / len(curves[c][s][-end_rounds:]) for s in seeds} for c in curves}
    out: dict[str, Any] = {}
    for condition, runs in curves.items():
        length = min(len(runs[s]) for s in seeds)
        curve = [round(sum(runs[s][r] for s in seeds) / len(seeds), 4) for r in range(length)]
        end, end_ci = interval([ends[condition][s] for s in seeds])
        peak = max(curve)
        before = curve[max(0, strategies_from - 5):strategies_from]
        entry: dict[str, Any] = {"end": end, "end_ci": end_ci, "max": peak, "max_round": curve.index(peak),
                                 "end_below_max": round(1 - end / peak, 4) if peak else None,
                                 "before_strategies": round(sum(before) / len(before), 4) if before else None,
                                 "end_by_seed": [round(ends[condition][s], 4) for s in seeds], "curve": curve}
        if condition != "mf":
            entry["effect"], entry["effect_ci"] = interval([ends[condition][s] - ends["mf"][s] for s in seeds])
        if cumulative:
            last = {c: {s: cumulative[c][s][-1] for s in seeds} for c in cumulative}
            entry["cumulative_end"], entry["cumulative_end_ci"] = interval([last[condition][s] for s in seeds])
            if condition != "mf":
                entry["cumulative_effect"], entry["cumulative_effect_ci"] = interval([last[condition][s] - last["mf"][s] for s in seeds])
        out[condition] = entry
    return out


def run_catalogue(catalogue: str, folder: Path | None, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    plugin_options, agents = AGENTS[args.agents]
    base = [*catalogue_overrides(catalogue, folder), f"rounds={args.rounds}", f"recommender.name={args.recommender}",
            f"platform.reshow={'true' if args.reshow else 'false'}", "plugins.cocoon_entropy.users=everyone", *agents, *args.overrides]
    curves: dict[str, dict[int, list[float]]] = {c: {} for c in CONDITIONS}
    cumulative: dict[str, dict[int, list[float]]] = {c: {} for c in CONDITIONS}
    off_interest: dict[str, dict[int, float | None]] = {c: {} for c in CONDITIONS}
    for seed in args.seed_list:
        for condition, overrides in CONDITIONS.items():
            out = tmp / f"{catalogue}-{condition}-{seed}"
            curves[condition][seed], cumulative[condition][seed], off_interest[condition][seed] = \
                entropy_curves([*base, *overrides], seed, out, plugin_options)
            if not args.json:
                print(f"  {catalogue:<16} {condition:<5} seed {seed}: end {sum(curves[condition][seed][-args.end_rounds:]) / args.end_rounds:.3f}",
                      file=sys.stderr, flush=True)
    out = summarise(curves, args.end_rounds, strategies_from=20, cumulative=cumulative)
    for condition, shares in off_interest.items():
        if all(v is not None for v in shares.values()):
            out[condition]["off_interest"], out[condition]["off_interest_ci"] = interval(list(shares.values()))
    return out


def table(results: dict[str, Any]) -> str:
    lines = [f"{'catalogue':<16} {'cond':<5} {'max':>6} {'end':>6} {'95% CI':>17} {'below max':>9} {'effect vs mf':>13} {'95% CI':>17}"]
    for catalogue, conditions in results["catalogues"].items():
        if "skipped" in conditions:
            lines.append(f"{catalogue:<16} skipped: {conditions['skipped']}")
            continue
        for name, c in conditions.items():
            effect = f"{c['effect']:+.4f}" if "effect" in c else ""
            effect_ci = f"[{c['effect_ci'][0]:+.4f}, {c['effect_ci'][1]:+.4f}]" if "effect" in c else ""
            lines.append(f"{catalogue:<16} {name:<5} {c['max']:>6.3f} {c['end']:>6.3f} [{c['end_ci'][0]:.4f}, {c['end_ci'][1]:.4f}] "
                         f"{c['end_below_max']:>9.1%} {effect:>13} {effect_ci:>17}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--end-rounds", type=int, default=5, help="a run's end value: the mean of its last rounds")
    parser.add_argument("--recommender", default="item_mf")
    parser.add_argument("--catalogue", nargs="+", default=["synthetic", MOVIELENS], choices=["synthetic", MOVIELENS])
    parser.add_argument("--data", default=None, help=f"where {MOVIELENS} is (default: the installed dataset {DATASET})")
    parser.add_argument("--reshow", action="store_true", help="let the recommender show an item to the same user again")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a scenario override for every run (e.g. plugins.item_mf.regularization=5)")
    parser.add_argument("--agents", default="embedding", choices=sorted(AGENTS),
                        help="embedding: the offline baseline users; oracle: RecAgent agents on the oracle test model")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    args.seed_list = list(range(1, args.seeds + 1))
    from townsquare.lib import logs

    logs.configure(json_lines=False, level="warning")
    results: dict[str, Any] = {"settings": {"rounds": args.rounds, "seeds": args.seed_list, "end_rounds": args.end_rounds,
                                            "recommender": args.recommender, "reshow": args.reshow, "strategies_from": 20,
                                            "agents": args.agents,
                                            "users": 50, "measured": "everyone, every round", "overrides": args.overrides},
                               "catalogues": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for catalogue in args.catalogue:
            folder = None
            if catalogue == MOVIELENS:
                folder = find_movielens(args.data)
                if folder is None:
                    print(f"skipping {MOVIELENS}: not installed (townsquare data fetch {DATASET}, or --data PATH)", file=sys.stderr)
                    results["catalogues"][catalogue] = {"skipped": "not installed"}
                    continue
            results["catalogues"][catalogue] = run_catalogue(catalogue, folder, args, Path(tmp))
    print(json.dumps(results) if args.json else table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
