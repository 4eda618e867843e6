"""End to end: Zhou et al.'s agent (social_agent + activity_plan + action_memory +
follow_reflection, mastodon_digest feed) through run_scenario with the scripted test model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

SCRIPTED = "townsquare.testing.scripted"
MODULES = [
    "townsquare.plugins.social_agent.actions.social_agent",
    "townsquare.plugins.social_agent.actions.social_agent_combined",
    "townsquare.plugins.social_agent.planning.activity_plan",
    "townsquare.plugins.social_agent.memory.action_memory",
    "townsquare.plugins.social_agent.reflection.follow_reflection",
    "townsquare.recommenders.mastodon_digest",
]

PLAN = ('{"browsing_start": "09:00", "browsing_end": "21:00", "probability_of_liking": 40, "probability_of_forwarding": 20, '
        '"probability_of_commenting": 20, "posting_day": 1, "posting_start": "08:00", "posting_end": "20:00", "posts_per_week": 6}')

SCENARIO = """
name = "zhou-small"
seed = 5
rounds = 50
[clock]
start = 2024-01-01T08:00:00
minutes_per_round = 60
[recommender]
name = "mastodon_digest"
[llm]
name = "scripted"
text_reply = "{{topic}} is on my mind today"
[llm.rules]
"Make a rough plan" = 'PLAN'
'exactly one of "like"' = "like"
'exactly one of "forward"' = "forward"
'reply with "Comment content:"' = "Comment content: Nice point, thanks for sharing."
"Reply with one JSON object" = '{{"like": true, "reblog": true, "comment": "Nice point."}}'
"Suggest 1 topics" = '{{"topics": ["Morning walks in the hills"]}}'
"^Summarise" = "A post about everyday life."
"which user you want to follow" = "users-0002"
[plugins.social_agent]
feed_size = 5
[plugins.social_agent_combined]
feed_size = 5

[[populations]]
name = "users"
count = 4
slots = {{ policy = "{policy}", planner = "activity_plan", reflector = "follow_reflection", "memory.short_term" = "action_memory", "persona.context" = "none", "persona.knowledge" = "none", "memory.sensory" = "none", "memory.long_term" = "none", "memory.stream" = "none", "memory.retrieval" = "none" }}
[populations.personas]
name = "inline"
items = [
  {{ name = "Ada", sentences = ["I love hiking in the mountains.", "I cook vegan food."] }},
  {{ name = "Bo", sentences = ["I play jazz piano at night."] }},
  {{ name = "Cy", sentences = ["I follow football every weekend."] }},
  {{ name = "Di", sentences = ["I grow tomatoes on my balcony."] }},
]
"""


def scenario(policy: str) -> str:
    return SCENARIO.format(policy=policy).replace("'PLAN'", "'" + PLAN + "'")


def query(run_dir: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(Path(run_dir) / "events.sqlite")
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


@pytest.fixture
def plugins(make_plugins):
    # strict=False: a built-in another change is still adding must not stop this run; our own
    # modules are checked below.
    loaded = make_plugins(enable=[SCRIPTED, *MODULES], strict=False)
    for module in MODULES:
        assert loaded.infos[module.rsplit(".", 1)[-1]].status == "loaded", module
    return loaded


def test_small_run_with_the_social_agent(write_scenario, run_scenario, plugins):
    run_dir, summary = run_scenario(write_scenario(scenario("social_agent")), plugins=plugins)
    assert summary.rounds_completed == 50 and summary.stopped is None
    counts = dict(query(run_dir.path, "SELECT kind, COUNT(*) FROM actions WHERE ok = 1 GROUP BY kind"))
    assert {"browse", "post", "like", "reblog", "comment", "follow"} <= set(counts), counts
    # posts only on day 1 (rounds 0-11), six per agent, spread over the posting window
    posts = query(run_dir.path, "SELECT agent_id, round FROM actions WHERE kind = 'post' AND ok = 1")
    assert {r for _, r in posts} <= set(range(12))
    assert all(sum(1 for a, _ in posts if a == agent) <= 6 for agent, _ in posts)
    # the planner decides activity: nobody acts outside 09:00-21:00 unless a post is due
    night = query(run_dir.path, "SELECT round, active FROM rounds WHERE round BETWEEN 13 AND 24")
    assert all(active == 0 for _, active in night), night
    # reflections at round 48: follows of users-0002 by the agents who engaged with its posts
    follows = query(run_dir.path, "SELECT round, follower, followee FROM follows")
    assert follows and {r for r, _, _ in follows} == {48}
    assert ("users-0002",) in {(f,) for _, _, f in follows}
    # each reflection is a row: the account it chose, or none
    reflections = query(run_dir.path, "SELECT round, agent_id, source, kind, text, ids FROM reflections")
    assert {row[:1] + row[2:4] for row in reflections} == {(48, "follow_reflection", "follow")}
    assert {(r, a, t) for r, a, _, _, t, ids in reflections if ids} == set(follows)
    assert all(json.loads(ids) == [t] for *_, t, ids in reflections if ids)
    purposes = dict(query(run_dir.path, "SELECT purpose, COUNT(*) FROM llm_calls GROUP BY purpose"))
    assert purposes["plan"] == 4 and purposes["summary"] >= 1 and purposes["follow"] >= 3
    # every like, reblog and comment decision was a separate call
    assert {"like", "reblog", "comment"} <= set(purposes)
    comments = query(run_dir.path, "SELECT text FROM posts WHERE reply_to IS NOT NULL")
    assert comments and {c for (c,) in comments} == {"Nice point, thanks for sharing."}


def test_small_run_with_the_combined_policy(write_scenario, run_scenario, plugins):
    run_dir, summary = run_scenario(write_scenario(scenario("social_agent_combined")), plugins=plugins)
    counts = dict(query(run_dir.path, "SELECT kind, COUNT(*) FROM actions WHERE ok = 1 GROUP BY kind"))
    assert {"browse", "post", "like", "reblog", "comment", "follow"} <= set(counts), counts
    purposes = dict(query(run_dir.path, "SELECT purpose, COUNT(*) FROM llm_calls GROUP BY purpose"))
    assert "decide" in purposes and not {"like", "reblog", "comment"} & set(purposes)


INITIAL = """
name = "zhou-initial"
seed = 3
rounds = 3
[llm]
name = "scripted"
[llm.rules]
"Suggest .* topics" = '{"topics": ["Sourdough starters", "Mountain trails", "Old cameras"]}'
"Write one post" = "A short post written for the test."

