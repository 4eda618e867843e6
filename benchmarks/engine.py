"""Engine throughput: agent-steps per second on the in-memory platform.

An agent-step reads a 10-post feed and decides on each post. Two policies:

* ``scripted_feed``: one LLM decision per post through the whole LLM path (client, accounting,
  the llm_calls table) with the zero-latency scripted test model, so what is measured is the
  framework's own overhead per step (DESIGN.md §6). Target: >= 2,000 agent-steps/s.
* ``embedding_baseline``: the no-LLM policy scale runs use.

Every agent is active every round; round 0 (everyone posts, feeds empty) is a warm-up and is
not timed. Usage: ``python benchmarks/engine.py [--agents 1000 10000] [--rounds 3] [--policy scripted_feed]``.

``--against REF [--pairs 3]``: the same measurement on this checkout and on commit REF, side by
side in alternating pairs (``benchmarks/against.py``: REF in a temporary folder and virtual
environment), with the ratio of each pair and their median and spread; ``--policy`` defaults
to ``scripted_feed`` there (the LLM path).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

TARGET = 2000.0

SCENARIO = """
name = "bench"
seed = 1
rounds = {rounds}
[activity]
model = "always"
[engine]
concurrency = 256
checkpoint_every = 1000
{llm}
[[populations]]
name = "u"
count = {agents}
slots = {{ policy = "{policy}" }}
[populations.personas]
name = "inline"
items = [
  {{ name = "A", sentences = ["I love hiking and mountains.", "I cook vegan food."] }},
  {{ name = "B", sentences = ["Jazz piano is my life.", "I follow football."] }},
  {{ name = "C", sentences = ["Gardening and climate matter to me.", "I take photographs."] }},
]
[plugins.{plugin}]
{settings}
"""

POLICIES = {
    "scripted_feed": dict(llm='[llm]\nname = "scripted"', plugin="scripted", settings="policy_feed_size = 10\npolicy_post_probability = 0.2"),
    "embedding_baseline": dict(llm="", plugin="embedding_baseline", settings="feed_size = 10\npost_probability = 0.2"),
}


def bench(policy: str, agents: int, rounds: int) -> tuple[float, int, float]:
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.runner import start_run

    plugins = make_plugin_manager(enable=["townsquare.testing.scripted"], autoload=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.toml"
        path.write_text(SCENARIO.format(rounds=rounds, agents=agents, policy=policy, **POLICIES[policy]))
        start = time.perf_counter()
        run_dir, summary = start_run(path, plugins=plugins, out=Path(tmp) / "run")
        total = time.perf_counter() - start
        db = sqlite3.connect(run_dir.events_path)
        timed = db.execute("SELECT SUM(active), SUM(wall_seconds) FROM rounds WHERE round > 0").fetchone()
        feed = db.execute("SELECT AVG(json_array_length(post_ids)) FROM actions WHERE kind = 'browse' AND round > 0").fetchone()[0]
        calls = db.execute("SELECT COUNT(*) FROM llm_calls WHERE round > 0").fetchone()[0]
        db.close()
    steps, seconds = timed
    return steps / seconds, calls, feed or 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--policy", nargs="+", choices=list(POLICIES), help="default: both (scripted_feed with --against)")
    parser.add_argument("--against", metavar="REF", help="measure this checkout and commit REF side by side")
    parser.add_argument("--pairs", type=int, default=3, help="with --against: alternating pairs (default 3)")
    parser.add_argument("--ref-env", type=Path, help="with --against: keep REF's tree and environment in this folder (reused)")
    parser.add_argument("--one", action="store_true", help="one measurement (the first policy and agents) as a JSON line")
    args = parser.parse_args()
    policies = args.policy or (["scripted_feed"] if args.against or args.one else list(POLICIES))
    if args.one:
        rate, calls, feed = bench(policies[0], args.agents[0], args.rounds)
        print(json.dumps({"rate": rate, "work": {"llm_calls": calls, "feed": feed}}))
        return 0
    if args.against:
        return against(args, policies)
    print(f"{'policy':<20} {'agents':>7} {'steps/s':>10} {'vs target':>10} {'feed':>5} {'llm calls':>10}")
    for policy in policies:
        for agents in args.agents:
            rate, calls, feed = bench(policy, agents, args.rounds)
            print(f"{policy:<20} {agents:>7} {rate:>10.0f} {rate / TARGET:>9.2f}x {feed:>5.1f} {calls:>10}", flush=True)
    return 0


def against(args: argparse.Namespace, policies: list[str]) -> int:
    """Each policy and agent count on this checkout and on ``args.against``, side by side."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from against import Reference, side_by_side

    with Reference(args.against, args.ref_env) as ref:
        for policy in policies:
            for agents in args.agents:
                argv = [str(Path(__file__).resolve()), "--one", "--policy", policy, "--agents", str(agents),
                        "--rounds", str(args.rounds)]
                side_by_side(ref, args.pairs, argv, lambda result: result["rate"],
                             f"{policy}, {agents} agents, {args.rounds} rounds, agent-steps/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
