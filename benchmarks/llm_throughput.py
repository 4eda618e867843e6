"""LLM throughput: calls per second through the real openai path against a slow endpoint.

The fault server (``townsquare.testing.fault_server``, in its own process, so on its own
core) answers after ``--latency-ms`` (100 ms) with no faults. The chain is the one a run
builds: the ``openai`` provider on each ``--transport`` (``aiohttp``, ``sdk``), then cache
(writing its sqlite journal), budget, retries and the concurrency limit, with the kernel's
accounting innermost. ``C`` workers, like ``C``
agents, each send like/skip decisions one after another (``LLMClient.choose``), ``C x
--calls-per-worker`` in all, after an untimed warm-up call each.

With ``C`` calls in flight and a latency of ``L`` seconds no client can beat ``C / L`` calls
per second; the table prints that bound, the share of it achieved, the client's CPU time per
call (one core sustains ``1000 / that`` calls per second, whatever else the machine runs) and
the test server's (Linux only: read from ``/proc``).
Target: >= 0.9 of the bound at ``C = 64``. Usage: ``python benchmarks/llm_throughput.py [--concurrency 16 64 256] [--transport aiohttp sdk]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time

TARGET = 0.9


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) process ``pid`` has used so far; None where ``/proc`` is not."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench(base_url: str, concurrency: int, per_worker: int, run_dir: str, transport: str) -> tuple[int, float, float]:
    from townsquare.plugins.llm.llm_budget import BudgetConfig, LLMBudget
    from townsquare.plugins.llm.llm_cache import CacheConfig, LLMCache
    from townsquare.plugins.llm.llm_concurrency import ConcurrencyConfig, LLMConcurrency
    from townsquare.plugins.llm.openai import OpenAIConfig, OpenAIProvider
    from townsquare.plugins.llm.llm_retry import LLMRetry, RetryConfig
    from townsquare.testing.llm_chain import build_chain, build_context

    ctx = build_context(run_dir, concurrency=concurrency)
    provider = OpenAIProvider(OpenAIConfig(base_url=base_url, model="bench", api_key_env="", transport=transport), ctx)
    middleware = [LLMCache(CacheConfig(), ctx), LLMBudget(BudgetConfig(), ctx), LLMRetry(RetryConfig(), ctx),
                  LLMConcurrency(ConcurrencyConfig(limit=concurrency), ctx)]
    chain = build_chain(provider, middleware, agent_id=None)

    async def worker(w: int, calls: range) -> None:
        llm = chain.client.for_agent(f"agent-{w:04d}")
        for i in calls:
            await llm.choose(f"You are agent {w}. Post {i}: a walk in the hills today.\nLike or skip?", ["like", "skip"],
                             purpose="like", default="skip")

    try:
        await asyncio.gather(*(worker(w, range(-1, 0)) for w in range(concurrency)))  # warm-up: open the connections
        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(w, range(per_worker)) for w in range(concurrency)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        for link in middleware:
            close = getattr(link, "aclose", None)
            if close is not None:
                await close()
        await provider.aclose()
    failed = sum(r.status != "ok" for r in chain.records)
    if failed:
        raise SystemExit(f"{failed} calls did not succeed: not a throughput measurement")
    return concurrency * per_worker, elapsed, cpu


async def bench_sdk(base_url: str, concurrency: int, per_worker: int) -> tuple[int, float, float]:
    """The same workload with the bare SDK (``chat.completions.create``, one pool of ``C``)."""
    import openai

    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=concurrency, max_keepalive_connections=concurrency)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0,
                                http_client=openai.DefaultAsyncHttpxClient(limits=limits))

    async def worker(w: int, calls: range) -> None:
        for i in calls:
            await client.chat.completions.create(model="bench", max_tokens=8, messages=[
                {"role": "user", "content": f"You are agent {w}. Post {i}: a walk in the hills today.\nLike or skip?"}])

    try:
        await asyncio.gather(*(worker(w, range(-1, 0)) for w in range(concurrency)))
        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(w, range(per_worker)) for w in range(concurrency)))
        return concurrency * per_worker, time.perf_counter() - start, time.process_time() - cpu
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--calls-per-worker", type=int, default=40)
    parser.add_argument("--transport", nargs="+", choices=["aiohttp", "http", "sdk"], default=["aiohttp", "http", "sdk"])
    parser.add_argument("--sdk-baseline", action="store_true", help="Also time the bare SDK on the same workload.")
    args = parser.parse_args()
    from townsquare.lib import logs

    logs.configure(level="warning")

    server = subprocess.Popen([sys.executable, "-m", "townsquare.testing.fault_server", "--port", "0",
                               "--latency-ms", str(args.latency_ms)], stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        latency = args.latency_ms / 1000
        print(f"openai provider + cache, budget, retry, concurrency, accounting -> fault server at {args.latency_ms:g} ms; "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
        print(f"{'transport':>9}  {'concurrency':>11}  {'calls':>6}  {'seconds':>7}  {'calls/s':>8}  {'bound/s':>8}  "
              f"{'of bound':>8}  {'client CPU ms/call':>18}  {'server CPU ms/call':>18}")
        for concurrency in args.concurrency:
            bound = concurrency / latency
            for transport in args.transport:
                before = cpu_seconds(server.pid)
                with tempfile.TemporaryDirectory() as run_dir:
                    calls, elapsed, cpu = asyncio.run(bench(base_url, concurrency, args.calls_per_worker, run_dir, transport))
                after = cpu_seconds(server.pid)
                served = "-" if before is None or after is None else f"{(after - before) / calls * 1000:.2f}"
                rate = calls / elapsed
                mark = "" if concurrency != 64 else ("  (target >= 0.90: met)" if rate / bound >= TARGET else "  (target >= 0.90: MISSED)")
                print(f"{transport:>9}  {concurrency:>11}  {calls:>6}  {elapsed:>7.2f}  {rate:>8.1f}  {bound:>8.1f}  "
                      f"{rate / bound:>8.2f}  {cpu / calls * 1000:>18.2f}  {served:>18}{mark}", flush=True)
            if args.sdk_baseline:
                calls, elapsed, cpu = asyncio.run(bench_sdk(base_url, concurrency, args.calls_per_worker))
                print(f"{'bare SDK':>9}  {concurrency:>11}  {calls:>6}  {elapsed:>7.2f}  {calls / elapsed:>8.1f}  {bound:>8.1f}  "
                      f"{calls / elapsed / bound:>8.2f}  {cpu / calls * 1000:>18.2f}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
