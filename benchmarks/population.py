"""A large population (the million-agent target, ``scale.py --p5``): N agents for R rounds, in one process or on Ray shards.

Two designs:

* ``--design embedding_baseline`` (default): ``examples/baseline.toml``, the embedding-baseline
  policy, no LLM. Budget: 1,000,000 agents x 24 rounds in <= 30 minutes and <= 16 GB on a
  2-core machine; on Ray, the summed memory of every process <= 1.3 x one process's and the
  wall time <= 1.1 x.
* ``--design generative_agents``: ``examples/generative_agents_social.toml`` (Park et al.'s
  agents: memory stream with an embedding per record, retrieval, reflection) with the scripted
  test model, no planner, every agent active every round, so each agent's memory stream takes
  in its feed and its own actions every round: a population whose memory grows with the agents
  and the rounds. Budget: on 2 shards each shard's growth <= 0.6 x the one process's.

Memory is measured per process. Each process of the run (the single process; on Ray the driver
and each shard) records in the run's manifest its resident set before its agents were built, its
peak (the kernel's high-water mark) and the CPU time it used (:mod:`townsquare.process_usage`);
``rss_growth_bytes`` is peak less before. ``rss_total_bytes`` is the peak of the summed
resident sets of this process and every Ray process (raylet, GCS, dashboard and runtime-env
agents, monitors, the shards' workers), sampled each second from ``/proc`` (Linux; shared
pages are counted once per process that maps them, so the sum overstates); in one process it is
the process's peak. ``cpu_s`` sums the CPU time of the run's processes (on a machine shared
with other work, the wall time says as much about the neighbours as about the run).

Usage::

    python benchmarks/population.py --agents 100000 --rounds 24 [--no-batch] [--keep DIR]
        [--design generative_agents] [--backend ray --shards 2] [--json] [--compare]

``--compare`` runs the one-process and the Ray run (each in a process of its own, one after the
other) and prints the ratios the budgets name. ``main(argv)`` returns the measurements as a dict
(``benchmarks/scale.py`` calls it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCENARIOS = {"embedding_baseline": EXAMPLES / "baseline.toml", "generative_agents": EXAMPLES / "generative_agents_social.toml"}
#: the generative agents as this benchmark runs them: the scripted test model, no planner
#: (every agent is active every round), a feed of 5 posts a round into the memory stream
GENERATIVE = ["llm.name=scripted", "populations.0.slots.planner=none", "plugins.generative_agent.feed_size=5",
              "plugins.generative_agent.post_probability=0.3"]
BUDGET_AGENTS, BUDGET_ROUNDS = 1_000_000, 24
BUDGET_SECONDS, BUDGET_BYTES = 30 * 60, 16 * 1024**3
#: the budgets on Ray, against one process (P5, and the memory of agents that own their state)
RAY_TOTAL_RATIO, RAY_WALL_RATIO, SHARD_GROWTH_RATIO = 1.3, 1.1, 0.6


def _rss_of(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _ray_processes() -> dict[str, str]:
    """pid -> a short name, for every process this one started (the Ray cluster a run starts:
    another cluster on the machine is not counted)."""
    from townsquare.scaleout.ray_reaper import descendants

    found = {}
    for pid in map(str, descendants(os.getpid())):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                words = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").split()
        except OSError:
            continue
        if not words:
            continue
        program = Path(words[0]).name
        if program.startswith("python"):  # a Python process: its script or module
            program = next((Path(w).name for w in words[1:] if w.endswith(".py") or w.endswith("ray_reaper")), program)
        found[pid] = words[0] if words[0].startswith("ray::") else program
    return found


class MemorySampler(threading.Thread):
    """Every ``every`` seconds: the summed resident set of this process and the Ray processes
    (its peak: :attr:`peak`) and each Ray process's own peak (:attr:`peaks`, pid -> (name, bytes))."""

    def __init__(self, every: float = 1.0):
        super().__init__(daemon=True)
        self.every, self.peak, self._halt = every, 0, threading.Event()
        self.peaks: dict[str, tuple[str, int]] = {}

    def run(self) -> None:
        while not self._halt.is_set():
            total = _rss_of("self")
            for pid, name in _ray_processes().items():
                rss = _rss_of(pid)
                total += rss
                if rss > self.peaks.get(pid, (name, 0))[1]:
                    self.peaks[pid] = (name, rss)
            self.peak = max(self.peak, total)
            self._halt.wait(self.every)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


