"""Slot protocols checked when a run is built, and the lifecycle calls components observe."""

from __future__ import annotations

import types
from datetime import datetime, timedelta

import pytest

from helpers import read_table, scenario_text
from townsquare.api import AGENT_SLOTS, SLOT_PROTOCOLS, MemorySpec, PolicySpec, RecommenderSpec, hookimpl
from townsquare.plugins.social_agent.memory.short_term_needs import DuplicateCheck, EngagementLog
from townsquare.errors import ComponentError
from townsquare.slots import missing_members, protocol_members


class Quiet:
    """A policy that does nothing (but does it correctly)."""

    async def step(self, ctx):
        return []

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


class NoStep:
    def get_state(self):
        return {}

    def set_state(self, state):
        pass


def _plugin(name: str, **hooks) -> types.ModuleType:
    module = types.ModuleType(f"tests_plugins.{name}")
    for hook, records in hooks.items():
        setattr(module, hook, hookimpl(lambda records=records: records))
    return module


def test_every_agent_slot_and_run_wide_slot_has_a_protocol():
    assert set(AGENT_SLOTS) <= set(SLOT_PROTOCOLS)
    assert {"platform", "recommender", "metric"} <= set(SLOT_PROTOCOLS)
    assert protocol_members(SLOT_PROTOCOLS["policy"]) == ("get_state", "set_state", "step")
    assert set(protocol_members(DuplicateCheck)) == {"get_state", "set_state", "max_attempts", "post_similarity", "is_duplicate", "record_skipped"}


def test_missing_members_names_what_is_absent():
    assert missing_members(Quiet(), SLOT_PROTOCOLS["policy"]) == []
    assert missing_members(NoStep(), SLOT_PROTOCOLS["policy"]) == ["step"]
    not_callable = NoStep()
    not_callable.step = "step"
    assert missing_members(not_callable, SLOT_PROTOCOLS["policy"]) == ["step"]


def test_a_policy_missing_step_stops_the_run_at_build_naming_it(make_plugins, write_scenario, run_scenario):
    plugin = _plugin("nostep", townsquare_register_policies=[PolicySpec("nostep", lambda config, ctx: NoStep())])
    with pytest.raises(ComponentError, match=r"^populations\[0\] \(users\): component 'nostep' \(plugin 'nostep'\) "
                                             r"in slot policy lacks step\(\) of Policy$"):
        run_scenario(write_scenario(scenario_text(rounds=1, policy="nostep")), plugins=make_plugins(plugin))


def test_a_recommender_missing_rank_stops_the_run(make_plugins, write_scenario, run_scenario):
    plugin = _plugin("norank", townsquare_register_recommenders=[RecommenderSpec("norank", lambda config, ctx: NoStep())])
    text = scenario_text(rounds=1, extra='[recommender]\nname = "norank"\n')
    with pytest.raises(ComponentError, match=r"^recommender: component 'norank' \(plugin 'norank'\) in slot recommender lacks rank\(\)"):
        run_scenario(write_scenario(text), plugins=make_plugins(plugin))


class PlainShortTerm(NoStep):
    """A short-term memory (the Memory protocol) without the duplicate check Zhou et al.'s
    policy needs."""

    async def remember(self, ctx, records):
        return list(records)

    async def recall(self, ctx, query, k):
        return []

    def since(self, when):
        return []

    def remember_posts(self, posts):
        pass

    def engaged_posts(self, since_round=0):
        return []


ZHOU = """
[[populations]]
name = "users"
count = 2
slots = {{ policy = "{policy}", "memory.short_term" = "{memory}" }}
[populations.personas]
name = "inline"
items = [{{ name = "Ada", sentences = ["I love hiking."] }}, {{ name = "Bo", sentences = ["I play jazz."] }}]
"""


def _zhou(memory: str, policy: str = "social_agent") -> str:
    return 'name = "z"\nrounds = 1\n[activity]\nmodel = "always"\n[llm]\nname = "scripted"\n' + ZHOU.format(memory=memory, policy=policy)


