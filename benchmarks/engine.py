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
environment), with the ratio of each pair and their median and spread, of the wall-clock rates
and of the rates per CPU second (which a busy machine disturbs less); ``--policy`` defaults to
``scripted_feed`` there (the LLM path).
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


def bench(policy: str, agents: int, rounds: int) -> tuple[float, int, float, float]:
    """Agent-steps a second of the timed rounds (wall, from the ``rounds`` table), LLM calls and
    mean feed length in them, and agent-steps per CPU second of the process (what a busy
    machine's other work disturbs less) from round 1's start to the last round's start: the
    timed rounds but the last, each with its commit, without the last round's checkpoint."""
    from townsquare import hookimpl
    from townsquare.plugin_manager import make_plugin_manager
    try:
        from townsquare.launch.runner import start_run
    except ImportError:  # an --against REF from before townsquare.launch (the runner was townsquare.runner)
        from townsquare.runner import start_run

    starts: dict[int, float] = {}

    class RoundStarts:
        """The process's CPU time as each round starts (both sides of ``--against`` have the hook)."""

        @hookimpl
        def townsquare_on_round_start(self, round: int) -> None:
            starts[round] = time.process_time()

    plugins = make_plugin_manager(enable=["townsquare.testing.scripted"], autoload=False)
    plugins.pm.register(RoundStarts(), "bench-cpu")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.toml"
        path.write_text(SCENARIO.format(rounds=rounds, agents=agents, policy=policy, **POLICIES[policy]))
        run_dir, summary = start_run(path, plugins=plugins, out=Path(tmp) / "run")
        db = sqlite3.connect(run_dir.events_path)
        timed = db.execute("SELECT SUM(active), SUM(wall_seconds) FROM rounds WHERE round > 0").fetchone()
        cpu_steps = db.execute("SELECT SUM(active) FROM rounds WHERE round > 0 AND round < ?", (rounds - 1,)).fetchone()[0]
        feed = db.execute("SELECT AVG(json_array_length(post_ids)) FROM actions WHERE kind = 'browse' AND round > 0").fetchone()[0]
        calls = db.execute("SELECT COUNT(*) FROM llm_calls WHERE round > 0").fetchone()[0]
        db.close()
    steps, seconds = timed
    return steps / seconds, calls, feed or 0.0, cpu_steps / (starts[rounds - 1] - starts[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=3, help="at least 3 (round 0 is not timed)")
    parser.add_argument("--policy", nargs="+", choices=list(POLICIES), help="default: both (scripted_feed with --against)")
    parser.add_argument("--against", metavar="REF", help="measure this checkout and commit REF side by side")
    parser.add_argument("--pairs", type=int, default=3, help="with --against: alternating pairs (default 3)")
    parser.add_argument("--ref-env", type=Path, help="with --against: keep REF's tree and environment in this folder (reused)")
    parser.add_argument("--one", action="store_true", help="one measurement (the first policy and agents) as a JSON line")
    args = parser.parse_args()
    if args.rounds < 3:
        parser.error(f"--rounds {args.rounds}: at least 3 (round 0 is a warm-up, the CPU rate needs a whole round between rounds 1 and the last)")
    policies = args.policy or (["scripted_feed"] if args.against or args.one else list(POLICIES))
    if args.one:
        rate, calls, feed, cpu_rate = bench(policies[0], args.agents[0], args.rounds)
        print(json.dumps({"rate": rate, "cpu_rate": cpu_rate, "work": {"llm_calls": calls, "feed": feed}}))
        return 0
    if args.against:
        return against(args, policies)
    print(f"{'policy':<20} {'agents':>7} {'steps/s':>10} {'vs target':>10} {'feed':>5} {'llm calls':>10}")
    for policy in policies:
        for agents in args.agents:
            rate, calls, feed, _ = bench(policy, agents, args.rounds)
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
                             f"{policy}, {agents} agents, {args.rounds} rounds, agent-steps/s",
                             cpu_rate=lambda result: result["cpu_rate"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
