"""How many shard cores an LLM-bound round needs: the model behind docs/scale.md's projection
of P1 onto a cluster.

A round of ``W`` waves at concurrency ``C`` against an endpoint of latency ``L`` (``C`` calls
in flight, each slot making ``W`` calls one after another) takes at least ``W x L``: the bound.
With the agents on ``k`` shards, each with a core of its own, and the driver on a core of its
own, it takes about

    T(k) = W (L + q) + (C / k) c_shard + W C a + H

* ``c_shard``: a shard's CPU per call. A wave's answers come back together and the shard
  handles them one after another (finish the turn, start the next, send its call), so its
  last call of a wave leaves ``(C / k) c_shard`` after its first: the train. Taken here as
  everything a shard spends per call (turns, LLM client, drains, its replay of the writes),
  an upper bound of the part on the round's path.
* ``q``: a call's wait in the client's and the endpoint's queues, per wave.
* ``a``: the driver's apply per call, after the last answer (no write may land before the last
  turn ends).
* ``H``: the hand-overs through Ray's object store after the turns (the moves to every shard,
  the answers back to the driver).

Each part's load is calls per second, ``C / L``, times its CPU per call: the shards together
need ``C c_shard / L`` cores or they are CPU-bound, and the driver ``C c_driver / L`` of one.
The shard cores a target ``rho`` (``T <= rho W L``) needs:

    k >= C c_shard / (rho W L - W (L + q) - W C a - H)

and none does when the fixed parts (queues, apply, hand-overs) alone use the slack.
:data:`MEASURED` holds the inputs as measured on the development machine (see docs/scale.md
for the commands and the date); ``tests/scaleout/test_scale_model.py`` checks them and the arithmetic.
Usage: ``python benchmarks/scale_model.py [--concurrency 256] [--waves 10] [--target 1.10]``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Inputs:
    """The model's inputs, in seconds (per call, per wave or per round)."""

    #: a shard's CPU per LLM call (turns, client, drains, replay)
    shard_cpu: float
    #: the driver's CPU per LLM call (taking in records, the journal, applying, the store)
    driver_cpu: float
    #: Ray's own processes' CPU per LLM call (raylet, GCS, object store)
    ray_cpu: float
    #: the test endpoint's CPU per LLM call (not part of the cluster)
    server_cpu: float
    #: a call's wait in the queues, per wave
    queue: float
    #: the driver's apply per LLM call, after the round's last answer
    apply: float
    #: the hand-overs after the turns, per round
    handovers: float


#: measured on the development machine (2 cores shared with other work, P1 at 256 on 2 Ray
#: shards; docs/scale.md, "P1 on a cluster": commands and date)
MEASURED = Inputs(shard_cpu=0.00029, driver_cpu=0.00004, ray_cpu=0.00002, server_cpu=0.00015,
                  queue=0.003, apply=0.000008, handovers=0.10)


def round_seconds(concurrency: int, waves: int, latency: float, shards: int, inputs: Inputs) -> float:
    """T(k): a round's wall time on ``shards`` shards, each with a core of its own."""
    return (waves * (latency + inputs.queue) + concurrency / shards * inputs.shard_cpu
            + waves * concurrency * inputs.apply + inputs.handovers)


def shard_cores(concurrency: int, waves: int, latency: float, target: float, inputs: Inputs) -> int | None:
    """The fewest shards (a core each) that keep a round within ``target`` x its bound and the
    shards under a full core each; None when no number of shards does (the fixed parts use
    the slack)."""
    slack = (target - 1) * waves * latency - waves * inputs.queue - waves * concurrency * inputs.apply - inputs.handovers
    if slack <= 0:
        return None
    busy = concurrency * inputs.shard_cpu / latency  # cores the shards need at C / L calls a second
    return max(1, math.ceil(concurrency * inputs.shard_cpu / slack), math.ceil(busy))


def cores(concurrency: int, latency: float, inputs: Inputs) -> dict[str, float]:
    """Each part's load in cores: calls per second times its CPU per call."""
    rate = concurrency / latency
    return {"shards": rate * inputs.shard_cpu, "driver": rate * inputs.driver_cpu, "ray": rate * inputs.ray_cpu,
            "endpoint": rate * inputs.server_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--waves", type=int, nargs="+", default=[10, 40])
    parser.add_argument("--latency", type=float, default=0.1, help="the endpoint's latency, seconds")
    parser.add_argument("--target", type=float, default=1.10)
    parser.add_argument("--handovers", type=float, nargs="+", default=None,
                        help="the hand-overs per round, seconds (default: the measured one)")
    args = parser.parse_args()
    print(f"{'C':>5}  {'waves':>5}  {'H ms':>5}  {'shard cores':>11}  {'round/bound':>11}  cores busy: shards / driver / ray")
    for handovers in args.handovers or [MEASURED.handovers]:
        inputs = Inputs(**{**MEASURED.__dict__, "handovers": handovers})
        for concurrency in args.concurrency:
            for waves in args.waves:
                k = shard_cores(concurrency, waves, args.latency, args.target, inputs)
                ratio = round_seconds(concurrency, waves, args.latency, k, inputs) / (waves * args.latency) if k else math.nan
                busy = cores(concurrency, args.latency, inputs)
                print(f"{concurrency:>5}  {waves:>5}  {handovers * 1000:>5.0f}  {k if k else 'none':>11}  {ratio:>11.3f}  "
                      f"{busy['shards']:.2f} / {busy['driver']:.2f} / {busy['ray']:.2f}")


if __name__ == "__main__":
    main()
