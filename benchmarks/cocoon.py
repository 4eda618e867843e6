"""The information-cocoon study over seeds (Wang et al., fig. 4a), offline: does the entropy of
what MF recommends fall, and do Rec-Strategy and Soc-Strategy raise it?

Runs ``examples/cocoon.toml`` (50 embedding-baseline users, every one active every round,
``item_mf`` retrained after each round, five items a page, strategies from round 20) under four
conditions, ``mf`` (MF alone), ``rec`` (+ Rec-Strategy: one of the five items random every round),
``soc`` (+ Soc-Strategy: one friend with different interests each) and ``both``, for each seed,
on up to three catalogues:

- ``synthetic``: 2,000 made-up movies in 8 genres, the 50 users of ``cocoon_personas.jsonl``;
- ``ml-1m``: the paper's catalogue, MovieLens-1M's 3,883 movies in 18 genres (``movies.dat``),
  with the same 50 users (their interests are 8 of ML-1M's genres), as the paper's agents have
  interests; the installed dataset ``movielens-1m`` (``townsquare data fetch movielens-1m``) or
  ``--ml1m PATH`` (a folder holding ``movies.dat``);
- ``ml-latest-small``: the 9,125 MovieLens movies and the first 50 MovieLens users
  (``movielens_history``: their earlier ratings profile them, enter MF's log and are never
  offered again). The installed dataset ``movielens-latest-small`` (``townsquare data fetch
  movielens-latest-small``) or ``--data PATH``.

An absent dataset is skipped with one line.

**Re-show is a condition** (``--reshow``): by default an item is never shown twice to the same
user (the platform's ``reshow = false``, as in the reference code); then MF runs through each
user's best-matching items and has to move on, which works against a cocoon. With ``--reshow``
the platform may show an item again (an item shown ``max_shown`` times to a user still goes
last). The study's result depends on it; run both.

Every agent is measured every round by the page MF would serve it at the round's end
(``cocoon_entropy.users = "everyone"``), so a treatment cannot change who is measured, with two
readings of the paper's E (``cocoon_entropy``): ``every_genre`` (an item counts once per genre)
and ``first_genre`` (an item counts by its first genre). Per catalogue, condition and reading it
reports the level of a page of random items (``random_page``: the expected E of five items drawn
from the whole catalogue; a page above it is more diverse than chance, and a random item,
Rec-Strategy's, then lowers E on average), the entropy curve (mean over seeds per round), the end value (the mean of the last
``--end-rounds`` rounds of a run) with its mean and 95 % Student-t interval over seeds, the
curve's highest value and how far the end lies below it (the paper: about 8.5 % under MF), also
per seed against that seed's own highest value (``below_max``, with its interval), and for each
strategy its effect: the paired difference of end values against ``mf`` run with the same seed,
with its interval. The reference code's measure, the entropy of everything recommended to a
user so far, is reported beside it (``cumulative_end``, ``cumulative_effect``), and, where the
personas name interests, ``in_interest_first`` / ``in_interest_end``: the share of MF's page items
that meet the user's interests in the first round and at the end (has MF learnt?), and
``off_interest``: the share of the movies watched from round 20 on whose
genres meet none of the watcher's interests (what the agents did, beside what MF showed them).

MF's training is ``item_mf``'s (BPR with sampled negatives by default; ``--set
plugins.item_mf.loss=bce``, ``...impression_negatives=true``, ``...retrain_every=5``).

``--agents oracle`` replaces the embedding-baseline users by RecAgent agents
(``recagent_policy``, every memory tier) answered by the oracle test model
(``townsquare.testing.oracle``: rules that act only on what each prompt says). Their choices then
come from their prompts: a page's items that meet the profile's interests or that friends'
messages named, and Soc-Strategy can act only as the paper's does, through what new friends
post and chat about, reaching an agent's memory and its "heard of" list. A test instrument, not
a language model: it shows whether the pathway can carry the strategies, not what an LLM's
users would do.

Usage: ``python benchmarks/cocoon.py [--seeds 5] [--rounds 50] [--reshow] [--json] [--catalogue ...]
[--data PATH] [--ml1m PATH] [--agents embedding|oracle] [--set KEY=VALUE]``.
"""