def overrides_for(design: str, agents: int, rounds: int, batch: bool, backend: str, shards: int,
                  checkpoint_every: int | None) -> list[str]:
    overrides = [f"populations.0.count={agents}", f"rounds={rounds}"]
    if design == "embedding_baseline":
        overrides.append(f"plugins.embedding_baseline.batch={str(batch).lower()}")
    else:
        overrides += GENERATIVE
    if backend == "ray":
        overrides += ['engine.backend="ray"', f"engine.shards={shards}"]
    if agents > 100_000:  # the scenario limit that guards against a typo'd count
        overrides.append(f"limits.max_agents={agents}")
    if checkpoint_every is not None:
        overrides.append(f"engine.checkpoint_every={checkpoint_every}")
    return overrides


def measure(agents: int, rounds: int, *, design: str = "embedding_baseline", batch: bool = True, out: Path | None = None,
            checkpoint_every: int | None = None, backend: str = "local", shards: int = 2) -> dict:
    """Run ``design`` with ``agents`` x ``rounds`` and return what the benchmark reports.
    ``checkpoint_every`` overrides the scenario's (every round by default)."""
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.runner import start_run

    overrides = overrides_for(design, agents, rounds, batch, backend, shards, checkpoint_every)
    plugins = make_plugin_manager(enable=["townsquare.testing.scripted"]) if design == "generative_agents" else None
    sampler = MemorySampler()
    sampler.start()
    tmp = Path(tempfile.mkdtemp(prefix="population-")) if out is None else None
    run_path = (tmp / "run") if tmp is not None else out
    load_before = os.getloadavg()
    start = time.perf_counter()
    try:
        run_dir, summary = start_run(SCENARIOS[design], overrides=overrides, out=run_path, plugins=plugins)
        wall = time.perf_counter() - start
        db = sqlite3.connect(run_dir.events_path)
        steps, in_rounds = db.execute("SELECT COALESCE(SUM(active), 0), COALESCE(SUM(wall_seconds), 0) FROM rounds").fetchone()
        llm_calls = db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
        db.close()
        processes = run_dir.read_manifest().get("processes", [])
    finally:
        total = sampler.stop()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    processes += [{"role": f"ray: {name}", "pid": int(pid), "rss_peak_bytes": rss} for pid, (name, rss) in sorted(sampler.peaks.items())
                  if int(pid) not in {p["pid"] for p in processes}]
    if backend == "local":
        total = processes[0]["rss_peak_bytes"]
    scale = (BUDGET_AGENTS * BUDGET_ROUNDS) / (agents * rounds)
    return {
        "agents": agents, "rounds": rounds, "design": design, "batch": batch,
        "backend": backend if backend == "local" else f"ray x{shards}",
        "wall_s": wall, "cpu_s": sum(p.get("cpu_seconds") or 0.0 for p in processes), "rss_total_bytes": total,
        "processes": processes, "rss_growth_bytes": {p["role"]: p["rss_growth_bytes"] for p in processes if "rss_growth_bytes" in p},
        "agent_steps": int(steps), "steps_per_s": steps / wall if wall else 0.0, "llm_calls": llm_calls,
        "actions": summary.actions, "posts": summary.posts,
        # the rounds' own time (turns, writes, metrics, the store): wall time less building and checkpoints
        "rounds_s": in_rounds, "checkpoint_every": checkpoint_every or 1,
        "wall_ratio": wall / BUDGET_SECONDS, "rss_ratio": total / BUDGET_BYTES,
        # linear in agents x rounds: a guess for smaller runs, the measurement itself at budget size
        "extrapolated_wall_s": wall * scale, "extrapolated": scale != 1.0,
        "load_average": (load_before, os.getloadavg()),
    }