@pytest.mark.parametrize("policy", ["social_agent", "social_agent_routed", "social_agent_combined"])
def test_a_short_term_memory_without_the_duplicate_check_fails_loudly(make_plugins, write_scenario, run_scenario, policy):
    plugin = _plugin("plainmem", townsquare_register_memory=[
        MemorySpec("plain_short_term", lambda config, ctx: PlainShortTerm(), memory_kind="short_term")])
    plugins = make_plugins(plugin, enable=["townsquare.testing.scripted"])
    with pytest.raises(ComponentError, match=r"component 'plain_short_term' \(plugin 'plainmem'\) in slot memory.short_term "
                                             rf"lacks max_attempts\(\) of DuplicateCheck, which policy '{policy}' requires"):
        run_scenario(write_scenario(_zhou("plain_short_term", policy)), plugins=plugins)


class NoRecall(NoStep):
    async def remember(self, ctx, records):
        return []


def test_a_memory_tier_missing_recall_stops_the_run(make_plugins, write_scenario, run_scenario):
    plugin = _plugin("norecall", townsquare_register_memory=[
        MemorySpec("no_recall", lambda config, ctx: NoRecall(), memory_kind="stream")])
    text = scenario_text(rounds=1).replace('slots = { policy = "embedding_baseline" }',
                                           'slots = { policy = "embedding_baseline", "memory.stream" = "no_recall" }')
    with pytest.raises(ComponentError, match=r"component 'no_recall' \(plugin 'norecall'\) in slot memory.stream lacks recall\(\) of Memory$"):
        run_scenario(write_scenario(text), plugins=make_plugins(plugin))


def test_the_paper_memory_satisfies_what_the_policy_requires():
    from townsquare.plugins.social_agent.memory.action_memory import ActionMemory

    memory = ActionMemory()
    assert missing_members(memory, DuplicateCheck) == [] and missing_members(memory, EngagementLog) == []
    assert missing_members(memory, SLOT_PROTOCOLS["memory.short_term"]) == []


def test_no_short_term_memory_turns_the_feature_off_and_says_so(make_plugins, write_scenario, run_scenario):
    from structlog.testing import capture_logs

    plugins = make_plugins(enable=["townsquare.testing.scripted"])
    with capture_logs() as logs:
        _, summary = run_scenario(write_scenario(_zhou("none")), plugins=plugins)
    assert summary.rounds_completed == 1
    off = sorted((e["component"], e["needs"]) for e in logs if e["event"] == "slot.feature_off")
    # once per population and component, not once per agent
    assert off == [("follow_reflection", "EngagementLog"), ("social_agent", "DuplicateCheck, EngagementLog")]


# --------------------------------------------------------------------------- lifecycle


class AgeDecay:
    """Hacker News-style gravity: (likes + 1) / (age in hours + 2) ** 1.8, where the age is the
    simulated time since the post was made, read from ``on_round_start`` (no globals)."""

    def __init__(self):
        self.now: datetime | None = None
        self.rounds: list[tuple[int, datetime]] = []
        self.ages: list[tuple[int, float]] = []

    def on_round_start(self, round, now):
        self.now = now
        self.rounds.append((round, now))

    def age_hours(self, post) -> float:
        return (self.now - datetime.fromisoformat(post.created_at)).total_seconds() / 3600

    def rank(self, viewer, candidates, limit, rng):
        scored = []
        for post in candidates:
            age = self.age_hours(post)
            self.ages.append((self.rounds[-1][0] if self.rounds else -1, post.round, age))
            scored.append(((post.likes + 1) / (age + 2) ** 1.8, post.id, post))
        return [post for _, _, post in sorted(scored, key=lambda item: (-item[0], item[1]))][:limit]

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


class RoundAwarePolicy(Quiet):
    def __init__(self):
        self.seen = []

    async def on_round_start(self, round, now):  # async works too
        self.seen.append(round)

    async def step(self, ctx):
        from townsquare.api import Action

        await ctx.home_timeline(5)
        return [Action(ctx.agent.id, "post", text=f"hello at {ctx.now:%H:%M}")]


