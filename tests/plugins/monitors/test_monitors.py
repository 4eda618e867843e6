"""Run-health monitors: each value on hand-made rounds, one warning line per crossing, state
round trip, and on by default in a run (with the report section)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from types import SimpleNamespace

import pytest
from structlog.testing import capture_logs

from helpers import scenario_text
from townsquare.api import EmbeddingCache, Persona, PostView, RoundView
from townsquare.plugins.embedders.hash import HashEmbedder
from townsquare.plugins.monitors.homogenisation import Homogenisation, HomogenisationConfig
from townsquare.plugins.monitors.parse_failures import ParseFailures, ParseFailuresConfig
from townsquare.plugins.monitors.persona_drift import PersonaDrift, PersonaDriftConfig
from townsquare.plugins.monitors.repetition import Repetition, RepetitionConfig
from townsquare.plugins.monitors.silent_agents import SilentAgents, SilentAgentsConfig
from townsquare.launch.runner import start_run


class FakePlatform:
    def __init__(self):
        self.posts: list[PostView] = []

    def add(self, author: str, text: str, round: int) -> None:
        self.posts.append(PostView(id=f"p{len(self.posts)}", author_id=author, text=text, round=round, created_at=""))

    async def public_timeline(self, limit: int):
        return list(reversed(self.posts))[:limit]


def agent(agent_id: str, sentences=("I like boats.",), start_round=0):
    return SimpleNamespace(id=agent_id, persona=Persona(agent_id, list(sentences)), start_round=start_round, end_round=None,
                           present=lambda r, s=start_round: r >= s)


def ctx(run_dir=None):
    return SimpleNamespace(services=SimpleNamespace(embedder=EmbeddingCache(HashEmbedder()), run_dir=run_dir))


def measure(metric, round, platform=None, agents=(), actions=()):
    view = RoundView(round=round, now="", platform=platform or FakePlatform(), agents=list(agents), actions=list(actions))
    return asyncio.run(metric.measure(view))


def test_repetition_counts_posts_that_repeat_the_author_and_warns_once():
    platform = FakePlatform()
    metric = Repetition(RepetitionConfig(threshold=0.3, window=2), ctx())
    platform.add("a", "sailing at dawn on the quiet lake", 0)
    platform.add("b", "football results from the weekend league", 0)
    assert measure(metric, 0, platform) == {"value": 0.0, "alert": 0.0}
    with capture_logs() as logs:
        platform.add("a", "sailing at dawn on the quiet lake", 1)  # a repeat of a's own post
        platform.add("b", "sailing at dawn on the quiet lake", 1)  # b copies a: not b's own repetition
        assert measure(metric, 1, platform) == {"value": pytest.approx(1 / 4), "alert": 0.0}
        platform.add("a", "sailing at dawn on the quiet lake", 2)
        platform.add("b", "sailing at dawn on the quiet lake", 2)
        # window of 2 rounds: rounds 1 and 2 hold 4 posts, 3 of them repeats
        assert measure(metric, 2, platform) == {"value": pytest.approx(3 / 4), "alert": 1.0}
        platform.add("a", "sailing at dawn on the quiet lake", 3)
        assert measure(metric, 3, platform)["alert"] == 1.0
    warnings = [e for e in logs if e["event"] == "monitor.repetition"]
    assert len(warnings) == 1 and warnings[0]["round"] == 2 and warnings[0]["log_level"] == "warning"

    again = Repetition(RepetitionConfig(threshold=0.3, window=2), ctx())
    again.set_state(json.loads(json.dumps(metric.get_state(), default=lambda a: a.tolist())))
    assert again.alarm.warned and list(again.rounds) == list(metric.rounds)
    platform.add("b", "football results from the weekend league", 4)
    assert measure(again, 4, platform) == measure(metric, 4, platform)


def test_homogenisation_is_the_mean_similarity_across_authors():
    platform = FakePlatform()
    metric = Homogenisation(HomogenisationConfig(threshold=0.9, window=1), ctx())
    for author in "abc":
        platform.add(author, "the same words from everyone", 0)
    assert measure(metric, 0, platform) == {"value": pytest.approx(1.0), "alert": 1.0}
    platform.add("a", "sailing at dawn on the quiet lake", 1)
    platform.add("b", "football results from the weekend league", 1)
    platform.add("b", "sailing at dawn on the quiet lake", 1)
    embedder = EmbeddingCache(HashEmbedder())
    v = asyncio.run(embedder.embed(["sailing at dawn on the quiet lake", "football results from the weekend league"]))
    # pairs across authors: (a, b-football), (a, b-sailing) = cos, 1
    expected = (float(v[0] @ v[1]) + 1.0) / 2
    assert measure(metric, 1, platform)["value"] == pytest.approx(expected, abs=1e-6)
    single = FakePlatform()
    single.add("a", "alone", 2)
    assert measure(metric, 2, single) == {}  # one author: nothing to compare


def test_silent_agents_share_over_a_window():
    metric = SilentAgents(SilentAgentsConfig(threshold=0.5, window=2), ctx())
    agents = [agent("a"), agent("b"), agent("c"), agent("late", start_round=5)]
    assert measure(metric, 0, agents=agents, actions=[{"agent_id": "a", "kind": "post", "ok": True}]) == {}
    out = measure(metric, 1, agents=agents, actions=[{"agent_id": "b", "kind": "browse", "ok": True}])
    assert out == {"value": pytest.approx(2 / 3), "alert": 1.0, "count": 2.0}  # b only browsed, c did nothing
    out = measure(metric, 2, agents=agents, actions=[{"agent_id": "b", "kind": "like", "ok": True},
                                                     {"agent_id": "c", "kind": "like", "ok": False}])
    assert out["count"] == 2.0  # a's post is two rounds old now; c's refused like does not count
    # the state round-trips (and the layout before the columns, {agent: round}, still loads)
    again = SilentAgents(SilentAgentsConfig(threshold=0.5, window=2), ctx())
    again.set_state(metric.get_state())
    assert again.last_acted == {"a": 0, "b": 2}
    again.set_state({"alarm": {}, "last_acted": {"a": 0, "b": 2}})
    assert measure(again, 3, agents=agents) == measure(metric, 3, agents=agents)


def test_silent_agents_watch_only_present_agents():
    metric = SilentAgents(SilentAgentsConfig(threshold=0.9, window=1), ctx())
    gone = agent("gone")
    gone.end_round = 2
    agents = [agent("a"), gone]
    assert measure(metric, 1, agents=agents)["count"] == 2.0
    assert measure(metric, 2, agents=agents, actions=[{"agent_id": "a", "kind": "post", "ok": True}]) == {
        "value": 0.0, "alert": 0.0, "count": 0.0}  # "gone" left at round 2: only "a" is watched


def test_persona_drift_is_the_drop_from_first_to_last_posts():
    platform = FakePlatform()
    metric = PersonaDrift(PersonaDriftConfig(threshold=0.15, window=1), ctx())
    agents = [agent("a", ["I love sailing boats on the lake."])]
    platform.add("a", "I love sailing boats on the lake.", 0)  # identical to the persona: similarity 1
    assert measure(metric, 0, platform, agents) == {}  # one post: no recent level yet
    platform.add("a", "stock markets crashed and interest rates rise", 1)
    embedder = EmbeddingCache(HashEmbedder())
    p, q = asyncio.run(embedder.embed(["I love sailing boats on the lake.", "stock markets crashed and interest rates rise"]))
    out = measure(metric, 1, platform, agents)
    assert out["value"] == pytest.approx(1.0 - float(p @ q), abs=1e-6) and out["alert"] == 1.0


def test_parse_failures_read_committed_llm_calls(tmp_path):
    db = sqlite3.connect(tmp_path / "events.sqlite")
    db.execute("CREATE TABLE llm_calls (round INTEGER, status TEXT)")
    db.executemany("INSERT INTO llm_calls VALUES (?, ?)", [(0, "ok")] * 18 + [(0, "cached")] * 2 + [(0, "parse_failure")] * 4 + [(1, "parse_failure")] * 50)
    db.commit()
    db.close()
    metric = ParseFailures(ParseFailuresConfig(threshold=0.1, window=6, min_calls=20), ctx(str(tmp_path)))
    assert measure(metric, 0) == {}  # nothing committed before round 0
    assert measure(metric, 1) == {"value": pytest.approx(4 / 20), "alert": 1.0, "calls": 20.0}
    assert measure(ParseFailures(ParseFailuresConfig(min_calls=21), ctx(str(tmp_path))), 1) == {}


def test_monitors_run_by_default_and_the_report_shows_them(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=6, count=3, extra="[plugins.repetition]\nthreshold = 0.1\n"))
    with capture_logs() as logs:
        run_dir, _ = start_run(scenario, out=tmp_path / "run")
    names = {row[0] for row in sqlite3.connect(run_dir.events_path).execute("SELECT DISTINCT name FROM metrics")}
    assert {"repetition.value", "homogenisation.value"} <= names
    slots = [r["component"] for r in run_dir.read_manifest()["slot_table"] if r["slot"] == "metric"]
    assert {"repetition", "homogenisation", "silent_agents", "persona_drift", "parse_failures"} <= set(slots)
    # the embedding baseline posts its persona's sentences: it repeats itself, and says so once
    alerts = sqlite3.connect(run_dir.events_path).execute("SELECT round FROM metrics WHERE name = 'repetition.alert' AND value = 1").fetchall()
    assert len(alerts) >= 2
    warnings = [e for e in logs if e["event"] == "monitor.repetition"]
    assert len(warnings) == 1 and warnings[0]["round"] == alerts[0][0] and warnings[0]["threshold"] == 0.1

    from townsquare.plugins.report.build import build_report

    path, _ = build_report(run_dir.path, tmp_path / "report.html", with_similarity=False)
    page = path.read_text()
    assert "Run health" in page and "repetition" in page and "first alert" in page


def test_a_monitor_is_disabled_like_any_plugin(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2, count=3, extra="[plugins.embedding_baseline]\npost_probability = 1.0\n"))
    run_dir, _ = start_run(scenario, out=tmp_path / "run", plugin_options=["no:repetition"])
    names = {row[0] for row in sqlite3.connect(run_dir.events_path).execute("SELECT DISTINCT name FROM metrics")}
    assert not any(n.startswith("repetition.") for n in names) and "homogenisation.value" in names