[[populations]]
name = "initial"
count = 2
end_round = 1
activity = { model = "always" }
personas = { name = "synthetic" }
# no duplicate-post check: the scripted model writes the same post every time
slots = { policy = "social_agent", planner = "none", reflector = "none", memory.short_term = "none" }
config = { social_agent = { browse = false, initial_posts = 3 } }

[[populations]]
name = "regular"
count = 2
start_round = 1
activity = { model = "pareto", alpha = 2.0, x_min = 0.001 }
personas = { name = "synthetic" }
slots = { policy = "social_agent", planner = "none", reflector = "none" }
"""


def test_initial_agents_only_post_first(make_plugins, write_scenario, run_scenario):
    """Zhou §4.1: initial agents fill the empty sandbox with posts, browsing nothing."""
    plugins = make_plugins(enable=[SCRIPTED])
    run_dir, _ = run_scenario(write_scenario(INITIAL), plugins=plugins)
    db = sqlite3.connect(Path(run_dir.path) / "events.sqlite")
    rows = db.execute("SELECT round, agent_id, kind FROM actions ORDER BY seq").fetchall()
    assert [(r, a, k) for r, a, k in rows if a.startswith("initial")] == [
        (0, "initial-0001", "post"), (0, "initial-0001", "post"), (0, "initial-0001", "post"),
        (0, "initial-0002", "post"), (0, "initial-0002", "post"), (0, "initial-0002", "post"),
    ]
    # the regular population's activity (x_min tiny) keeps it almost always idle: its own model applies
    assert len([1 for r, a, k in rows if a.startswith("regular")]) <= 2


def test_the_plan_is_read_once_per_turn_and_the_feed_handed_once(write_scenario, run_scenario, plugins, monkeypatch):
    """A like decision's path: the engine asks the planner for the turn (plan_turn), the policy
    reads the session it returned, in ctx.plan; the browsed posts reach the action memory once, as
    observations through the memory chain."""
    from collections import Counter

    from townsquare.plugins.social_agent.memory.action_memory import ActionMemory
    from townsquare.plugins.social_agent.planning.activity_plan import ActivityPlanner

    sessions, handed = Counter(), Counter()
    session, remember = ActivityPlanner.session, ActionMemory.remember

    async def counted_session(self, ctx):
        sessions[ctx.agent.id, ctx.round] += 1
        return await session(self, ctx)

    async def counted_remember(self, ctx, records):
        handed[ctx.agent.id, ctx.round] += sum(1 for r in records if r.kind == "observation")
        return await remember(self, ctx, records)

    monkeypatch.setattr(ActivityPlanner, "session", counted_session)
    monkeypatch.setattr(ActionMemory, "remember", counted_remember)
    run_dir, _ = run_scenario(write_scenario(scenario("social_agent").replace("rounds = 50", "rounds = 14")), plugins=plugins)
    assert sessions and set(sessions.values()) == {1}
    browsed = {(a, r): len(json.loads(ids)) for a, r, ids in query(run_dir.path, "SELECT agent_id, round, post_ids FROM actions WHERE kind = 'browse'")}
    assert browsed and {key: handed[key] for key in browsed} == browsed
    assert query(run_dir.path, "SELECT COUNT(*) FROM actions WHERE kind = 'like'")[0][0] > 0
