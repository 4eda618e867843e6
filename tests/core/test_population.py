"""P5's batch path: the embedding baseline decided for a whole round at once gives the event log
the per-agent path gives, and a resumed batch run equals an uninterrupted one."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT, read_table
from townsquare.actions import Action
from townsquare.errors import RunStopped
from townsquare.platforms.in_memory import InMemoryConfig, InMemoryPlatform
from townsquare.plugins.baselines.embedding_baseline import cosines
from townsquare.recommenders.random import build_random_feed
from townsquare.launch.runner import resume_run, start_run

BASELINE = ROOT / "examples" / "baseline.toml"
#: every table of the trace; ``rounds.wall_seconds`` is wall-clock time and is left out
TABLES = ("agents", "posts", "actions", "follows", "llm_calls", "metrics")

# Three populations: "a" and "c" (other settings) decide in one batch, "b" (batch = false for it
# alone) turn by turn; b's feeds show only a's posts for two rounds; a random recommender draws
# from each reader's generator inside the feed read.
MIXED = """
name = "mixed"
seed = 5
rounds = {rounds}
[activity]
model = "pareto"
alpha = 2.0
x_min = 6.0
[platform]
name = "in_memory"
home_source = "{home_source}"
[recommender]
name = "random"
[plugins.embedding_baseline]
batch = {batch}
post_probability = 0.5
[[populations]]
name = "a"
count = 30
personas = {{ name = "jsonl", path = "{personas}" }}
slots = {{ policy = "embedding_baseline" }}
[[populations]]
name = "b"
count = 20
personas = {{ name = "jsonl", path = "{personas}" }}
slots = {{ policy = "embedding_baseline" }}
config = {{ embedding_baseline = {{ batch = false }} }}
feed_stages = [{{ start_round = 0, end_round = 2, authors = ["a"] }}]
[[populations]]
name = "c"
count = 15
personas = {{ name = "jsonl", path = "{personas}" }}
slots = {{ policy = "embedding_baseline" }}
config = {{ embedding_baseline = {{ feed_size = 4, like_threshold = 0.05, posts_per_step = 2 }} }}
"""


def trace(run_dir: Path) -> dict[str, list[tuple]]:
    tables = {table: read_table(run_dir, table) for table in TABLES}
    tables["rounds"] = [row[:-1] for row in read_table(run_dir, "rounds")]  # without wall_seconds
    return tables


def last_checkpoint(run_dir: Path) -> dict:
    path = sorted((run_dir / "checkpoints").glob("round-*.json.gz"))[-1]
    return json.loads(gzip.decompress(path.read_bytes()))


def run_baseline(tmp_path: Path, name: str, batch: bool, *overrides: str) -> Path:
    run_dir, summary = start_run(BASELINE, out=tmp_path / name, overrides=[
        "populations.0.count=60", "rounds=8", f"plugins.embedding_baseline.batch={str(batch).lower()}", *overrides])
    assert summary.stopped is None and summary.rounds_completed == 8
    return run_dir.path


def test_batch_path_gives_the_per_agent_event_log_byte_for_byte(tmp_path):
    batched = run_baseline(tmp_path, "batch", True)
    alone = run_baseline(tmp_path, "alone", False)
    one, other = trace(batched), trace(alone)
    assert len(one["actions"]) > 200 and {row[4] for row in one["actions"]} >= {"browse", "like", "reblog", "follow", "post"}
    assert one == other
    assert last_checkpoint(batched) == last_checkpoint(alone)


@pytest.mark.parametrize("home_source", ["all", "following"])
def test_batch_and_per_agent_populations_mix_with_feed_stages_and_a_random_recommender(tmp_path, home_source):
    personas = ROOT / "examples" / "personas.jsonl"
    runs = {}
    for batch in ("true", "false"):
        path = tmp_path / f"{batch}.toml"
        path.write_text(MIXED.format(rounds=6, batch=batch, home_source=home_source, personas=personas), encoding="utf-8")
        run_dir, summary = start_run(path, out=tmp_path / f"run-{batch}")
        assert summary.stopped is None
        runs[batch] = run_dir.path
    one, other = trace(runs["true"]), trace(runs["false"])
    assert len(one["actions"]) > 40
    assert one == other


def test_a_batch_run_stopped_and_resumed_equals_an_uninterrupted_one(tmp_path):
    whole = run_baseline(tmp_path, "whole", True)

    def stop_after_round_3(round, totals):
        if round == 3:
            raise RunStopped("test stop")

    run_dir, summary = start_run(BASELINE, out=tmp_path / "stopped", progress=stop_after_round_3, overrides=[
        "populations.0.count=60", "rounds=8", "plugins.embedding_baseline.batch=true"])
    assert summary.stopped == "test stop" and summary.rounds_completed < 8
    _, summary = resume_run(run_dir.path)
    assert summary.stopped is None and summary.rounds_completed == 8
    assert trace(run_dir.path) == trace(whole)
    # the whole run re-encoded only active agents' entries at each checkpoint, the resumed one
    # every agent's at its first: the same checkpoint
    assert last_checkpoint(run_dir.path) == last_checkpoint(whole)


def test_cosines_of_a_row_do_not_depend_on_the_other_rows():
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((257, 256)).astype(np.float32)
    personas = rng.standard_normal((257, 256)).astype(np.float32)
    together = cosines(vectors, personas)
    for rows in ([0], [5, 6], list(range(10)), list(range(3, 200, 7))):
        assert np.array_equal(cosines(vectors[rows], personas[rows]), together[rows])
    one = personas[0]
    assert np.array_equal(cosines(vectors[:10], one[None, :]), cosines(vectors[:10], np.repeat(one[None, :], 10, axis=0)))


def _platform(home_source: str, recommender=None) -> InMemoryPlatform:
    platform = InMemoryPlatform(InMemoryConfig(home_source=home_source, candidate_window=40), recommender=recommender)

    async def fill():
        for i in range(6):
            await platform.register_account(f"u{i}", f"U{i}", "bio")
        for n in range(60):
            await platform.apply(Action(f"u{n % 6}", "post", text=f"post {n}"), n // 10, f"t{n}")
        await platform.apply(Action("u1", "follow", target_agent="u2"), 6, "t")
        await platform.apply(Action("u1", "follow", target_agent="u3"), 6, "t")
        await platform.apply(Action("u3", "reblog", target_post="p7"), 6, "t")
        await platform.apply(Action("u1", "browse", post_ids=("p60", "p59", "p54", "p54")), 6, "t")
    asyncio.run(fill())
    return platform


@pytest.mark.parametrize("home_source", ["all", "following"])
def test_home_timelines_equal_one_home_timeline_per_viewer(home_source):
    requests = [("u0", 10, None, None), ("u1", 5, None, None), ("u1", 30, None, {"u2", "u4"}), ("u5", 0, None, None)]
    platform = _platform(home_source)
    together = asyncio.run(platform.home_timelines(requests))
    alone = [asyncio.run(platform.home_timeline(v, n, rng=g, author_filter=a)) for v, n, g, a in requests]
    assert together == alone and any(together)
    # random ranking: each viewer's own generator, in the same order either way
    ranked = _platform(home_source, recommender=build_random_feed(None, None))
    gens = lambda: [np.random.default_rng(i) for i in range(len(requests))]  # noqa: E731
    together = asyncio.run(ranked.home_timelines([(v, n, g, a) for (v, n, _, a), g in zip(requests, gens())]))
    alone = [asyncio.run(ranked.home_timeline(v, n, rng=g, author_filter=a)) for (v, n, _, a), g in zip(requests, gens())]
    assert together == alone


def test_read_marks_are_compact_and_round_trip_through_state():
    platform = _platform("all")
    assert list(platform._reads["u1"]) == [59, 58, 53]  # a repeated mark is kept once
    assert platform._reads["u1"].itemsize == 4
    state = platform.get_state()
    copy = InMemoryPlatform(InMemoryConfig(candidate_window=40))
    copy.set_state(state)
    reads = copy.get_state()["reads"]
    assert reads["offsets"].tolist() == [0, 0, 3, 3, 3, 3, 3] and reads["posts"].tolist() == [59, 58, 53]
    assert list(copy._reads["u1"]) == [59, 58, 53]
    assert asyncio.run(copy.home_timeline("u1", 3)) == asyncio.run(platform.home_timeline("u1", 3))
    assert [p.id for p in asyncio.run(copy.search("post 7", 5))] == ["p8"]


def test_the_batch_path_is_taken_and_checks_what_it_returns(tmp_path, monkeypatch):
    from townsquare.errors import ComponentError
    from townsquare.plugins.baselines.embedding_baseline import EmbeddingBaseline

    calls = []
    step_batch = EmbeddingBaseline.step_batch

    async def counted(ctxs):
        calls.append(len(ctxs))
        return await step_batch(ctxs)

    async def no_single_steps(self, ctx):
        raise AssertionError("a batch-capable agent took its turn alone")

    monkeypatch.setattr(EmbeddingBaseline, "step_batch", staticmethod(counted))
    monkeypatch.setattr(EmbeddingBaseline, "step", no_single_steps)
    run_baseline(tmp_path, "batch", True)
    assert len(calls) == 8 and max(calls) > 1  # one call a round, many agents each

    async def foreign(ctxs):
        return [[Action("someone-else", "post", text="hi")] for _ in ctxs]

    monkeypatch.setattr(EmbeddingBaseline, "step_batch", staticmethod(foreign))
    with pytest.raises(ComponentError, match="not an Action of this agent"):
        start_run(BASELINE, out=tmp_path / "bad", overrides=["populations.0.count=5", "rounds=1"])


def test_the_ray_driver_builds_no_components_and_a_shard_only_its_own_agents(tmp_path, write_scenario):
    """``assemble(components=False)`` (the Ray driver): every agent with persona, account and
    index, no components; ``assemble(held=...)`` (a shard): only the agents given, with their
    personas and components, no accounts, and every agent's activity level; on a platform with
    ``members`` the driver builds every agent."""
    from test_recagent_policy import scenario as recagent_scenario
    from townsquare.assembly import assemble
    from townsquare.persona import Persona
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.scenario_files import load_scenario

    def build(path, overrides=(), **options):
        scenario = load_scenario(path, list(overrides), make_plugin_manager(enable=["townsquare.testing.scripted"]))
        return asyncio.run(assemble(scenario, str(tmp_path), on_llm_call=lambda call: None, current_round=lambda: 0, **options))

    whole = build(BASELINE, ["populations.0.count=9"])
    driver = build(BASELINE, ["populations.0.count=9"], components=False)
    assert driver.partial and [a.index for a in driver.agents] == list(range(9)) and not any(a.components for a in driver.agents)
    assert [a.persona for a in driver.agents] == [a.persona for a in whole.agents]
    assert all(asyncio.run(driver.services.platform.profile(a.id)) is not None for a in driver.agents)
    given = {i: Persona(f"P{i}", [f"I am number {i}."]) for i in (1, 4, 7)}
    shard = build(BASELINE, ["populations.0.count=9"], held=given)
    assert shard.partial and [(a.index, a.id, a.persona.name) for a in shard.agents] == [
        (1, "users-0002", "P1"), (4, "users-0005", "P4"), (7, "users-0008", "P7")]
    assert all(a.components for a in shard.agents) and shard.population == 9
    assert list(shard.levels) == list(whole.levels)
    assert asyncio.run(shard.services.platform.profile("users-0002")) is None
    recagent = build(write_scenario(recagent_scenario(rounds=2)), components=False)
    assert not recagent.partial and all(a.components for a in recagent.agents)


def test_a_run_raises_the_collector_thresholds_and_restores_them(tmp_path, monkeypatch):
    """Millions of long-lived objects: a run plays with COLLECTOR_THRESHOLDS, then the process
    gets its own thresholds back (a notebook runs many runs)."""
    import gc

    from townsquare import engine

    seen = []
    play_round = engine.Simulation.play_round

    async def watched(self, r):
        seen.append(gc.get_threshold())
        await play_round(self, r)

    monkeypatch.setattr(engine.Simulation, "play_round", watched)
    before = gc.get_threshold()
    start_run(BASELINE, out=tmp_path / "run", overrides=["populations.0.count=5", "rounds=2"])
    assert seen == [engine.COLLECTOR_THRESHOLDS] * 2
    assert gc.get_threshold() == before != engine.COLLECTOR_THRESHOLDS
