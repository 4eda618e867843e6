"""Generative agents in whole runs with the scripted test model: the example scenario with
Park's components, ablations by ``-p no:NAME`` (the slot table shows the fallback and the run
completes), and memories swapped between Park's and Zhou et al.'s agents."""

from __future__ import annotations

import pytest

from helpers import ROOT, read_table

SCRIPTED = "townsquare.testing.scripted"
#: scripted answers for the reflection prompts (the rest: the scripted model's defaults)
RULES = """
[llm]
name = "scripted"
[plugins.scripted]
rules = { "most salient high-level questions" = '{"questions": ["What do I enjoy?", "Who do I talk to?", "What worries me?"]}', "high-level insights can you infer" = '{"insights": [{"insight": "I enjoy cooking for others", "because": [1, 2]}, {"insight": "I talk about music", "because": [3]}]}' }
"""


def example(write_scenario, rounds=6, reflection_threshold=100, extra=""):
    text = (ROOT / "examples" / "generative_agents_social.toml").read_text()
    text = text.replace('path = "personas.jsonl"', f'path = "{ROOT / "examples" / "personas.jsonl"}"')
    text = text.replace("rounds = 8", f"rounds = {rounds}").replace("threshold = 150", f"threshold = {reflection_threshold}")
    return write_scenario(text + RULES + extra)


def slots(run_dir):
    """The population's filled agent slots (the slot table writes "-" for an empty one)."""
    return {row["slot"]: row["component"] for row in run_dir.read_manifest()["slot_table"]
            if row["scope"] == "townsfolk" and row["component"] != "-" and row["slot"] != "personas"}


def agent_states(run_dir, slot):
    _, state = run_dir.latest_checkpoint()
    return {agent: saved["components"].get(slot) for agent, saved in state["agents"].items()}


def test_example_runs_with_parks_components(make_plugins, write_scenario, run_scenario):
    # threshold 60: the scripted model's conversations settle nothing to plan for, so they leave no planning thought
    run_dir, summary = run_scenario(example(write_scenario, reflection_threshold=60), plugins=make_plugins(enable=[SCRIPTED]))
    assert summary.rounds_completed == 6
    assert slots(run_dir) == {"policy": "generative_agent", "memory.stream": "memory_stream",
                              "memory.retrieval": "park_retrieval", "reflector": "park_reflection",
                              "planner": "day_plan", "persona.context": "agent_summary",
                              "memory.sensory": "conversation_memory"}
    streams = agent_states(run_dir, "memory.stream")
    records = [r for state in streams.values() for r in state["records"]]
    kinds = {r["kind"] for r in records}
    assert {"observation", "action", "reflection"} <= kinds
    ids = {(agent, r["id"]) for agent, state in streams.items() for r in state["records"]}
    for agent, state in streams.items():
        for record in state["records"]:
            assert all((agent, e) in ids for e in record["evidence"])  # every evidence link resolves
            assert 1 <= record["importance"] <= 10
    purposes = {row[0] for row in read_table(run_dir.path, "llm_calls") for row in [row[3:4]]}
    assert {"importance", "decide", "reflection.questions", "reflection.insights"} <= purposes
    # every reflection is a row of the reflections table: what it wrote and the records it added
    reflections = read_table(run_dir.path, "reflections")
    assert reflections and {row[3:5] for row in reflections} == {("park_reflection", "reflection")}
    for agent, state in streams.items():  # the insights the stream keeps, as the rows say, in order
        written = [line for row in reflections if row[2] == agent and row[5] for line in row[5].split("\n")]
        assert written == [r["text"] for r in state["records"] if r["kind"] == "reflection"]
    assert "\n".join(["I enjoy cooking for others", "I talk about music"] * 3) in {row[5] for row in reflections}


