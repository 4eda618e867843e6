"""Memory budgets of Park et al.'s stream: storage, retrieval and prompt size.

1. ``remember``: one record stored (id, times, importance given, the embedding a cache hit, so
   the embedder is excluded), in µs. Budget: <= 50 µs.
2. Top-10 retrieval at 10,000 records with Park's score (recency, importance, relevance, each
   min-max normalised), the query already embedded, in ms. Budget: <= 1 ms.
3. Bytes per record in memory at 10,000 records (record objects, texts, the numpy arrays with
   their growth slack), by tracemalloc. Budget: <= 2 KB.
4. Prompt size: a 200-round run of ``examples/generative_agents_social.toml`` with the scripted
   test model: mean input tokens per LLM call in round 5 and in the last round (199, the 200th).
   Budget: last <= 1.1 x round 5, and <= 1,500.

Figures and ratios are printed; nothing is asserted (tests never assert times).
Usage: ``python benchmarks/memory.py [--records 10000] [--rounds 200] [--dim 256]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2024, 3, 4, 8, 0)


def _stream_and_ctx(dim: int, texts: list[str]):
    from townsquare.api import EmbeddingCache, Persona
    from townsquare.plugins.generative_agents.memory.memory_stream import MemoryStream, MemoryStreamConfig
    from townsquare.plugins.generative_agents.memory.park_retrieval import ParkRetrieval

    class TableEmbedder:
        name = "table"

        def __init__(self):
            self.dim = dim
            self.rng = np.random.default_rng(0)

        async def embed(self, batch):
            vectors = self.rng.standard_normal((len(batch), dim)).astype(np.float32)
            return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    embedder = EmbeddingCache(TableEmbedder())
    asyncio.run(embedder.embed(texts))  # warm: remember then finds every vector cached
    agent = SimpleNamespace(id="a0", persona=Persona("Ada", ["I bake."]), components={"memory.retrieval": ParkRetrieval()})
    ctx = SimpleNamespace(agent=agent, now=T0, llm=None, embedder=embedder)
    return MemoryStream(MemoryStreamConfig(seed_memories=False)), ctx


def storage(records: int, dim: int) -> tuple[float, float, float]:
    """(µs per remember, ms per top-10, bytes per record)."""
    from townsquare.api import MemoryRecord

    texts = [f"Observation {i}: someone posted about topic {i % 977} at the market" for i in range(records)]
    stream, ctx = _stream_and_ctx(dim, texts)
    fresh = [MemoryRecord(text, kind="observation", importance=float(1 + i % 10)) for i, text in enumerate(texts)]

    async def fill() -> float:
        start = time.perf_counter()
        for i, record in enumerate(fresh):
            ctx.now = T0 + timedelta(minutes=i)
            await stream.remember(ctx, [record])
        return time.perf_counter() - start

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    seconds = asyncio.run(fill())
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # the texts were allocated before the stream saw them: count them as the stream's
    used += sum(sys.getsizeof(t) for t in texts)
    # time remember again without tracemalloc's overhead
    stream2, ctx2 = _stream_and_ctx(dim, texts)
    stream, ctx = stream2, ctx2
    fresh = [MemoryRecord(text, kind="observation", importance=float(1 + i % 10)) for i, text in enumerate(texts)]
    seconds = asyncio.run(fill())

    query = np.asarray(asyncio.run(ctx.embedder.embed_one(texts[0])))
    now = T0 + timedelta(minutes=records + 60)
    repeats = 200
    start = time.perf_counter()
    for _ in range(repeats):
        stream.top(ctx.agent, query, 10, now)
    top_ms = (time.perf_counter() - start) / repeats * 1000
    matrix = stream._vectors[:records]
    start = time.perf_counter()
    for _ in range(repeats):
        matrix @ query
    product_ms = (time.perf_counter() - start) / repeats * 1000
    return seconds / records * 1e6, top_ms, product_ms, used / records


def prompt_size(rounds: int) -> dict[str, object]:
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.runner import start_run

    text = (ROOT / "examples" / "generative_agents_social.toml").read_text()
    text = text.replace('path = "personas.jsonl"', f'path = "{ROOT / "examples" / "personas.jsonl"}"')
    text = text.replace("rounds = 8", f"rounds = {rounds}")
    text += """
