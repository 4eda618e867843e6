"""User conformity (RecAgent fig. 5): AC(i) on a hand-made rating log, and the metric in runs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from townsquare.lib.stats import spearman
from townsquare.plugins.recagent.studies.conformity import attitude_change, own_changes

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_attitude_change_on_a_hand_made_rating_log():
    scores = {
        "a": [5, 5, 6, 6, 7, 7, 7, 7, 7, 7, 7],  # 2 changes in 10 steps
        "b": [3, 4, 5, 6, 7, 8, 7, 6, 5, 4, 3],  # 10 changes
        "c": [8] * 11,                           # none
        "d": [1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 9, 9],  # 10 changes in r = 1..10; the 11th step is not counted
    }
    friends = {"a": 1, "b": 3, "c": 3, "d": 1}
    ac = attitude_change(scores, friends, rounds_counted=10)
    assert ac == {1: pytest.approx((2 + 10) / (10 * 2)), 3: pytest.approx((10 + 0) / (10 * 2))}
    # fewer rounds than 10 so far: divided by the steps seen
    assert attitude_change({"a": [5, 6, 6]}, {"a": 2}) == {2: pytest.approx(0.5)}
    assert attitude_change({"a": [5]}, {"a": 2}) == {}
    assert own_changes(scores) == {"a": 2, "b": 10, "c": 0, "d": 10}


def test_rho_is_spearman_of_friends_and_each_agents_changes(run_scenario, make_plugins):
    run_dir, scores = oracle_run(run_scenario, make_plugins)
    db = sqlite3.connect(run_dir.events_path)
    last, rho = db.execute("SELECT round, value FROM metrics WHERE name = 'conformity.rho' ORDER BY round DESC LIMIT 1").fetchone()
    friends = {a: len(json.loads(p)["fields"].get("friends") or ()) for a, p in db.execute("SELECT agent_id, persona FROM agents")}
    changes = own_changes(scores)
    assert sum(changes.values()) > 0  # the oracle's raters do move toward what they recall
    agents = sorted(changes)
    assert rho == pytest.approx(spearman([friends[a] for a in agents], [changes[a] for a in agents]))
    # and over the agents who had not rated it before the run (the five first watchers left out)
    first = {a for a, p in db.execute("SELECT agent_id, persona FROM agents")
             if any(h.get("id") == "m1" for h in json.loads(p)["fields"].get("history") or ())}
    assert len(first) == 5
    others = [a for a in agents if a not in first]
    found = db.execute("SELECT value FROM metrics WHERE name = 'conformity.rho_others' AND round = ?", (last,)).fetchone()[0]
    assert found == pytest.approx(spearman([friends[a] for a in others], [changes[a] for a in others]) or 0.0)


def test_conformity_example_runs_offline(run_scenario, make_plugins):
    offline = ["rounds=4", "plugins.conformity.rater=embedding", "populations.0.slots.policy=embedding_items"]
    run_dir, summary = run_scenario(EXAMPLES / "conformity.toml", overrides=offline)
    db = sqlite3.connect(run_dir.events_path)
    metrics = {(r, n): v for r, n, v in db.execute("SELECT round, name, value FROM metrics WHERE name LIKE 'conformity.%'")}
    for r in range(4):
        assert sum(metrics[r, f"conformity.scores.{s}"] for s in range(1, 11)) == 20
    friend_counts = {n.split(".")[-1] for (r, n) in metrics if n.startswith("conformity.ac.")}
    assert friend_counts == {"2", "3", "4", "5", "6", "7"}


def oracle_run(run_scenario, make_plugins, *disabled, rounds=6, overrides=()):
    plugins = make_plugins(enable=["townsquare.testing.oracle"], disable=list(disabled))
    run_dir, _ = run_scenario(EXAMPLES / "conformity.toml", plugins=plugins, overrides=[f"rounds={rounds}", "llm.name=oracle", *overrides])
    _, state = run_dir.latest_checkpoint()
    return run_dir, state["metrics"]["conformity"]["scores"]


class Prompts:
    """The oracle's conformity prompts, kept by agent (the oracle itself reads only them)."""

    def __init__(self, monkeypatch):
        from townsquare.testing.oracle import OracleLLM

        self.seen: list[tuple[str, str, str]] = []
        original = OracleLLM.complete

        async def complete(oracle, request):
            response = await original(oracle, request)
            if request.purpose == "recagent.conformity":
                self.seen.append((request.agent_id, request.messages[-1].content, response.text))
            return response

        monkeypatch.setattr(OracleLLM, "complete", complete)


