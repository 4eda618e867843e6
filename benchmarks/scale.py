"""Scale budgets: LLM-bound rounds in one process and on Ray shards.

Each measurement is a real run (``townsquare.launch.runner.start_run``): readers with the test-only
``scripted_feed`` policy (a 1-post feed, one like/skip decision through ``LLMClient.choose``)
talk to the ``openai`` provider and the whole middleware chain (cache journal, budget, retries,
concurrency limit, accounting) against fault servers without faults
(``townsquare.testing.fault_server``, each in its own process; several servers are several
``endpoints``, spread over the shards). One author posts every round; round 1 warms the
connection pools up, round 2 is measured: its wall time (the ``rounds`` table) includes the
driver's apply, the shards' replay and state sync and the store commit. Metrics are off
(``metrics = []``): these are LLM-bound rounds.

* **P1, an LLM-bound round** (``--p1``): 100 ms latency, concurrency ``C`` (64, 256), ``--waves`` x ``C`` calls:
  the author's and ``waves x C - 1`` readers'. The bound is calls x latency / C; target wall <=
  1.10 x bound. (The calls are a multiple of ``C`` so that the bound can be reached: with one
  call more, some slot has to make ``waves + 1`` calls of 100 ms one after another, and no
  client could do better than ``(waves + 1) / waves`` x the bound, 1.10 at 10 waves.)
* **P2, LLM throughput** (``--p2``): zero latency, 1,000 readers; agent-steps per second (readers / wall);
  target >= 900 on 2 cores with the client work in more than one process.
* **P5, a million agents** (``--p5``): ``benchmarks/population.py``'s ``main`` (a million embedding-baseline
  agents; that file's own options follow ``--p5-args``), when that file exists.
* **The floor** (``--floor``): P1's round shape (``--waves`` calls on each of C slots) with the
  ``http`` connection pool alone, no engine, middleware or agents: how close to the bound this
  machine and the test server let any client come.

``--backend local ray`` picks where the turns run (default both); ``--shards`` how many Ray
shards (default: one per CPU); ``--transport`` the ``openai`` provider's (``[llm] transport``,
default ``http``). Each row also gives round 2's CPU per LLM call (Linux, from ``/proc``):
this process's (the whole client in one process; on Ray the driver's apply and store), the
test servers', the Ray shards' (the turns and their LLM clients, the replays), Ray's own
processes' (raylet, GCS, agents) and the whole machine's (every process, others'
included: when it nears cores x wall / calls the round is CPU-bound). The load average is printed: the machine's cores
may be shared. Usage: ``python benchmarks/scale.py --p1 --p2 [--shards 2] [--servers 1]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from townsquare import hookimpl
from townsquare.scaleout.ray_reaper import descendants

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # llm_throughput beside this file, however this file was loaded
from llm_throughput import cpu_seconds  # noqa: E402
P1_TARGET, P2_TARGET = 1.10, 900.0
#: the measured round (round 1 opens the connections)
MEASURED = 2

SCENARIO = """
name = "scale"
seed = 3
rounds = 3
metrics = []
[activity]
model = "always"
[engine]
concurrency = {concurrency}
[recommender]
name = "chronological"
[llm]
name = "openai"
model = "bench"
api_key_env = ""
base_url = "{base_url}"
endpoints = [{endpoints}]
[plugins.scripted]
policy_feed_size = 1
policy_post_probability = 0.0
[[populations]]
name = "author"
count = 1
slots = {{ policy = "scripted_feed" }}
personas = {{ name = "inline", items = [{{ name = "Ada", sentences = ["I write about mountain walks."] }}] }}
config = {{ scripted = {{ policy_post_probability = 1.0 }} }}
[[populations]]
name = "readers"
count = {readers}
slots = {{ policy = "scripted_feed" }}
[populations.personas]
name = "inline"
items = [
  {{ name = "Bo", sentences = ["I play jazz piano at night."] }},
  {{ name = "Cy", sentences = ["I follow football every weekend."] }},
  {{ name = "Di", sentences = ["Mountains and hiking relax me."] }},
]
"""


@contextlib.contextmanager
def fault_servers(count: int, latency_ms: float):
    """``count`` fault servers without faults, each in its own process: their processes, each
    with its ``url``."""
    servers = [subprocess.Popen([sys.executable, "-m", "townsquare.testing.fault_server", "--port", "0",
                                 "--latency-ms", str(latency_ms)], stdout=subprocess.PIPE, text=True) for _ in range(count)]
    try:
        for server in servers:
            server.url = server.stdout.readline().strip()
        yield servers
    finally:
        for server in servers:
            server.terminate()
            server.wait()


class RoundMeter:
    """CPU seconds spent during round :data:`MEASURED`: this process, the servers, the Ray shards,
    Ray's own processes (raylet, GCS, agents: what this process started but the servers and the
    shards), the machine."""

    def __init__(self, pids: list[int]):
        self.pids = pids
        self.start: tuple[float, ...] | None = None
        self.spent = (math.nan,) * 5

    def read(self) -> tuple[float, ...]:
        servers = [cpu_seconds(pid) for pid in self.pids]
        shards, ray = 0.0, 0.0
        for pid in descendants(os.getpid()):
            if pid in self.pids:
                continue
            spent = cpu_seconds(pid) or 0.0
            if b"ray::Shard" in _cmdline(pid):
                shards += spent
            else:
                ray += spent
        return time.process_time(), math.nan if None in servers else sum(servers), shards, ray, machine_cpu_seconds()

    @hookimpl
    def townsquare_on_round_start(self, round):
        if round == MEASURED:
            self.start = self.read()

    @hookimpl
    def townsquare_on_round_end(self, round):
        if round == MEASURED and self.start is not None:
            self.spent = tuple(b - a for a, b in zip(self.start, self.read()))


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def machine_cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (``/proc/stat``; NaN elsewhere)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            ticks = [int(v) for v in stat.readline().split()[1:]]
    except OSError:
        return math.nan
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def measure_round(servers: list, readers: int, concurrency: int, backend: str, shards: int | None,
                  sets: list[str] = ()) -> tuple[int, float, tuple[float, float, float]]:
    """One run; (LLM calls, wall seconds, (this process, servers, machine) CPU seconds) of round 2."""
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.runner import start_run

    urls = [server.url for server in servers]
    endpoints = ", ".join(f'{{ base_url = "{url}", api_key_env = "" }}' for url in urls[1:])
    text = SCENARIO.format(concurrency=concurrency, base_url=urls[0], endpoints=endpoints, readers=readers)
    overrides = [f'engine.backend="{backend}"', *sets] + ([f"engine.shards={shards}"] if shards and backend == "ray" else [])
    meter = RoundMeter([server.pid for server in servers])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scale.toml"
        path.write_text(text, encoding="utf-8")
        plugins = make_plugin_manager(enable=["townsquare.testing.scripted"])
        plugins.pm.register(meter, "scale-round-meter")
        run_dir, summary = start_run(path, overrides=overrides, plugins=plugins, out=Path(folder) / "run")
        if summary.stopped:
            raise SystemExit(f"the run stopped: {summary.stopped}")
        db = sqlite3.connect(run_dir.events_path)
        try:
            calls, wall = db.execute("SELECT llm_calls, wall_seconds FROM rounds WHERE round = ?", (MEASURED,)).fetchone()
            failed = db.execute("SELECT COUNT(*) FROM llm_calls WHERE status != 'ok'").fetchone()[0]
        finally:
            db.close()
    if failed:
        raise SystemExit(f"{failed} calls did not succeed: not a measurement")
    return calls, wall, meter.spent


def cpu_columns(spent: tuple[float, ...], calls: int) -> str:
    return "  ".join(f"{seconds / calls * 1000:>6.2f}" for seconds in spent)


CPU_HEAD = f"{'CPU ms/call: here':>17}  {'server':>6}  {'shards':>6}  {'ray':>6}  {'machine':>7}"


def label(args: argparse.Namespace, backend: str) -> str:
    return backend if backend == "local" else f"ray x{args.shards or os.cpu_count()}"


def p1(args: argparse.Namespace) -> None:
    latency = 0.1
    print(f"P1: LLM-bound round, {latency * 1000:g} ms endpoint(s) x {args.servers}, wall <= {P1_TARGET:.2f} x bound "
          f"(calls x latency / concurrency); transport {args.transport}; {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'backend':>10}  {'concurrency':>11}  {'calls':>6}  {'wall s':>7}  {'bound s':>7}  {'wall/bound':>10}  "
          f"{'':22}  {CPU_HEAD}")
    with fault_servers(args.servers, latency * 1000) as servers:
        for concurrency in args.concurrency:
            for backend in args.backend:
                calls, wall, spent = measure_round(servers, args.waves * concurrency - 1, concurrency, backend, args.shards,
                                                   args.sets)
                bound = calls * latency / concurrency
                verdict = "met" if wall / bound <= P1_TARGET else "MISSED"
                print(f"{label(args, backend):>10}  {concurrency:>11}  {calls:>6}  {wall:>7.2f}  {bound:>7.2f}  "
                      f"{wall / bound:>10.3f}  (target <= {P1_TARGET:.2f}: {verdict:>6})  {cpu_columns(spent, calls):>50}",
                      flush=True)


def floor_round(url: str, waves: int, concurrency: int) -> float:
    """P1's round shape with the bare ``http`` connection pool and nothing else (no engine, no
    middleware, no agents): ``concurrency`` slots each making ``waves`` calls one after another;
    wall seconds of the second such round (the first opens the connections)."""
    import asyncio

    from townsquare.plugins.llm.openai_http import HTTPPool

    body = {"model": "bench", "messages": [{"role": "user", "content": "You are Bo. Post: I write about mountain walks.\n"
                                                                       "Like or skip?"}], "max_tokens": 8}

    async def rounds() -> float:
        pool = HTTPPool(url, "", 0, concurrency, 60.0)

        async def slot() -> None:
            for _ in range(waves):
                await pool.send(body)

        try:
            walls = []
            for _ in range(2):
                started = time.perf_counter()
                await asyncio.gather(*(slot() for _ in range(concurrency)))
                walls.append(time.perf_counter() - started)
            return walls[-1]
        finally:
            await pool.aclose()

    return asyncio.run(rounds())


def floor(args: argparse.Namespace) -> None:
    latency = 0.1
    print(f"P1 floor: the same round shape with the bare http pool alone (no engine, no middleware), "
          f"{latency * 1000:g} ms endpoint; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"{'concurrency':>11}  {'calls':>6}  {'wall s':>7}  {'bound s':>7}  {'wall/bound':>10}")
    with fault_servers(1, latency * 1000) as servers:
        for concurrency in args.concurrency:
            wall = floor_round(servers[0].url, args.waves, concurrency)
            bound = args.waves * latency
            print(f"{concurrency:>11}  {args.waves * concurrency:>6}  {wall:>7.2f}  {bound:>7.2f}  {wall / bound:>10.3f}", flush=True)


def p2(args: argparse.Namespace) -> None:
    print(f"P2: one LLM call per agent-step, {args.p2_agents} agents, zero-latency endpoint(s) x {args.servers}, "
          f"target >= {P2_TARGET:g} agent-steps/s; transport {args.transport}; {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'backend':>10}  {'agent-steps':>11}  {'wall s':>7}  {'steps/s':>8}  {'of target':>9}  {'':13}  {CPU_HEAD}")
    with fault_servers(args.servers, 0.0) as servers:
        for backend in args.backend:
            calls, wall, spent = measure_round(servers, args.p2_agents, 64, backend, args.shards, args.sets)
            rate = args.p2_agents / wall
            print(f"{label(args, backend):>10}  {args.p2_agents:>11}  {wall:>7.2f}  {rate:>8.1f}  {rate / P2_TARGET:>9.2f}  "
                  f"({calls} calls)  {cpu_columns(spent, calls):>50}", flush=True)


def p5(args: argparse.Namespace) -> None:
    path = HERE / "population.py"
    if not path.is_file():
        print("P5: benchmarks/population.py is not here: nothing to run")
        return
    spec = importlib.util.spec_from_file_location("population", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(args.p5_args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p1", action="store_true")
    parser.add_argument("--p2", action="store_true")
    parser.add_argument("--p5", action="store_true")
    parser.add_argument("--floor", action="store_true", help="P1's round with the bare http pool alone: what the machine allows")
    parser.add_argument("--p5-args", nargs=argparse.REMAINDER, default=[], help="options for benchmarks/population.py")
    parser.add_argument("--backend", nargs="+", choices=["local", "ray"], default=["local", "ray"])
    parser.add_argument("--shards", type=int, default=None, help="Ray shards (default: one per CPU)")
    parser.add_argument("--servers", type=int, default=1, help="fault servers (endpoints), each its own process")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--waves", type=int, default=10, help="P1 calls per concurrency slot")
    parser.add_argument("--p2-agents", type=int, default=1000)
    parser.add_argument("--transport", choices=["http", "aiohttp", "sdk"], default="http", help="[llm] transport")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key")
    args = parser.parse_args()
    args.sets = [f'llm.transport="{args.transport}"', *args.set]
    if not (args.p1 or args.p2 or args.p5 or args.floor):
        args.p1 = args.p2 = True
    from townsquare.lib import logs

    logs.configure(level="error")
    started = time.perf_counter()
    uses_ray = "ray" in args.backend and (args.p1 or args.p2)
    if uses_ray:
        import ray

        ray.init(num_cpus=args.shards or os.cpu_count(), include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        if args.floor:
            floor(args)
        if args.p1:
            p1(args)
        if args.p2:
            p2(args)
        if args.p5:
            p5(args)
    finally:
        if uses_ray:
            ray.shutdown()
    print(f"({time.perf_counter() - started:.0f} s in all)")


if __name__ == "__main__":
    main()