def report(result: dict) -> str:
    gib, mib = 1024**3, 1024**2
    lines = [
        f"population: {result['agents']:,} agents x {result['rounds']} rounds ({result['design'].replace('_', ' ')}, "
        f"{'batch ' + ('on' if result['batch'] else 'off') + ', ' if result['design'] == 'embedding_baseline' else ''}{result['backend']})",
        f"  wall {result['wall_s']:.1f} s ({result['wall_ratio']:.2f} of the 30-min budget), CPU {result['cpu_s']:.1f} s "
        f"(the run's processes), memory {result['rss_total_bytes'] / gib:.2f} GiB "
        f"{'(peak)' if result['backend'] == 'local' else '(peak of the sum over this process and every Ray process)'}",
    ]
    for p in result["processes"]:
        growth = p.get("rss_growth_bytes")
        lines.append(f"    {p['role']:<28} peak {p['rss_peak_bytes'] / mib:8.0f} MiB"
                     + (f", before building {p['rss_before_build_bytes'] / mib:6.0f} MiB, growth {growth / mib:8.0f} MiB"
                        f", CPU {p['cpu_seconds']:.1f} s" if growth is not None else ""))
    lines += [
        f"  {result['agent_steps']:,} agent-steps, {result['steps_per_s']:,.0f} agent-steps/s; {result['llm_calls']:,} LLM calls, "
        f"{result['actions']:,} actions, {result['posts']:,} posts",
        f"  rounds themselves {result['rounds_s']:.1f} s; building and checkpoints (every "
        f"{result['checkpoint_every']} round(s)) {result['wall_s'] - result['rounds_s']:.1f} s",
    ]
    if result["extrapolated"] and result["design"] == "embedding_baseline":
        lines.append(f"  linear extrapolation to 1,000,000 x 24 (not measured): wall "
                     f"{result['extrapolated_wall_s'] / 60:.1f} min ({result['extrapolated_wall_s'] / BUDGET_SECONDS:.2f} of budget)")
    before, after = result["load_average"]
    lines.append(f"  load average (1/5/15 min) before {before[0]:.1f}/{before[1]:.1f}/{before[2]:.1f}, "
                 f"after {after[0]:.1f}/{after[1]:.1f}/{after[2]:.1f} on {os.cpu_count()} cores")
    return "\n".join(lines)


def ratios(local: dict, ray: dict) -> dict:
    """What the Ray budgets compare: the summed memory, the wall and CPU time, and each shard's
    growth, each against the one process's."""
    one = local["rss_growth_bytes"]["run"]
    return {"rss_total_ratio": ray["rss_total_bytes"] / local["rss_total_bytes"], "wall_ratio": ray["wall_s"] / local["wall_s"],
            "cpu_ratio": ray["cpu_s"] / local["cpu_s"] if local["cpu_s"] else None,
            "growth_ratios": {role: growth / one for role, growth in ray["rss_growth_bytes"].items() if growth is not None and one}}


def compare(argv: list[str]) -> dict:
    """The one-process run and the Ray run of the same population, each in a process of its own."""
    results = {}
    for backend in ("local", "ray"):
        command = [sys.executable, __file__, *argv, "--backend", backend, "--json"]
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        results[backend] = json.loads(done.stdout.strip().splitlines()[-1])  # its report went to stderr
    return {**results, "ratios": ratios(results["local"], results["ray"])}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--design", choices=sorted(SCENARIOS), default="embedding_baseline")
    parser.add_argument("--no-batch", action="store_true", help="every agent through the per-agent path (embedding baseline)")
    parser.add_argument("--checkpoint-every", type=int, default=None, help="override engine.checkpoint_every (default: every round)")
    parser.add_argument("--keep", type=Path, default=None, help="write the run directory here and keep it")
    parser.add_argument("--backend", choices=["local", "ray"], default="local")
    parser.add_argument("--shards", type=int, default=2, help="Ray shards (a local cluster of this machine's CPUs)")
    parser.add_argument("--json", action="store_true", help="print the measurements as one JSON object (the report goes to stderr)")
    parser.add_argument("--compare", action="store_true", help="run in one process and on Ray, and print the ratios")
    args = parser.parse_args(argv)
    if args.compare:
        rest = [a for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--compare", "--json")]
        rest = [a for i, a in enumerate(rest) if a != "--backend" and (i == 0 or rest[i - 1] != "--backend")]
        result = compare(rest)
        print(json.dumps(result) if args.json else json.dumps(result["ratios"], indent=2), flush=True)
        return result
    from townsquare.lib import logs

    logs.configure(level="error")
    result = measure(args.agents, args.rounds, design=args.design, batch=not args.no_batch, out=args.keep,
                     checkpoint_every=args.checkpoint_every, backend=args.backend, shards=args.shards)
    if args.json:
        print(report(result), file=sys.stderr, flush=True)
        print(json.dumps(result), flush=True)
    else:
        print(report(result), flush=True)
    return result


if __name__ == "__main__":
    main()
    sys.exit(0)
