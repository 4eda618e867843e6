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

With ``--voices`` it also reads the oracle's conformity prompts (as the oracle reads them) and
reports, over all agents of all seeds, rank correlations of AC_u with the number of friends, with
the number of *voices* (different people, the agent included, whose score of the movie its
prompts showed) and with the rounds it was active, and the mean voices by number of friends: does
the pathway carry more opinions to better connected agents, and do more opinions mean more
changes?

**The confound and its control.** In ``examples/conformity_personas.jsonl`` the five first
watchers, whose own rating anchors them, are among the best connected (both seven-friend agents
and three of the four six-friend ones), so AC by number of friends mixes "more friends" with
"watched first". Two controls, both reported for every variant:

- ``--graph random``: each seed draws a new friend graph, independent of who watched first: the
  scenario's degree sequence (2-7 friends) dealt out to the agents at random and paired by the
  configuration model (redrawn until simple), written as a personas file for that run;
- stratified: ``spearman_others``, rho over the 15 agents who had not watched the movie before
  the run, with its interval, and their AC(i).

``no_friends_memory`` removes friends' opinions from memory and nothing else
(``plugins.recagent_policy.remember_friends = false``: posts received are not remembered, of a
chat only the agent's own lines are; titles are still heard of and everything else runs).
``--weights 0.25 0.5 1`` repeats ``full`` at those values of the oracle's disposition
``llm.conformity_weight`` (how far a rating moves toward the recalled opinions; 0.5 by default).

Usage: ``python benchmarks/conformity.py [--seeds 5] [--graph fixed|random] [--json] [--tiers]
[--voices] [--weights W ...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from townsquare.lib.stats import spearman

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "conformity.toml"
#: the movie every agent scores in that scenario (its ``plugins.conformity.item``, m1)
TITLE = "Silent Orbit 1"
PERSONAS = ROOT / "examples" / "conformity_personas.jsonl"
#: variant -> (plugin options, scenario overrides)
VARIANTS = {
    "full": ([], []),
    "no_memory": (["no:short_term_memory", "no:long_term_memory"], []),
    "no_friends_memory": ([], ["plugins.recagent_policy.remember_friends=false"]),
}
TIERS = {"no_short": (["no:short_term_memory"], []), "no_long": (["no:long_term_memory"], [])}


def random_graph(personas: list[dict[str, Any]], rng: np.random.Generator) -> list[dict[str, Any]]:
    """``personas`` with a new friend graph: their degree sequence dealt out at random and
    paired by the configuration model, redrawn until it has no loop and no double edge."""
    degrees = rng.permutation([len(p["fields"].get("friends") or ()) for p in personas])
    stubs = np.repeat(np.arange(len(personas)), degrees)
    for _ in range(100_000):
        pairs = rng.permutation(stubs).reshape(-1, 2)
        edges = {tuple(sorted(map(int, pair))) for pair in pairs}
        if len(edges) == len(pairs) and all(a != b for a, b in edges):
            break
    else:
        raise RuntimeError("no simple graph drawn for this degree sequence")
    friends: dict[int, list[str]] = {i: [] for i in range(len(personas))}
    for a, b in sorted(edges):
        friends[a].append(personas[b]["name"])
        friends[b].append(personas[a]["name"])
    return [{**p, "fields": {**p["fields"], "friends": sorted(friends[i])}} for i, p in enumerate(personas)]


def personas_for(seed: int, graph: str, folder: Path) -> list[str]:
    """The overrides that give a run its friend graph: none for ``fixed``, else a personas file
    with the seed's random graph."""
    if graph == "fixed":
        return []
    personas = [json.loads(line) for line in PERSONAS.read_text().splitlines() if line.strip()]
    path = folder / f"personas-{seed}.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in random_graph(personas, np.random.default_rng([seed, 17]))))
    return [f"populations.0.personas.path={path}"]


class Voices:
    """While open, the oracle's prompts are read as it reads them: per agent, the people whose
    score of the movie its conformity prompts show, and how many rounds it was active."""

    def __init__(self, title: str):
        self.title, self.heard, self.active = title, {}, {}

    def __enter__(self) -> "Voices":
        from townsquare.testing.oracle import OracleLLM
        from townsquare.testing.oracle.recagent import norm, opinions_by_person, section_lines
        from townsquare.testing.oracle.prompt_view import PromptView

        self.original = original = OracleLLM.complete

        async def complete(oracle: Any, request: Any) -> Any:
            if request.purpose == "recagent.activity":
                self.active[request.agent_id] = self.active.get(request.agent_id, 0) + 1
            elif request.purpose == "recagent.conformity":
                found = opinions_by_person(section_lines(PromptView.of(request), "What you remember about it"))
                people = {who for title, by in found.items() if norm(title) == norm(self.title) for who in by}
                self.heard.setdefault(request.agent_id, set()).update(people)
            return await original(oracle, request)

        OracleLLM.complete = complete
        return self

    def __exit__(self, *exc: Any) -> None:
        from townsquare.testing.oracle import OracleLLM

        OracleLLM.complete = self.original


def run_once(seed: int, plugin_options: list[str], out: Path, rounds_counted: int = 10, overrides: list[str] = (),
             voices: bool = False) -> dict[str, Any]:
    from townsquare.launch.run_lock import open_run
    from townsquare.launch.runner import start_run

    with Voices(TITLE) if voices else contextlib.nullcontext() as listened:
        run_dir, _ = start_run(SCENARIO, seed=seed, out=out, plugin_options=["townsquare.testing.oracle", *plugin_options],
                               overrides=["llm.name=oracle", *overrides])
    _, state = open_run(str(run_dir.path)).latest_checkpoint()
    scores = state["metrics"]["conformity"]["scores"]
    friends = {a: len(s["persona"]["fields"].get("friends") or ()) for a, s in state["agents"].items()} \
        if all("persona" in s for s in state["agents"].values()) else friend_counts(run_dir)
    ac = {a: sum(1 for r in range(1, min(len(s), rounds_counted + 1)) if s[r] != s[r - 1]) / rounds_counted for a, s in scores.items()}
    agents = sorted(ac)
    first = first_watchers(run_dir)
    others = [a for a in agents if a not in first]
    rho = spearman([friends[a] for a in agents], [ac[a] for a in agents])
    out = {"rho": rho, "rho_others": spearman([friends[a] for a in others], [ac[a] for a in others]), "ac": ac,
           "friends": friends, "first": sorted(first), "changes": sum(ac.values()) * rounds_counted}
    if listened is not None:
        out["voices"] = {a: len(listened.heard.get(a, ())) for a in agents}
        out["active"] = {a: listened.active.get(a, 0) for a in agents}
    return out


def first_watchers(run_dir: Any) -> set[str]:
    """The agents whose persona history holds the movie: they rated it before the run."""
    import sqlite3

    db = sqlite3.connect(run_dir.events_path)
    try:
        rows = db.execute("SELECT agent_id, persona FROM agents").fetchall()
    finally:
        db.close()
    return {a for a, p in rows if any(h.get("title") == TITLE for h in json.loads(p).get("fields", {}).get("history") or ())}


def friend_counts(run_dir: Any) -> dict[str, int]:
    import sqlite3

    db = sqlite3.connect(run_dir.events_path)
    try:
        rows = db.execute("SELECT agent_id, persona FROM agents").fetchall()
    finally:
        db.close()
    return {a: len(json.loads(p).get("fields", {}).get("friends") or ()) for a, p in rows}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    from townsquare.lib.stats import mean_interval

    def rounded(found: Any) -> list[float | None]:
        return [round(found.low, 4), round(found.high, 4)] if not math.isnan(found.low) else [None, None]

    found = mean_interval([r["rho"] if r["rho"] is not None else 0.0 for r in runs])
    others = mean_interval([r["rho_others"] if r["rho_others"] is not None else 0.0 for r in runs])
    by_friends: dict[int, list[float]] = {}
    others_by_friends: dict[int, list[float]] = {}
    for r in runs:
        for agent, value in r["ac"].items():
            by_friends.setdefault(r["friends"][agent], []).append(value)
            if agent not in r["first"]:
                others_by_friends.setdefault(r["friends"][agent], []).append(value)
    return {"spearman": round(found.mean, 4), "spearman_ci": rounded(found),
            "spearman_by_seed": [None if r["rho"] is None else round(r["rho"], 4) for r in runs],
            "spearman_others": round(others.mean, 4), "spearman_others_ci": rounded(others),
            "changes_by_seed": [int(r["changes"]) for r in runs],
            "ac_by_friends": {str(i): round(float(np.mean(v)), 4) for i, v in sorted(by_friends.items())},
            "ac_by_friends_others": {str(i): round(float(np.mean(v)), 4) for i, v in sorted(others_by_friends.items())},
            "agents_by_friends": {str(i): len(v) for i, v in sorted(by_friends.items())},
            **(voices(runs) if all("voices" in r for r in runs) else {})}


def voices(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Rank correlations over every agent of every run (see ``--voices``), and voices by friends."""
    rows = [(r["friends"][a], r["voices"][a], r["active"][a], r["ac"][a]) for r in runs for a in r["ac"]]
    friends, heard, active, ac = (list(column) for column in zip(*rows))

    def rho(x: list[float], y: list[float]) -> float | None:
        found = spearman(x, y)
        return None if found is None else round(found, 4)

    by_friends: dict[int, list[int]] = {}
    for f, v in zip(friends, heard):
        by_friends.setdefault(f, []).append(v)
    return {"rho_friends_voices": rho(friends, heard), "rho_voices_ac": rho(heard, ac), "rho_active_ac": rho(active, ac),
            "rho_friends_ac_pooled": rho(friends, ac),
            "voices_by_friends": {str(i): round(float(np.mean(v)), 2) for i, v in sorted(by_friends.items())}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N")
    parser.add_argument("--graph", choices=["fixed", "random"], default="fixed",
                        help="fixed: the scenario's friend graph; random: a graph drawn per seed, independent of who watched first")
    parser.add_argument("--tiers", action="store_true", help="also remove one memory tier at a time")
    parser.add_argument("--weights", type=float, nargs="*", default=[], help="also run full at these llm.conformity_weight values")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a scenario override for every run (e.g. activity.model=always)")
    parser.add_argument("--voices", action="store_true", help="also count the voices each agent's prompts show (see above)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from townsquare.lib import logs

    logs.configure(json_lines=False, level="error")
    variants = {**VARIANTS, **(TIERS if args.tiers else {}),
                **{f"full_w{w:g}": ([], [f"llm.conformity_weight={w:g}"]) for w in args.weights}}
    results: dict[str, Any] = {"settings": {"seeds": list(range(1, args.seeds + 1)), "llm": "oracle", "agents": 20, "rounds": 11,
                                            "graph": args.graph, "overrides": args.overrides},
                               "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (options, overrides) in variants.items():
            runs = [run_once(seed, options, Path(tmp) / f"{name}-{seed}", voices=args.voices,
                             overrides=[*personas_for(seed, args.graph, Path(tmp)), *overrides, *args.overrides])
                    for seed in range(1, args.seeds + 1)]
            results["variants"][name] = {"plugin_options": [f"-p {o}" for o in options], "overrides": overrides, **summarise(runs)}
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"friend graph: {args.graph}; {args.seeds} seeds")
    print(f"{'variant':<18} {'Spearman rho':>12} {'95% CI':>18} {'rho, not first':>14} {'95% CI':>18}  AC(i) by friends i (all; not first watchers)")
    for name, v in results["variants"].items():
        def text(ci: list) -> str:
            return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci[0] is not None else "-"
        print(f"{name:<18} {v['spearman']:>+12.3f} {text(v['spearman_ci']):>18} {v['spearman_others']:>+14.3f} {text(v['spearman_others_ci']):>18}"
              f"  {v['ac_by_friends']}; {v['ac_by_friends_others']}")
        if "voices_by_friends" in v:
            print(f"{'':<18}  voices by friends {v['voices_by_friends']}; rank correlations: friends-voices "
                  f"{v['rho_friends_voices']}, voices-AC {v['rho_voices_ac']}, active-AC {v['rho_active_ac']}, "
                  f"friends-AC {v['rho_friends_ac_pooled']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
