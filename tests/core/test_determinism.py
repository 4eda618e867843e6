"""A seed fixes the outcome, whatever the concurrency limit and however LLM calls interleave."""

from __future__ import annotations

from helpers import read_table, scenario_text


def _trace(run_dir):
    actions = [row[1:] for row in read_table(run_dir, "actions")]
    calls = [row[1:9] + row[10:] for row in read_table(run_dir, "llm_calls")]  # without latency_ms
    return actions, read_table(run_dir, "posts"), read_table(run_dir, "follows"), calls


def test_same_seed_same_trace_across_concurrency(make_plugins, write_scenario, run_scenario):
    plugins = make_plugins(enable=["townsquare.testing.scripted"])
    # A random latency per call makes completion order differ between the two runs.
    extra = '[recommender]\nname = "random"\n[plugins.scripted]\nlatency_ms = 1.0\n'
    path = write_scenario(scenario_text(rounds=4, count=6, policy="scripted_feed", llm=True, extra=extra))
    one, _ = run_scenario(path, plugins=plugins, overrides=["engine.concurrency=1"])
    many, _ = run_scenario(path, plugins=plugins, overrides=["engine.concurrency=64"])
    assert _trace(one.path) == _trace(many.path)
    assert read_table(one.path, "actions")


def test_different_seed_different_trace(make_plugins, write_scenario, run_scenario):
    plugins = make_plugins(enable=["townsquare.testing.scripted"])
    path = write_scenario(scenario_text(rounds=4, count=6, policy="scripted_feed", llm=True, extra='[recommender]\nname = "random"\n'))
    a, _ = run_scenario(path, plugins=plugins, seed=1)
    b, _ = run_scenario(path, plugins=plugins, seed=2)
    assert _trace(a.path) != _trace(b.path)
