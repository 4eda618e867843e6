"""Populations: staged feeds, per-population settings, joining late, async persona sources."""

from __future__ import annotations

import pytest

from helpers import read_table
from townsquare import hookimpl
from townsquare.errors import ScenarioError
from townsquare.persona import Persona
from townsquare.specs import PersonaSourceSpec

STAGED = """
name = "staged"
seed = 3
rounds = 4
[activity]
model = "always"

[[populations]]
name = "initial"
count = 2
end_round = 1
slots = { policy = "embedding_baseline" }
config = { embedding_baseline = { post_probability = 1.0 } }
personas = { name = "inline", items = [{ name = "I1", sentences = ["Hiking trails and mountain views."] }, { name = "I2", sentences = ["Mountain hiking every weekend."] }] }

[[populations]]
name = "regular"
count = 3
start_round = 1
slots = { policy = "embedding_baseline" }
config = { embedding_baseline = { post_probability = 1.0, like_threshold = -1.0 } }
personas = { name = "inline", items = [{ name = "R", sentences = ["I love mountain hiking trails."] }] }
feed_stages = [ { start_round = 0, end_round = 3, authors = ["initial"] }, { start_round = 3, authors = ["regular"] } ]
"""


def test_feed_stages_and_population_settings(write_scenario, run_scenario):
    run_dir, _ = run_scenario(write_scenario(STAGED))
    posts = {row[0]: row[1] for row in read_table(run_dir.path, "posts")}
    likes = [(row[1], row[3], posts[row[5]]) for row in read_table(run_dir.path, "actions") if row[4] == "like"]
    # initial agents act only in round 0; regular agents from round 1
    assert {a for r, a, _ in likes} <= {"regular-0001", "regular-0002", "regular-0003"}
    assert all(row[3].startswith("initial") for row in read_table(run_dir.path, "actions") if row[1] == 0)
    # stage 1 (rounds 1-2): regular agents see only initial agents' posts; stage 2: only regular ones
    assert {author.split("-")[0] for r, _, author in likes if r < 3} == {"initial"}
    assert {author.split("-")[0] for r, _, author in likes if r >= 3} == {"regular"}
    # like_threshold -1 applies to the regular population only: it likes everything it sees
    assert len([1 for r, _, _ in likes if r == 1]) == 2 * 3


def test_unknown_stage_population_is_an_error(write_scenario, run_scenario):
    with pytest.raises(ScenarioError, match=r"populations\[1\].feed_stages\[0\].authors: no population named 'nobody'"):
        run_scenario(write_scenario(STAGED.replace('authors = ["initial"]', 'authors = ["nobody"]')))


def test_population_config_for_unknown_plugin_is_an_error(write_scenario, run_scenario):
    with pytest.raises(ScenarioError, match=r"populations\[0\].config.nonesuch: no plugin named 'nonesuch'"):
        run_scenario(write_scenario(STAGED.replace("config = { embedding_baseline = { post_probability = 1.0 } }", "config = { nonesuch = { x = 1 } }")))


def test_async_persona_source(make_plugins, write_scenario, run_scenario):
    class Source:
        def __init__(self, config, ctx):
            pass

        async def load(self, count, rng):
            return [Persona(name=f"async {i}", sentences=["I like async code."]) for i in range(count)]

    class Plugin:
        plugin_name = "async_src"

        @hookimpl
        def townsquare_register_persona_sources(self):
            return [PersonaSourceSpec("async_src", Source)]

    text = STAGED.replace('personas = { name = "inline", items = [{ name = "R", sentences = ["I love mountain hiking trails."] }] }', 'personas = { name = "async_src" }')
    run_dir, _ = run_scenario(write_scenario(text), plugins=make_plugins(Plugin()))
    names = [row[3] for row in read_table(run_dir.path, "agents")]
    assert names == ["I1", "I2", "async 0", "async 1", "async 2"]


def test_platform_apply_batch_gets_the_round_in_order(make_plugins, write_scenario, run_scenario):
    from helpers import scenario_text
    from townsquare.platforms.in_memory import InMemoryPlatform
    from townsquare.specs import PlatformSpec

    batches = []

    class Batching(InMemoryPlatform):
        async def apply_batch(self, actions, round, now):
            batches.append([(a.agent_id, a.kind) for a in actions])
            return [await self.apply(a, round, now) for a in actions]

    class Plugin:
        plugin_name = "batching"

        @hookimpl
        def townsquare_register_platforms(self):
            return [PlatformSpec("batching", lambda config, ctx: Batching(recommender=ctx.services.recommender))]

    text = scenario_text(rounds=2, extra='[platform]\nname = "batching"\n[plugins.embedding_baseline]\npost_probability = 1.0\n')
    run_dir, _ = run_scenario(write_scenario(text), plugins=make_plugins(Plugin()))
    stored = [(row[3], row[4]) for row in read_table(run_dir.path, "actions")]
    assert [pair for batch in batches for pair in batch] == stored
    assert batches[0] == [("users-0001", "post"), ("users-0002", "post"), ("users-0003", "post")]
