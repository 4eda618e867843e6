"""LLM throughput beside OASIS: one LLM call per agent-step, 1,000 agents, the same loopback stub.

Both frameworks talk to the same zero-latency OpenAI-compatible stub
(``townsquare.testing.fault_server`` without faults, in a process of its own), so what is
measured is each framework's own cost per agent-step around one LLM call:

* **townsquare**: ``benchmarks/scale.py``'s P2 round (a real run: readers with the test-only
  ``scripted_feed`` policy, a 1-post feed and one like/skip decision each through the ``openai``
  provider and the whole middleware chain: cache journal, budget, retries, concurrency limit,
  accounting, the ``llm_calls`` table); round 2 is measured, agent-steps = readers.
* **OASIS** (camel-oasis, Yang et al. 2024): ``OasisEnv.step`` with an ``LLMAction`` for every
  agent on its Reddit platform (its Twitter recommender downloads a model), the agents' camel
  model an ``openai-compatible-model`` at the stub; a warm-up step, then a measured one. Each
  agent-step is one chat completion with the agent's actions as tools (the stub answers in
  text, so no tool is called); the stub's request count says how many calls each step made.
  ``--oasis-actions`` picks which actions an agent is offered, each measured as a side of its
  own: ``all`` (``SocialAgent``'s default, every action), ``reddit`` (OASIS's default Reddit set,
  ``ActionType.get_default_reddit_actions()``) and ``like`` (like a post or do nothing: the
  decision townsquare's readers make).

Both sides get the same concurrency (``--concurrency``, 64 by default: at most that many calls
in flight; OASIS's own default is 128) and are run ``--repeats`` times, alternating. The ratio
is townsquare's agent-steps per second over OASIS's.

OASIS is not a dependency of townsquare and is never installed into its environment: install it
into a virtual environment of its own (Python 3.10 or 3.11) and name its interpreter::

    python3.11 -m venv /tmp/oasis-venv
    /tmp/oasis-venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu   # or a local CPU wheel
    /tmp/oasis-venv/bin/pip install camel-oasis==0.2.5 "mcp<2"   # camel-ai 0.2.78 imports mcp.server.FastMCP, gone in mcp 2
    python benchmarks/oasis_comparison.py --oasis-python /tmp/oasis-venv/bin/python [--agents 1000] [--repeats 2]

(``camel-oasis`` pulls ``sentence-transformers`` and with it ``torch``; a CPU build is enough:
nothing here runs a model.) ``--oasis-side URL`` is the OASIS half, run by that interpreter in a
temporary folder (OASIS writes ``./log`` where it is imported); it imports nothing of townsquare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve()


# --------------------------------------------------------------------------- the OASIS half


#: the actions each OASIS agent is offered (``--oasis-actions``): ``all`` is ``SocialAgent``'s
#: default (every action), ``reddit`` OASIS's default Reddit set, ``like`` a like/skip decision
#: as townsquare's readers make (like, or do nothing)
OASIS_ACTIONS = ("all", "reddit", "like")


def oasis_side(url: str, agents: int, concurrency: int, actions: str = "all") -> dict:
    """One OASIS run in this process (OASIS's interpreter): a warm-up step of every agent, then
    a measured one; seconds of the measured step and the stub's requests during it."""
    import asyncio

    from camel.models import ModelFactory
    from camel.types import ModelPlatformType
    from camel.utils import BaseTokenCounter

    import oasis
    from oasis import ActionType, AgentGraph, LLMAction, SocialAgent, UserInfo

    class ApproximateTokens(BaseTokenCounter):
        """Four characters a token: camel's default counter loads tiktoken's tables from the internet."""

        def count_tokens_from_messages(self, messages) -> int:
            return sum(len(str(m.get("content") or "")) for m in messages) // 4 + 1

        def encode(self, text: str) -> list[int]:
            return list(range(len(text) // 4 + 1))

        def decode(self, token_ids: list[int]) -> str:
            return ""

    model = ModelFactory.create(model_platform=ModelPlatformType.OPENAI_COMPATIBLE_MODEL, model_type="bench",
                                url=url, api_key="bench", token_counter=ApproximateTokens())
    offered = {"all": None, "reddit": ActionType.get_default_reddit_actions(),
               "like": [ActionType.LIKE_POST, ActionType.DO_NOTHING]}[actions]
    graph = AgentGraph()
    names = ("Bo", "Cy", "Di")
    bios = ("I play jazz piano at night.", "I follow football every weekend.", "Mountains and hiking relax me.")
    for i in range(agents):
        profile = {"nodes": [], "edges": [], "other_info": {"user_profile": bios[i % 3], "mbti": "INTJ",
                                                              "gender": "female", "age": 30, "country": "UK"}}
        info = UserInfo(name=f"{names[i % 3]}{i}", description=bios[i % 3], profile=profile, recsys_type="reddit")
        graph.add_agent(SocialAgent(agent_id=i, user_info=info, agent_graph=graph, model=model, available_actions=offered))

    def requests() -> int:
        with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/stats") as answer:
            counts = json.load(answer)
        return int(counts.get("requests", 0))

    async def run() -> dict:
        env = oasis.make(agent_graph=graph, platform=oasis.DefaultPlatformType.REDDIT, database_path="oasis.db",
                         semaphore=concurrency)
        await env.reset()
        every = {agent: LLMAction() for _, agent in env.agent_graph.get_agents()}
        await env.step(every)  # warm-up: connections, the first posts
        before = requests()
        started = time.perf_counter()
        await env.step(every)
        wall = time.perf_counter() - started
        calls = requests() - before
        await env.close()
        return {"agents": agents, "wall": wall, "calls": calls}

    return asyncio.run(run())


# --------------------------------------------------------------------------- the comparison


def townsquare_side(server, agents: int, concurrency: int) -> dict:
    sys.path.insert(0, str(HERE.parent))
    import scale  # benchmarks/scale.py: the P2 round

    calls, wall, _ = scale.measure_round([server], agents, concurrency, "local", None, ['llm.transport="http"'])
    return {"agents": agents, "wall": wall, "calls": calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oasis-python", type=Path, help="the interpreter of a virtual environment with camel-oasis")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each side, alternating")
    parser.add_argument("--oasis-actions", nargs="+", choices=OASIS_ACTIONS, default=list(OASIS_ACTIONS),
                        help="what each OASIS agent may do: all (its default), reddit (its Reddit set), like (like or nothing)")
    parser.add_argument("--oasis-side", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.oasis_side:
        print(json.dumps(oasis_side(args.oasis_side, args.agents, args.concurrency, args.oasis_actions[0])))
        return
    if args.oasis_python is None or not args.oasis_python.is_file():
        raise SystemExit("benchmarks/oasis_comparison.py: --oasis-python must name the Python of an environment with camel-oasis "
                         "(see this file's docstring)")
    sys.path.insert(0, str(HERE.parent))
    import scale
    from townsquare.lib import logs

    logs.configure(level="error")
    print(f"one LLM call per agent-step, {args.agents} agents, concurrency {args.concurrency}, zero-latency stub "
          f"(townsquare.testing.fault_server); {os.cpu_count()} cores, load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    print(f"{'run':>3}  {'framework':<17}  {'agent-steps':>11}  {'LLM calls':>9}  {'wall s':>7}  {'steps/s':>8}  {'load':>5}")
    oasis = {f"OASIS ({actions})": actions for actions in args.oasis_actions}
    rates: dict[str, list[float]] = {"townsquare": [], **{name: [] for name in oasis}}
    with scale.fault_servers(1, 0.0) as servers, tempfile.TemporaryDirectory() as folder:
        server = servers[0]
        for k in range(args.repeats):
            sides = ["townsquare", *oasis]
            for side in (sides if k % 2 == 0 else sides[::-1]):
                load = os.getloadavg()[0]
                if side == "townsquare":
                    result = townsquare_side(server, args.agents, args.concurrency)
                else:
                    done = subprocess.run([str(args.oasis_python), str(HERE), "--oasis-side", server.url, "--agents",
                                           str(args.agents), "--concurrency", str(args.concurrency), "--oasis-actions",
                                           oasis[side]], cwd=folder, capture_output=True, text=True)
                    if done.returncode != 0:
                        raise SystemExit(f"the OASIS run failed ({done.returncode}):\n{done.stderr[-3000:]}")
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                rate = result["agents"] / result["wall"]
                rates[side].append(rate)
                print(f"{k + 1:>3}  {side:<17}  {result['agents']:>11}  {result['calls']:>9}  {result['wall']:>7.2f}  "
                      f"{rate:>8.1f}  {load:>5.1f}", flush=True)
    ts = statistics.median(rates["townsquare"])
    for name in oasis:
        oa = statistics.median(rates[name])
        runs = ", ".join(f"{t / o:.1f}x" for t, o in zip(rates["townsquare"], rates[name]))
        print(f"townsquare / {name}: {ts / oa:.1f}x (medians {ts:,.0f} and {oa:,.1f} agent-steps/s; per run {runs})")
    print(f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