[engine]
checkpoint_every = 50
[llm]
name = "scripted"
[plugins.scripted]
rules = { "most salient high-level questions" = "1. What do I enjoy?\\n2. Who do I talk to?\\n3. What worries me?", "high-level insights can you infer" = "1. I enjoy cooking for others (because of 1, 2)\\n2. I talk about music (because of 3)\\n3. I worry about work (because of 2, 4)" }
"""
    plugins = make_plugin_manager(enable=["townsquare.testing.scripted"], autoload=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.toml"
        path.write_text(text)
        start = time.perf_counter()
        run_dir, _ = start_run(path, plugins=plugins, out=Path(tmp) / "run")
        wall = time.perf_counter() - start
        db = sqlite3.connect(run_dir.events_path)
        per_round = dict(db.execute("SELECT round, AVG(prompt_tokens) FROM llm_calls GROUP BY round").fetchall())
        mix = {r: {p: (n, mean) for p, n, mean in db.execute(
            "SELECT purpose, COUNT(*), AVG(prompt_tokens) FROM llm_calls WHERE round = ? GROUP BY purpose", (r,))}
            for r in (5, rounds - 1)}
        most = db.execute("SELECT MAX(prompt_tokens) FROM llm_calls").fetchone()[0]
        purposes = db.execute(
            "SELECT purpose, AVG(CASE WHEN round <= 10 THEN prompt_tokens END), AVG(CASE WHEN round >= ? THEN prompt_tokens END), "
            "MAX(prompt_tokens) FROM llm_calls GROUP BY purpose ORDER BY purpose", (rounds - 10,)).fetchall()
        calls = db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
        _, state = run_dir.latest_checkpoint()
        db.close()
    memories = [len(saved["components"]["memory.stream"]["records"]) for saved in state["agents"].values()]
    return {"per_round": per_round, "purposes": purposes, "calls": calls, "wall": wall, "memories": memories,
            "mix": mix, "max": most}


def same_mix_ratio(mix: dict, early_round: int, late_round: int) -> float:
    """Late over early mean tokens per call, weighting both by the early round's mix of call
    purposes (the raw means also move when the mix moves: cached importance ratings, say)."""
    early, late = mix[early_round], mix[late_round]
    shared = [p for p in early if p in late]
    calls = sum(early[p][0] for p in shared)
    if not calls:
        return float("nan")
    return sum(early[p][0] * late[p][1] for p in shared) / sum(early[p][0] * early[p][1] for p in shared)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--dim", type=int, default=256, help="embedding size (the hash embedder's default: 256)")
    args = parser.parse_args()
    from townsquare.lib import logs

    logs.configure(level="warning")

    remember_us, top_ms, product_ms, per_record = storage(args.records, args.dim)
    print(f"remember one record      {remember_us:8.1f} µs   budget 50 µs   ratio {remember_us / 50:.2f}")
    print(f"top-10 of {args.records:>6} records {top_ms:8.3f} ms   budget 1 ms    ratio {top_ms / 1:.2f}")
    print(f"  of which the bare matrix-vector product {product_ms:.3f} ms (scoring and picking: "
          f"{top_ms / product_ms:.2f}x it; on a busy machine both grow)")
    print(f"memory per record        {per_record:8.0f} B    budget 2048 B  ratio {per_record / 2048:.2f}  (dim {args.dim})")

    result = prompt_size(args.rounds)
    per_round = result["per_round"]
    last = args.rounds - 1
    early, late = per_round.get(5, 0.0), per_round.get(last, 0.0)
    ratio = late / early if early else float("nan")
    print(f"prompt tokens per call   round 5: {early:.0f}   round {last + 1}: {late:.0f}   ratio {ratio:.2f} "
          f"(budget <= 1.1 and <= 1500)")
    print(f"  same mix of call purposes as round 5: ratio {same_mix_ratio(result['mix'], 5, last):.2f}; "
          f"largest prompt of the run: {result['max']} tokens")
    for r in (5, last):
        print(f"  round {r + 1 if r == last else r}: " + ", ".join(f"{p} {n} x {m:.0f}" for p, (n, m) in sorted(result["mix"][r].items())))
    print(f"  run: {result['calls']} LLM calls in {result['wall']:.1f} s; memories per agent at the end: {result['memories']}")
    print(f"  {'purpose':<28} {'rounds 0-10':>12} {'last 10':>10} {'max':>6}")
    for purpose, first, final, most in result["purposes"]:
        print(f"  {purpose:<28} {first or 0:>12.0f} {final or 0:>10.0f} {most:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