def test_friends_opinions_reach_the_rater_only_through_its_memory(run_scenario, make_plugins, monkeypatch):
    prompts = Prompts(monkeypatch)
    run_dir, scores = oracle_run(run_scenario, make_plugins)
    assert len(prompts.seen) == 20 * 6  # every agent, every round
    # no friend's score is handed over: every score in a prompt sits in a memory line
    for _, prompt, _ in prompts.seen:
        remembered = prompt.split("What you remember about it:")[1].split("An interviewer asks")[0]
        rest = prompt.replace(remembered, "")
        assert "/10" not in rest.split("last time:")[0] and "out of 5" not in rest
    # opinions travel: some agents that never watched the movie remember a friend's score of it and change theirs
    told = [(a, p) for a, p, _ in prompts.seen if "posted to friends" in p and "<Silent Orbit 1>:" in p]
    assert told
    changed = [a for a, s in scores.items() if len(set(s)) > 1]
    assert len(changed) >= 5
    assert all(1 <= v <= 10 for s in scores.values() for v in s)


SEEDS = {"Emre Kaya": "1.5", "Fay Osei": "3", "Kofi Mensah": "4", "Lea Brun": "2.5", "Quinn Doyle": "4.5"}


def test_the_first_watchers_remember_their_rating_from_the_first_round(run_scenario, make_plugins, monkeypatch):
    # Pareto activity leaves most agents idle in round 0: their earlier history is memory all the same
    prompts = Prompts(monkeypatch)
    oracle_run(run_scenario, make_plugins, rounds=1)
    first = {p.split("You are ", 1)[1].split(".", 1)[0]: p for _, p, _ in prompts.seen}
    for name, rating in SEEDS.items():
        assert f"{name} watched <Silent Orbit 1> and rated it {rating} out of 5" in first[name]


def test_only_opinions_of_their_own_are_passed_on(run_scenario, make_plugins, monkeypatch):
    from townsquare.testing.oracle import OracleLLM

    posts: list[tuple[str, str, str]] = []
    original = OracleLLM.complete

    async def complete(oracle, request):
        response = await original(oracle, request)
        if request.purpose == "recagent.broadcast" and response.text:
            posts.append((request.messages[-1].content.split("You are ", 1)[1].split(".", 1)[0], request.messages[-1].content, response.text))
        return response

    monkeypatch.setattr(OracleLLM, "complete", complete)
    run_dir, _ = oracle_run(run_scenario, make_plugins)
    db = sqlite3.connect(run_dir.events_path)
    names = dict(db.execute("SELECT agent_id, json_extract(persona, '$.name') FROM agents").fetchall())
    watched = {names[a] for (a,) in db.execute("SELECT agent_id FROM actions WHERE kind = 'watch' AND target_post = 'm1'")}
    about_it = [(who, prompt) for who, prompt, text in posts if "<Silent Orbit 1>:" in text]
    assert {who for who, _ in about_it} & set(SEEDS)
    for who, prompt in about_it:  # only someone who watched it, before the run or in it, gives it a score
        assert who in SEEDS or who in watched
        # and its memories show it as its own: its watch, or an insight drawn from it
        assert f"{who} watched <Silent Orbit 1>" in prompt or f"{who} keeps thinking about <Silent Orbit 1>" in prompt


def test_without_memory_no_opinion_reaches_the_rater(run_scenario, make_plugins, monkeypatch):
    prompts = Prompts(monkeypatch)
    run_dir, scores = oracle_run(run_scenario, make_plugins, "short_term_memory", "long_term_memory")
    assert all("(nothing comes to mind)" in p for _, p, _ in prompts.seen)
    assert all(len(set(s)) == 1 for s in scores.values())  # nobody ever changes: AC(i) = 0 for every i
    db = sqlite3.connect(run_dir.events_path)
    ac = dict(db.execute("SELECT name, value FROM metrics WHERE round = 5 AND name LIKE 'conformity.ac.%'").fetchall())
    assert set(ac.values()) == {0.0}
    # nobody changed: the rank correlation is undefined and stored as 0
    assert db.execute("SELECT value FROM metrics WHERE round = 5 AND name = 'conformity.rho'").fetchone()[0] == 0.0


SCENARIO = """
name = "conformity-llm"
seed = 1
rounds = 3
metrics = ["conformity"]
[activity]
model = "always"
[platform]
name = "recsys"
catalogue = "synthetic"
synthetic_items = 20
[recommender]
name = "item_random"
[llm]
name = "scripted"
[plugins.scripted.rules]
"Bo Lind thinks it is great" = "8"
"last time: none yet" = "3"
"last time: 3/10" = "3"
"last time: 8/10" = "8"
[plugins.conformity]
rater = "llm"
[[populations]]
name = "users"
count = 2
slots = {{ policy = "recagent_policy" }}
[populations.personas]
name = "inline"
items = [
  {{ name = "Ada Moss", sentences = ["I love comedy films."], fields = {{ friends = ["Bo Lind"], memories = ["Bo Lind thinks it is great."] }} }},
  {{ name = "Bo Lind", sentences = ["I love drama films."], fields = {{ friends = ["Ada Moss"] }} }},
]
"""