def test_an_age_based_recommender_gets_the_simulated_time_each_round(make_plugins, write_scenario, run_scenario):
    recommender, policies = AgeDecay(), []

    def build_policy(config, ctx):
        policies.append(RoundAwarePolicy())
        return policies[-1]

    plugin = _plugin("ageplug",
                     townsquare_register_recommenders=[RecommenderSpec("age_decay", lambda config, ctx: recommender)],
                     townsquare_register_policies=[PolicySpec("round_aware", build_policy)])
    text = scenario_text(rounds=3, count=2, policy="round_aware", extra='[recommender]\nname = "age_decay"\n'
                         "[clock]\nstart = 2024-05-01T09:00:00\nminutes_per_round = 30\n")
    run_dir, _ = run_scenario(write_scenario(text), plugins=make_plugins(plugin))
    start = datetime(2024, 5, 1, 9, 0)
    assert recommender.rounds == [(r, start + timedelta(minutes=30 * r)) for r in range(3)]
    assert [p.seen for p in policies] == [[0, 1, 2], [0, 1, 2]]
    # the feed is ranked when it is read: every age is the simulated time since the post's round
    assert recommender.ages and {age for _, _, age in recommender.ages} <= {0.5, 1.0}
    assert all(age == 0.5 * (now_round - post_round) for now_round, post_round, age in recommender.ages)
    posts = read_table(run_dir.path, "posts")  # run_scenario returns a RunDir
    assert len(posts) == 6


def test_age_decay_ranks_by_simulated_age():
    from townsquare.api import PostView

    rec = AgeDecay()
    rec.now = datetime(2024, 1, 1, 12, 0)
    old_popular = PostView("p1", "a", "x", round=0, created_at="2024-01-01T08:00:00", likes=9)
    new_quiet = PostView("p2", "b", "y", round=3, created_at="2024-01-01T11:00:00", likes=0)
    old_quiet = PostView("p3", "c", "z", round=0, created_at="2024-01-01T08:00:00", likes=0)
    ranked = rec.rank("v", [new_quiet, old_popular, old_quiet], 3, None)
    # scores: p1 = 10 / 6**1.8 = 0.400, p2 = 1 / 3**1.8 = 0.138, p3 = 1 / 6**1.8 = 0.040
    assert [p.id for p in ranked] == ["p1", "p2", "p3"]
    assert sorted(rec.ages) == [(-1, 0, 4.0), (-1, 0, 4.0), (-1, 3, 1.0)]
    # later, a fresh post with no likes beats a 20-hour-old one with five: 1/3**1.8 > 6/22**1.8
    rec.on_round_start(20, datetime(2024, 1, 2, 4, 0))
    fresh = PostView("p4", "d", "w", round=19, created_at="2024-01-02T03:00:00", likes=0)
    old_liked = PostView("p5", "e", "v", round=0, created_at="2024-01-01T08:00:00", likes=5)
    assert [p.id for p in rec.rank("v", [old_liked, fresh], 2, None)] == ["p4", "p5"]


class NoStepClass(NoStep):
    def __init__(self, config, ctx):
        pass


def test_a_class_factory_is_checked_before_the_run_directory_is_made(make_plugins, write_scenario, run_scenario, tmp_path):
    plugin = _plugin("nostepcls", townsquare_register_policies=[PolicySpec("nostep_cls", NoStepClass)])
    with pytest.raises(ComponentError, match=r"^populations\[0\] \(users\): component 'nostep_cls' \(plugin 'nostepcls'\) "
                                             r"in slot policy lacks step\(\) of Policy$"):
        run_scenario(write_scenario(scenario_text(rounds=1, policy="nostep_cls")), plugins=make_plugins(plugin), out=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_the_cli_prints_one_line_and_exits_2(tmp_path):
    import subprocess
    import sys

    module = tmp_path / "nostep_cli_plugin.py"
    module.write_text(
        "from townsquare.api import PolicySpec, hookimpl\n"
        "class NoStep:\n"
        "    def __init__(self, config, ctx): pass\n"
        "    def get_state(self): return {}\n"
        "    def set_state(self, state): pass\n"
        "@hookimpl\n"
        "def townsquare_register_policies():\n"
        "    return [PolicySpec('nostep_cli', NoStep)]\n")
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=1, policy="nostep_cli"))
    out = subprocess.run([sys.executable, "-m", "townsquare.cli", "run", str(scenario), "--out", str(tmp_path / "r"),
                          "-p", "nostep_cli_plugin"], capture_output=True, text=True, cwd=tmp_path,
                         env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        "error: populations[0] (users): component 'nostep_cli' (plugin 'nostep_cli_plugin') in slot policy lacks step() of Policy")
    assert not (tmp_path / "r").exists()
