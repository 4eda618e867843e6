"""A large population in one process (the million-agent target, ``scale.py --p5``): ``examples/baseline.toml`` (the embedding-baseline
policy, no LLM) with N agents for R rounds.

Budget: 1,000,000 agents x 24 rounds in <= 30 minutes and <= 16 GB on a 2-core
machine. Prints agents x rounds, wall time, peak RSS (``resource.getrusage``: the process's high
water mark, this run being the only work the process did), agent-steps per second (an
agent-step is an active agent's turn), and the ratio of each to its budget; for a smaller run
also the wall time and memory a linear extrapolation to 1,000,000 x 24 gives (marked as such: a
guess, not a measurement). The load average is printed with each line: the machine's cores are
shared, and a busy machine makes every wall time longer.

With ``--backend ray [--shards N]`` the turns run on N Ray shards (``[engine] backend = "ray"``,
a local cluster of N CPUs) and the memory is the peak of the summed resident sets of this
process and every Ray process (shards, raylet, GCS, object store), sampled each second from
``/proc`` (Linux; shared pages are counted once per process that maps them, so the sum
overstates), and the CPU time is this process's (the shards' is not counted).

Usage: ``python benchmarks/population.py --agents 100000 --rounds 24 [--no-batch] [--keep DIR]
[--backend ray --shards 2]``. ``main(argv)`` returns the measurements as a dict
(``benchmarks/scale.py`` calls it).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "examples" / "baseline.toml"
BUDGET_AGENTS, BUDGET_ROUNDS = 1_000_000, 24
BUDGET_SECONDS, BUDGET_BYTES = 30 * 60, 16 * 1024**3


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_bytes() -> int:
    """The process's peak resident set size (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss_of(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _ray_processes() -> list[str]:
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == str(os.getpid()):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if b"ray::" in cmdline or b"/ray/" in cmdline or b"raylet" in cmdline or b"gcs_server" in cmdline:
            pids.append(pid)
    return pids


class MemorySampler(threading.Thread):
    """Peak summed RSS of this process and the Ray processes, sampled every ``every`` seconds."""

    def __init__(self, every: float = 1.0):
        super().__init__(daemon=True)
        self.every, self.peak, self._halt = every, 0, threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, _rss_of("self") + sum(_rss_of(pid) for pid in _ray_processes()))
            self._halt.wait(self.every)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


def measure(agents: int, rounds: int, *, batch: bool = True, out: Path | None = None, checkpoint_every: int | None = None,
            backend: str = "local", shards: int = 2) -> dict:
    """Run the baseline scenario with ``agents`` x ``rounds`` and return what the benchmark reports.
    ``checkpoint_every`` overrides the scenario's (every round by default)."""
    from townsquare.runner import start_run

    overrides = [f"populations.0.count={agents}", f"rounds={rounds}", f"plugins.embedding_baseline.batch={str(batch).lower()}"]
    sampler = None
    if backend == "ray":
        import ray

        ray.init(num_cpus=shards, include_dashboard=False, log_to_driver=False, configure_logging=False)
        overrides += ['engine.backend="ray"', f"engine.shards={shards}"]
        sampler = MemorySampler()
        sampler.start()
    if agents > 100_000:  # the scenario limit that guards against a typo'd count
        overrides.append(f"limits.max_agents={agents}")
    if checkpoint_every is not None:
        overrides.append(f"engine.checkpoint_every={checkpoint_every}")
    tmp = Path(tempfile.mkdtemp(prefix="population-")) if out is None else None
    run_path = (tmp / "run") if tmp is not None else out
    load_before = os.getloadavg()
    cpu_before = _cpu_seconds()
    start = time.perf_counter()
    try:
        run_dir, summary = start_run(SCENARIO, overrides=overrides, out=run_path)
        wall = time.perf_counter() - start
        cpu = _cpu_seconds() - cpu_before
        db = sqlite3.connect(run_dir.events_path)
        steps, in_rounds = db.execute("SELECT COALESCE(SUM(active), 0), COALESCE(SUM(wall_seconds), 0) FROM rounds").fetchone()
        db.close()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if sampler is not None:
            rss = sampler.stop()
            import ray

            ray.shutdown()
    if sampler is None:
        rss = peak_rss_bytes()
    scale = (BUDGET_AGENTS * BUDGET_ROUNDS) / (agents * rounds)
    return {
        "agents": agents, "rounds": rounds, "batch": batch, "backend": backend if backend == "local" else f"ray x{shards}",
        "wall_s": wall, "cpu_s": cpu, "peak_rss_bytes": rss,
        "agent_steps": int(steps), "steps_per_s": steps / wall if wall else 0.0,
        "actions": summary.actions, "posts": summary.posts,
        # the rounds' own time (turns, writes, metrics, the store): wall time less building and checkpoints
        "rounds_s": in_rounds, "checkpoint_every": checkpoint_every or 1,
        "wall_ratio": wall / BUDGET_SECONDS, "rss_ratio": rss / BUDGET_BYTES,
        # linear in agents x rounds: a guess for smaller runs, the measurement itself at budget size
        "extrapolated_wall_s": wall * scale, "extrapolated": scale != 1.0,
        "load_average": (load_before, os.getloadavg()),
    }