def test_llm_rater_reads_the_agents_memory(write_scenario, run_scenario):
    run_dir, _ = run_scenario(write_scenario(SCENARIO.format()))
    db = sqlite3.connect(run_dir.events_path)
    assert db.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose = 'recagent.conformity'").fetchone()[0] == 6
    _, state = run_dir.latest_checkpoint()
    scores = state["metrics"]["conformity"]["scores"]
    # Ada remembers what Bo said (her persona's memory, written before her first step): 8 from round 0 on;
    # Bo remembers nothing of the kind and keeps his 3
    assert scores["users-0001"] == [8, 8, 8] and scores["users-0002"] == [3, 3, 3]


def test_benchmark_counts_the_voices_each_prompt_shows(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("conformity_benchmark", EXAMPLES.parent / "benchmarks" / "conformity.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    full = bench.run_once(1, [], tmp_path / "full", overrides=["rounds=3"], voices=True)
    # every first watcher hears at least itself; the listener leaves the oracle as it was
    seeds = ("users-0005", "users-0006", "users-0011", "users-0012", "users-0017")
    assert all(full["voices"][a] >= 1 for a in seeds) and max(full["voices"].values()) >= 2
    assert sum(full["active"].values()) > 0
    bare = bench.run_once(1, ["no:short_term_memory", "no:long_term_memory"], tmp_path / "bare", overrides=["rounds=3"], voices=True)
    assert set(bare["voices"].values()) == {0}
    out = bench.summarise([full])
    assert out["voices_by_friends"] and -1 <= out["rho_friends_voices"] <= 1


def test_without_friends_in_memory_no_opinion_of_another_reaches_the_rater(run_scenario, make_plugins, monkeypatch):
    """The ablation that removes friends' opinions from memory only: posts and chats still flow
    (and name titles), but no memory holds what another person said, so no rater sees another's
    score, while the first watchers still recall their own."""
    prompts = Prompts(monkeypatch)
    run_dir, scores = oracle_run(run_scenario, make_plugins, overrides=["plugins.recagent_policy.remember_friends=false"])
    db = sqlite3.connect(run_dir.events_path)
    assert db.execute("SELECT COUNT(*) FROM actions WHERE kind IN ('broadcast', 'chat')").fetchone()[0] > 0
    _, state = run_dir.latest_checkpoint()
    names = {n for (n,) in db.execute("SELECT json_extract(persona, '$.name') FROM agents")}
    assert len(names) == 20
    for agent in state["agents"].values():
        for slot in ("memory.short_term", "memory.long_term"):
            for record in agent["components"][slot]["records"]:
                text = record["text"]
                assert not any(f"{other} posted to friends" in text or f"[{other}]:" in text for other in names
                               if not text.startswith(other))
    remembered = [(p.split("You are ", 1)[1].split(".", 1)[0], p.split("What you remember about it:")[1].split("An interviewer asks")[0])
                  for _, p, _ in prompts.seen]
    assert not [line for name, m in remembered for line in m.splitlines()
                if "posted to friends" in line and not line.startswith(f"- {name} posted")]
    assert any("watched <Silent Orbit 1> and rated it" in m for _, m in remembered)  # their own ratings stay


def test_the_benchmark_draws_friend_graphs_independent_of_who_watched_first(tmp_path):
    import importlib.util
    import json

    import numpy as np

    spec = importlib.util.spec_from_file_location("conformity_benchmark", EXAMPLES.parent / "benchmarks" / "conformity.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    personas = [json.loads(line) for line in bench.PERSONAS.read_text().splitlines() if line.strip()]
    degrees = sorted(len(p["fields"]["friends"]) for p in personas)
    first = [p["name"] for p in personas if p["fields"].get("history")]
    seen_first_degrees = set()
    for seed in range(5):
        drawn = bench.random_graph(personas, np.random.default_rng(seed))
        friends = {p["name"]: set(p["fields"]["friends"]) for p in drawn}
        assert sorted(len(f) for f in friends.values()) == degrees  # the same degree sequence
        assert all(name not in f and all(name in friends[o] for o in f) for name, f in friends.items())  # simple, symmetric
        assert [p["fields"].get("history") for p in drawn] == [p["fields"].get("history") for p in personas]
        seen_first_degrees |= {len(friends[n]) for n in first}
    assert len(seen_first_degrees) >= 4  # the first watchers' number of friends now varies
    assert bench.personas_for(1, "fixed", tmp_path) == []
    (override,) = bench.personas_for(1, "random", tmp_path)
    assert override == f"populations.0.personas.path={tmp_path / 'personas-1.jsonl'}"
    run = bench.run_once(1, [], tmp_path / "run", overrides=["rounds=2", override])
    assert len(run["first"]) == 5 and set(run["ac"]) >= set(run["first"])