@pytest.mark.parametrize("plugin,slot,fallback", [
    ("park_reflection", "reflector", "follow_reflection"),
    ("memory_stream", "memory.stream", None),
    ("park_retrieval", "memory.retrieval", None),
    ("day_plan", "planner", "activity_plan"),
])
def test_ablation_shows_the_fallback_and_completes(plugin, slot, fallback, make_plugins, write_scenario, run_scenario):
    run_dir, summary = run_scenario(example(write_scenario, rounds=3),
                                    plugins=make_plugins(enable=[SCRIPTED], disable=[plugin]))
    assert summary.rounds_completed == 3
    assert slots(run_dir).get(slot) == fallback
    assert plugin not in {row["plugin"] for row in run_dir.read_manifest()["slot_table"]}
    if plugin != "day_plan":  # Zhou's activity plan may keep every agent offline in 3 rounds
        assert read_table(run_dir.path, "actions")


def test_generative_agent_with_zhous_memory(make_plugins, write_scenario, run_scenario):
    swap = 'slots = { policy = "generative_agent", "memory.short_term" = "action_memory", "memory.stream" = "none" }'
    path = example(write_scenario, rounds=4)
    path.write_text(path.read_text().replace('slots = { policy = "generative_agent" }', swap))
    run_dir, summary = run_scenario(path, plugins=make_plugins(enable=[SCRIPTED]))
    assert summary.rounds_completed == 4
    assert slots(run_dir)["memory.short_term"] == "action_memory" and "memory.stream" not in slots(run_dir)
    memories = agent_states(run_dir, "memory.short_term")
    assert any(state["entries"] for state in memories.values())
    assert all(r["kind"] == "action" for state in memories.values() for r in state["records"])


def test_zhous_agent_with_the_stream(make_plugins, write_scenario, run_scenario):
    swap = 'slots = { policy = "social_agent", "memory.stream" = "memory_stream", planner = "none", "persona.knowledge" = "none" }'
    path = example(write_scenario, rounds=3, extra="[plugins.social_agent]\ninitial_posts = 1\n")
    path.write_text(path.read_text().replace('slots = { policy = "generative_agent" }', swap))
    run_dir, summary = run_scenario(path, plugins=make_plugins(enable=[SCRIPTED]))
    assert summary.rounds_completed == 3
    table = slots(run_dir)
    assert table["policy"] == "social_agent" and table["memory.stream"] == "memory_stream"
    assert table["memory.short_term"] == "action_memory"
    observed = [r for state in agent_states(run_dir, "memory.stream").values() for r in state["records"]
                if r["kind"] == "observation" and r["meta"].get("post_id")]
    assert observed and all(" posted: " in r["text"] for r in observed)


def test_export_writes_the_memories_table(make_plugins, write_scenario, run_scenario, tmp_path):
    import csv
    import json

    from townsquare.commands.export import export_run

    run_dir, _ = run_scenario(example(write_scenario, reflection_threshold=60), plugins=make_plugins(enable=[SCRIPTED]))
    written = export_run(run_dir.events_path, "csv", tmp_path / "export")
    assert tmp_path / "export" / "memories.csv" in written
    with open(tmp_path / "export" / "memories.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["agent", "slot", "id", "kind", "text", "created", "importance", "evidence"]
    _, state = run_dir.latest_checkpoint()
    expected = sum(len(saved["components"]["memory.stream"]["records"]) for saved in state["agents"].values())
    assert len(rows) == expected
    reflections = [r for r in rows if r["kind"] == "reflection"]
    assert reflections
    by_key = {(r["agent"], r["id"]): r for r in rows}
    for row in reflections:
        evidence = json.loads(row["evidence"])
        assert evidence and all((row["agent"], e) in by_key for e in evidence)


def test_report_shows_reflections_and_plans(make_plugins, write_scenario, run_scenario):
    from townsquare.plugins.report.build import build_report

    plugins = make_plugins(enable=[SCRIPTED])
    run_dir, _ = run_scenario(example(write_scenario, rounds=6), plugins=plugins)
    page = build_report(run_dir.path, with_similarity=False, plugins=plugins)[0].read_text()
    assert "Reflections and plans" in page and "from " in page.split("Reflections and plans", 1)[1]
