"""The groundedness metric: persona margin of posts, persona slope and AUC of likes."""

from __future__ import annotations

import asyncio
import json
import types

import numpy as np
import pytest

from helpers import read_table, scenario_text
from townsquare.plugins.report import groundedness
from townsquare.plugins.report.groundedness import (
    GroundednessMetric, auc, bin_of, histogram_auc, persona_margins, run_summary_line, slope, summary_line,
)


def unit(*rows):
    m = np.asarray(rows, dtype=np.float64)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_persona_margin_is_own_minus_mean_of_the_others():
    personas = unit([1, 0, 0], [0, 1, 0], [0, 0, 1])
    posts = unit([1, 1, 0], [0, 0, 1])
    own, others = persona_margins(posts, [0, 2], personas)
    h = 1 / np.sqrt(2)
    assert own == pytest.approx([h, 1.0])
    assert others == pytest.approx([(h + 0) / 2, 0.0])
    # a post written by "anyone": as close to every persona, margin 0
    own, others = persona_margins(unit([1, 1, 1]), [1], personas)
    assert own[0] - others[0] == pytest.approx(0.0)
    with pytest.raises(ValueError):
        persona_margins(posts, [0, 0], personas[:1])


def test_slope_and_auc_numbers():
    assert slope([0, 1, 2, 3], [0, 0, 1, 1]) == pytest.approx(0.4)  # least squares by hand: 2/5
    assert slope([0.2, 0.2], [0, 1]) is None  # no spread in x
    assert auc([0.3, 0.4], [0.1, 0.2]) == 1.0
    assert auc([0.1], [0.1, 0.3]) == pytest.approx(0.25)  # a tie counts half
    assert auc([0.5], []) is None
    rng = np.random.default_rng(0)
    pos, neg = rng.normal(0.2, 0.1, 300), rng.normal(0.1, 0.1, 500)
    hp, hn = np.bincount(bin_of(pos), minlength=groundedness.AUC_BINS), np.bincount(bin_of(neg), minlength=groundedness.AUC_BINS)
    assert histogram_auc(hp, hn) == pytest.approx(auc(pos, neg), abs=0.01)


class Embedder:
    """Words -> fixed axes, so similarities are known exactly."""

    AXES = {"hike": 0, "jazz": 1, "tax": 2}

    async def embed(self, texts):
        rows = [[sum(w.startswith(k) for w in t.lower().split()) + 1e-9 * (i == 3) for i, k in enumerate([*self.AXES, "pad"])]
                for t in texts]
        m = np.asarray(rows, dtype=np.float64)
        return m / np.linalg.norm(m, axis=1, keepdims=True)


class Platform:
    def __init__(self, posts):
        self.posts = posts

    async def get_post(self, post_id):
        author, text = self.posts[post_id]
        return types.SimpleNamespace(id=post_id, author_id=author, text=text)


def agent(agent_id, text):
    return types.SimpleNamespace(id=agent_id, persona=types.SimpleNamespace(text=text))


def test_metric_accumulates_over_rounds_and_round_trips():
    agents = [agent("a", "hike hike"), agent("b", "jazz"), agent("c", "tax")]
    platform = Platform({"p1": ("b", "hike trip"), "p2": ("c", "tax forms"), "p3": ("a", "hike")})
    metric = GroundednessMetric(Embedder())
    round0 = [
        {"agent_id": "a", "kind": "post", "ok": True, "text": "hike"},
        {"agent_id": "b", "kind": "post", "ok": True, "text": "tax"},  # b writes c's topic: margin -0.5
        {"agent_id": "a", "kind": "browse", "ok": True, "post_ids": ("p1", "p2", "p3")},  # p3 is a's own: left out
        {"agent_id": "a", "kind": "like", "ok": True, "target_post": "p1"},
    ]
    view = types.SimpleNamespace(round=0, now="", platform=platform, agents=agents, actions=round0)
    values = asyncio.run(metric.measure(view))
    assert values["posts.count"] == 2
    assert values["posts.own"] == pytest.approx((1 + 0) / 2)
    assert values["posts.others"] == pytest.approx((0 + 0.5) / 2)
    assert values["posts.margin"] == pytest.approx((1 - 0.5) / 2)
    assert values["likes.decisions"] == 2 and values["likes.rate"] == 0.5 and values["likes.by_similarity"] == 0
    assert values["likes.slope"] == pytest.approx(1.0)  # liked at cosine 1, passed at 0
    assert values["likes.auc"] == 1.0

    copy = GroundednessMetric(Embedder())
    copy.set_state(json.loads(json.dumps(metric.get_state())))
    round1 = [{"agent_id": "c", "kind": "browse", "ok": True, "post_ids": ("p1",), "detail": {"decided_by": {"like": "similarity"}}},
              {"agent_id": "c", "kind": "like", "ok": True, "target_post": "p1"}]  # c likes a hiking post: against its persona
    values = asyncio.run(copy.measure(types.SimpleNamespace(round=1, now="", platform=platform, agents=agents, actions=round1)))
    assert values["posts.count"] == 2 and values["likes.decisions"] == 3
    assert values["likes.auc"] == pytest.approx(0.75)  # liked at 1 and 0, passed at 0
    assert values["likes.by_similarity"] == pytest.approx(1 / 3)
    line = summary_line(values)
    assert line.startswith("groundedness: posts +0.250 cosine closer") and "likes (33% decided by the similarity rule): rate" in line and "AUC 0.75 (0.5" in line
    assert summary_line({}) is None


def test_a_baseline_run_is_grounded_by_construction(run_scenario, write_scenario):
    """The embedding baseline likes by a persona-similarity threshold and posts its persona's own
    sentences: AUC 1 and a positive margin, recorded every round and summarised in one line."""
    extra = "[plugins.embedding_baseline]\npost_probability = 1.0\nlike_threshold = 0.05\n"
    run_dir, summary = run_scenario(write_scenario(scenario_text(rounds=3, extra=extra)))
    rows = {(r, name): value for r, name, value in read_table(run_dir.path, "metrics") if name.startswith("groundedness.")}
    last = {name.removeprefix("groundedness."): v for (r, name), v in rows.items() if r == 2}
    assert last["posts.count"] == 9 and last["posts.margin"] > 0
    assert last["likes.auc"] == 1.0 and last["likes.slope"] > 0 and last["likes.by_similarity"] == 1.0
    assert "likes (decided by the similarity rule): rate +" in summary_line(last)
    assert (0, "groundedness.posts.count") in rows
    assert run_summary_line(run_dir.path) == summary_line(last)
    assert run_summary_line(run_dir.path / "nowhere") is None


def test_the_run_command_ends_with_the_groundedness_line(tmp_path):
    import subprocess
    import sys

    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=3, extra="[plugins.embedding_baseline]\npost_probability = 1.0\n"))
    out = subprocess.run([sys.executable, "-m", "townsquare.cli", "run", str(scenario), "--out", str(tmp_path / "run")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last == run_summary_line(tmp_path / "run") and last.startswith("groundedness: posts +")
