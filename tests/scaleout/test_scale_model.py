"""The model of how many shard cores an LLM-bound round needs (``benchmarks/scale_model.py``,
docs/scale.md "P1 on a cluster"): its arithmetic, and the inputs docs/scale.md states are the
ones it uses. What a real round on Ray gives the model's shape (one driver record per call, a
fixed number of hand-overs a round) is checked in ``test_ray_backend.py``."""

from __future__ import annotations

import dataclasses
import re
import sys

import pytest

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import scale_model  # noqa: E402

INPUTS = scale_model.Inputs(shard_cpu=0.0002, driver_cpu=0.0001, ray_cpu=0.00002, server_cpu=0.0002, queue=0.003,
                            apply=0.00001, handovers=0.01)


def test_the_fewest_shards_that_keep_a_round_within_its_target():
    # at 256 in flight, 10 waves of 100 ms: slack 0.1 x 1 s - 10 x 3 ms queues - 2,560 x 10 us apply
    # - 10 ms hand-overs = 34.4 ms; the train is 256 x 0.2 ms = 51.2 ms on one shard, 25.6 on two
    assert scale_model.shard_cores(256, 10, 0.1, 1.10, INPUTS) == 2
    assert scale_model.round_seconds(256, 10, 0.1, 2, INPUTS) / 1.0 <= 1.10 < scale_model.round_seconds(256, 10, 0.1, 1, INPUTS)
    assert scale_model.round_seconds(256, 10, 0.1, 2, INPUTS) == pytest.approx(1.0 + 0.03 + 0.0256 + 0.0256 + 0.01)
    # 40 waves: four times the slack and the same train: one shard does
    assert scale_model.shard_cores(256, 40, 0.1, 1.10, INPUTS) == 1
    # the hand-overs alone use a 10-wave round's slack: no number of shards reaches 1.10
    assert scale_model.shard_cores(256, 10, 0.1, 1.10, dataclasses.replace(INPUTS, handovers=0.1)) is None
    # the driver's apply after the last answer grows with the round's calls: at 4,096 in flight
    # 40 waves are 1.6 s of it, more than the 0.4 s of slack
    assert scale_model.shard_cores(4096, 40, 0.1, 1.10, INPUTS) is None
    # and the shards must not be CPU-bound: 40,960 calls a second at 0.2 ms a call are 8.2
    # cores, more than the train alone asks for (4)
    assert scale_model.shard_cores(4096, 40, 0.1, 1.10, dataclasses.replace(INPUTS, apply=0.0)) == 9


def test_each_part_s_load_is_calls_per_second_times_its_cpu_per_call():
    assert scale_model.cores(256, 0.1, INPUTS) == pytest.approx({"shards": 0.512, "driver": 0.256, "ray": 0.0512, "endpoint": 0.512})


def test_docs_state_the_measured_inputs_the_model_uses():
    """docs/scale.md's table of the model's inputs (in ms) equals ``scale_model.MEASURED``."""
    text = (ROOT / "docs" / "scale.md").read_text(encoding="utf-8")
    stated = {name: float(value) for name, value in re.findall(r"^\| `(\w+)` \| ([0-9.]+) ms \|", text, re.M)}
    assert stated == {name: pytest.approx(value * 1000) for name, value in dataclasses.asdict(scale_model.MEASURED).items()}