from __future__ import annotations

import argparse
import json
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
ML1M = "ml-1m"
#: each MovieLens catalogue: its dataset in the data home and the files a folder must hold
DATASETS = {MOVIELENS: (DATASET, ("movies.csv", "ratings.csv")), ML1M: ("movielens-1m", ("movies.dat",))}
#: the two readings of the paper's E: metric per reading
MEASURES = {"every_genre": "cocoon_entropy.entropy", "first_genre": "cocoon_entropy.entropy_first_genre"}


def find_movielens(data: str | None, catalogue: str = MOVIELENS) -> Path | None:
    """The folder of a MovieLens catalogue: ``data`` (a folder, the folder holding it directly
    or under ``movielens/``, or ``data:NAME``), else the installed dataset of the data home
    (``townsquare data fetch NAME``); None when absent. The one place that knows where the data
    lives."""
    from townsquare.lib.data_paths import data_path, dataset_folder, installed_dataset

    name, files = DATASETS[catalogue]
    if data:
        if data.startswith("data:"):
            try:
                return data_path(data)
            except Exception:
                return None
        root = Path(data)
        for folder in (root, root / catalogue, root / "movielens" / catalogue):
            if all((folder / f).is_file() for f in files):
                return folder
        return None
    if installed_dataset(name) is None:
        return None
    folder = dataset_folder(name)
    return next((f for f in (folder, folder / catalogue) if all((f / x).is_file() for x in files)), folder)


def catalogue_overrides(catalogue: str, folder: Path | None) -> list[str]:
    if catalogue == "synthetic":
        return ["platform.catalogue=synthetic", "platform.synthetic_items=2000"]
    if catalogue == ML1M:  # the paper's items, the agents of cocoon_personas.jsonl with their interests
        return ["platform.catalogue=movielens", f"platform.path={folder}"]
    return ["platform.catalogue=movielens", f"platform.path={folder}", "populations.0.personas.name=movielens_history",
            f"populations.0.personas.path={folder}"]


def entropy_curves(overrides: list[str], seed: int, out: Path, plugin_options: list[str] = (),
                   strategies_from: int = 20) -> dict[str, Any]:
    """One run's entropy per round under each reading (``every_genre``, ``first_genre``), the
    reference code's cumulative entropy per round (``cumulative``), and ``off_interest``: the
    share of the movies watched from round ``strategies_from`` on whose genres meet none of the
    watcher's persona interests (None when no agent names interests or nothing was watched)."""
    from townsquare.launch.runner import start_run

    run_dir, _ = start_run(SCENARIO, overrides=overrides, seed=seed, out=out, plugin_options=list(plugin_options))
    return read_curves(run_dir.events_path, strategies_from)


def read_curves(events: Path, strategies_from: int = 20) -> dict[str, Any]:
    """What :func:`entropy_curves` returns, read from a run's ``events.sqlite``."""
    db = sqlite3.connect(events)
    try:
        series = {**MEASURES, "cumulative": "cocoon_entropy.entropy_cumulative", "in_interest": "cocoon_entropy.in_interest",
                  "random_page": "cocoon_entropy.random_page",
                  "random_page_first_genre": "cocoon_entropy.random_page_first_genre"}
        found = {key: [v for _, v in db.execute("SELECT round, value FROM metrics WHERE name = ? ORDER BY round", (name,))]
                 for key, name in series.items()}
        found["random_page"] = {"every_genre": next(iter(found["random_page"]), None),
                                "first_genre": next(iter(found.pop("random_page_first_genre")), None)}
        interests = {a: {str(i).lower() for i in json.loads(p).get("fields", {}).get("interests") or ()}
                     for a, p in db.execute("SELECT agent_id, persona FROM agents")}
        watched = [(a, {str(g).lower() for g in json.loads(d or "{}").get("genres", ())})
                   for a, d in db.execute("SELECT agent_id, detail FROM actions WHERE kind = 'watch' AND round >= ?", (strategies_from,))]
    finally:
        db.close()
    judged = [genres.isdisjoint(interests[a]) for a, genres in watched if interests.get(a)]
    return {**found, "off_interest": sum(judged) / len(judged) if judged else None}