def report(result: dict) -> str:
    gib = 1024**3
    lines = [
        f"population: {result['agents']:,} agents x {result['rounds']} rounds (embedding baseline, "
        f"batch {'on' if result['batch'] else 'off'}, {result['backend']})",
        f"  wall {result['wall_s']:.1f} s ({result['wall_ratio']:.2f} of the 30-min budget), "
        f"peak RSS{'' if result['backend'] == 'local' else ' (this process and every Ray process, summed)'} "
        f"{result['peak_rss_bytes'] / gib:.2f} GiB ({result['rss_ratio']:.2f} of 16 GiB)",
        f"  CPU time {result['cpu_s']:.1f} s ({result['cpu_s'] / result['wall_s']:.0%} of a core over the run: "
        + ("the rest went to other processes on a shared machine)" if result["backend"] == "local" else
           "the driver's alone; the shards' is not counted)"),
        f"  {result['agent_steps']:,} agent-steps, {result['steps_per_s']:,.0f} agent-steps/s; "
        f"{result['actions']:,} actions, {result['posts']:,} posts",
        f"  rounds themselves {result['rounds_s']:.1f} s; building and checkpoints (every "
        f"{result['checkpoint_every']} round(s)) {result['wall_s'] - result['rounds_s']:.1f} s",
    ]
    if result["extrapolated"]:
        lines.append(f"  linear extrapolation to 1,000,000 x 24 (not measured): wall "
                     f"{result['extrapolated_wall_s'] / 60:.1f} min ({result['extrapolated_wall_s'] / BUDGET_SECONDS:.2f} of budget)")
    before, after = result["load_average"]
    lines.append(f"  load average (1/5/15 min) before {before[0]:.1f}/{before[1]:.1f}/{before[2]:.1f}, "
                 f"after {after[0]:.1f}/{after[1]:.1f}/{after[2]:.1f} on {os.cpu_count()} cores")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--no-batch", action="store_true", help="every agent through the per-agent path")
    parser.add_argument("--checkpoint-every", type=int, default=None, help="override engine.checkpoint_every (default: every round)")
    parser.add_argument("--keep", type=Path, default=None, help="write the run directory here and keep it")
    parser.add_argument("--backend", choices=["local", "ray"], default="local")
    parser.add_argument("--shards", type=int, default=2, help="Ray shards (a local cluster of as many CPUs)")
    args = parser.parse_args(argv)
    result = measure(args.agents, args.rounds, batch=not args.no_batch, out=args.keep, checkpoint_every=args.checkpoint_every,
                     backend=args.backend, shards=args.shards)
    print(report(result), flush=True)
    return result


if __name__ == "__main__":
    main()
    sys.exit(0)