def interval(values: list[float]) -> tuple[float, list[float]]:
    from townsquare.lib.stats import mean_interval

    found = mean_interval(values)
    return round(found.mean, 4), [round(found.low, 4), round(found.high, 4)]


def summarise(curves: dict[str, dict[int, list[float]]], end_rounds: int, strategies_from: int,
              cumulative: dict[str, dict[int, list[float]]] | None = None) -> dict[str, Any]:
    """Per condition: curve, end and end_ci, max, end_below_max (of the mean curve), below_max and
    below_max_ci (each seed's end against its own highest value); per strategy: the paired
    effect; and the end of the cumulative entropy (the reference code's measure) with its
    paired effect."""
    seeds = sorted(curves["mf"])
    ends = {c: {s: sum(curves[c][s][-end_rounds:]) / len(curves[c][s][-end_rounds:]) for s in seeds} for c in curves}
    out: dict[str, Any] = {}
    for condition, runs in curves.items():
        length = min(len(runs[s]) for s in seeds)
        curve = [round(sum(runs[s][r] for s in seeds) / len(seeds), 4) for r in range(length)]
        end, end_ci = interval([ends[condition][s] for s in seeds])
        peak = max(curve)
        before = curve[max(0, strategies_from - 5):strategies_from]
        below, below_ci = interval([1 - ends[condition][s] / max(runs[s]) for s in seeds if max(runs[s]) > 0])
        entry: dict[str, Any] = {"end": end, "end_ci": end_ci, "max": peak, "max_round": curve.index(peak),
                                 "end_below_max": round(1 - end / peak, 4) if peak else None,
                                 "below_max": below, "below_max_ci": below_ci,
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
    """Per condition: each reading's summary (``every_genre``, ``first_genre``), the cumulative
    entropy's end and effect, and ``off_interest``."""
    plugin_options, agents = AGENTS[args.agents]
    base = [*catalogue_overrides(catalogue, folder), f"rounds={args.rounds}", f"recommender.name={args.recommender}",
            f"platform.reshow={'true' if args.reshow else 'false'}", "plugins.cocoon_entropy.users=everyone", *agents, *args.overrides]
    conditions = {c: CONDITIONS[c] for c in args.conditions}
    runs: dict[str, dict[int, dict[str, Any]]] = {c: {} for c in conditions}
    for seed in args.seed_list:
        for condition, overrides in conditions.items():
            found = runs[condition][seed] = entropy_curves([*base, *overrides], seed, tmp / f"{catalogue}-{condition}-{seed}",
                                                           plugin_options, args.strategies_from)
            if not args.json:
                ends = "  ".join(f"{m} {sum(found[m][-args.end_rounds:]) / args.end_rounds:.3f}" for m in MEASURES)
                print(f"  {catalogue:<16} {condition:<5} seed {seed}: end {ends}", file=sys.stderr, flush=True)
    per_measure = {m: summarise({c: {s: r[m] for s, r in runs[c].items()} for c in conditions}, args.end_rounds, args.strategies_from,
                                {c: {s: r["cumulative"] for s, r in runs[c].items()} for c in conditions} if m == "every_genre" else None)
                   for m in MEASURES}
    out: dict[str, Any] = {"random_page": runs["mf"][args.seed_list[0]]["random_page"]}
    for condition in conditions:
        entry: dict[str, Any] = {m: per_measure[m][condition] for m in MEASURES}
        for key in ("cumulative_end", "cumulative_end_ci", "cumulative_effect", "cumulative_effect_ci"):
            if key in entry["every_genre"]:
                entry[key] = entry["every_genre"].pop(key)
        learnt = [r["in_interest"] for r in runs[condition].values() if r["in_interest"]]
        if len(learnt) == len(runs[condition]):  # MF's pages: the share of items that meet the user's interests, first round and end
            entry["in_interest_first"], entry["in_interest_first_ci"] = interval([c[0] for c in learnt])
            entry["in_interest_end"], entry["in_interest_end_ci"] = interval([sum(c[-args.end_rounds:]) / len(c[-args.end_rounds:]) for c in learnt])
        shares = [r["off_interest"] for r in runs[condition].values()]
        if all(v is not None for v in shares):
            entry["off_interest"], entry["off_interest_ci"] = interval(shares)
        out[condition] = entry
    return out


def table(results: dict[str, Any]) -> str:
    lines = [f"re-show: {'yes' if results['settings']['reshow'] else 'no'}; 95 % intervals over seeds {results['settings']['seeds']}",
             f"{'catalogue':<16} {'cond':<5} {'reading':<12} {'max':>6} {'end':>6} {'95% CI':>17} {'below max':>9} "
             f"{'95% CI':>17} {'effect vs mf':>13} {'95% CI':>17}"]
    for catalogue, conditions in results["catalogues"].items():
        if "skipped" in conditions:
            lines.append(f"{catalogue:<16} skipped: {conditions['skipped']}")
            continue
        random = conditions.get("random_page") or {}
        lines.append(f"{catalogue:<16} a page of random items: " + ", ".join(f"{k} {v:.3f}" for k, v in random.items() if v is not None))
        for name, entry in conditions.items():
            if name == "random_page":
                continue
            for reading in MEASURES:
                c = entry[reading]
                effect = f"{c['effect']:+.4f}" if "effect" in c else ""
                effect_ci = f"[{c['effect_ci'][0]:+.4f}, {c['effect_ci'][1]:+.4f}]" if "effect" in c else ""
                lines.append(f"{catalogue:<16} {name:<5} {reading:<12} {c['max']:>6.3f} {c['end']:>6.3f} [{c['end_ci'][0]:.4f}, {c['end_ci'][1]:.4f}] "
                             f"{c['below_max']:>9.1%} [{c['below_max_ci'][0]:+.3f}, {c['below_max_ci'][1]:+.3f}] {effect:>13} {effect_ci:>17}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--end-rounds", type=int, default=5, help="a run's end value: the mean of its last rounds")
    parser.add_argument("--strategies-from", type=int, default=20, help="the round the strategies start (the scenario's)")
    parser.add_argument("--recommender", default="item_mf")
    parser.add_argument("--catalogue", nargs="+", default=["synthetic", ML1M, MOVIELENS], choices=["synthetic", ML1M, MOVIELENS])
    parser.add_argument("--data", default=None, help=f"where {MOVIELENS} is (default: the installed dataset {DATASET})")
    parser.add_argument("--ml1m", default=None, help=f"where {ML1M} is (default: the installed dataset movielens-1m)")
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=list(CONDITIONS),
                        help="which conditions to run (mf is always run: the effects are paired against it)")
    parser.add_argument("--reshow", action="store_true", help="let the recommender show an item to the same user again (a condition)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a scenario override for every run (e.g. plugins.item_mf.loss=bce)")
    parser.add_argument("--agents", default="embedding", choices=sorted(AGENTS),
                        help="embedding: the offline baseline users; oracle: RecAgent agents on the oracle test model")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    args.seed_list = list(range(1, args.seeds + 1))
    args.conditions = ["mf", *(c for c in args.conditions if c != "mf")]
    from townsquare.lib import logs

    logs.configure(json_lines=False, level="warning")
    results: dict[str, Any] = {"settings": {"rounds": args.rounds, "seeds": args.seed_list, "end_rounds": args.end_rounds,
                                            "recommender": args.recommender, "reshow": args.reshow, "strategies_from": args.strategies_from,
                                            "agents": args.agents, "readings": list(MEASURES), "conditions": args.conditions,
                                            "users": 50, "measured": "everyone, every round", "overrides": args.overrides},
                               "catalogues": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for catalogue in args.catalogue:
            folder = None
            if catalogue != "synthetic":
                folder = find_movielens(args.ml1m if catalogue == ML1M else args.data, catalogue)
                if folder is None:
                    name = DATASETS[catalogue][0]
                    flag = "--ml1m" if catalogue == ML1M else "--data"
                    print(f"skipping {catalogue}: not installed (townsquare data fetch {name}, or {flag} PATH)", file=sys.stderr)
                    results["catalogues"][catalogue] = {"skipped": "not installed"}
                    continue
            results["catalogues"][catalogue] = run_catalogue(catalogue, folder, args, Path(tmp))
    print(json.dumps(results) if args.json else table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
