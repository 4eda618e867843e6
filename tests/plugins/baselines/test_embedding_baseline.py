"""The embedding baseline policy on the in-memory platform with a hand-built StepContext."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from townsquare.actions import Action
from townsquare.components import Agent, BuildContext, Services, StepContext
from townsquare.embedding import EmbeddingCache
from townsquare.errors import UsageError
from townsquare.lib.persona_pool import cycle_personas
from townsquare.persona import Persona
from townsquare.platforms.in_memory import InMemoryPlatform
from townsquare.plugins.baselines import embedding_baseline
from townsquare.plugins.baselines.embedding_baseline import EmbeddingBaseline, EmbeddingBaselineConfig, build_embedding_baseline
from townsquare.plugins.embedders.hash import HashEmbedder
from townsquare.recommenders.chronological import Chronological

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


class World:
    def __init__(self, personas, seed=0, **config):
        self.platform = InMemoryPlatform(recommender=Chronological())
        self.services = Services(platform=self.platform, embedder=EmbeddingCache(HashEmbedder()))
        self.agents = []
        for i, persona in enumerate(personas):
            agent = Agent(f"a{i}", i, "pop", persona, 1.0, np.random.default_rng([seed, i]))
            agent.components["policy"] = EmbeddingBaseline(EmbeddingBaselineConfig(**config))
            self.agents.append(agent)
            asyncio.run(self.platform.register_account(agent.id, persona.name, ""))

    def ctx(self, agent, round=0):
        return StepContext(agent=agent, round=round, now=datetime(2024, 1, 1, 8), minutes_per_round=60, services=self.services)

    async def step(self, agent, round=0):
        return await agent.components["policy"].step(self.ctx(agent, round))

    async def play(self, rounds):
        trace = []
        for round in range(rounds):
            actions = []
            for agent in self.agents:
                actions += await self.step(agent, round)
            for action in actions:
                result = await self.platform.apply(action, round, f"r{round}")
                trace.append((action, result.ok))
        return trace


HIKER = Persona("Hiker", ["I love hiking in the mountains every weekend.", "I cook on a camping stove."])
BANKER = Persona("Banker", ["The stock market fell sharply today.", "Interest rates worry me."])
WALKER = Persona("Walker", ["Hiking in the mountains is my weekend plan."])


def test_likes_reblogs_and_follows_by_similarity():
    world = World([HIKER, BANKER, WALKER], post_probability=0.0)

    async def scenario():
        for agent, text in ((world.agents[1], "Stocks and bonds fell again."), (world.agents[2], WALKER.sentences[0])):
            await world.platform.apply(Action(agent.id, "post", text=text), 0, "t")
        return await world.step(world.agents[0])

    actions = asyncio.run(scenario())
    assert [(a.kind, a.target_post, a.target_agent) for a in actions] == [
        ("browse", None, None), ("like", "p2", None), ("reblog", "p2", None), ("follow", None, "a2")]
    assert actions[0].post_ids == ("p2", "p1")
    assert actions[1].detail == {"similarity": 0.5698} == actions[3].detail


def test_follows_each_author_once_and_never_itself():
    world = World([HIKER, WALKER], post_probability=0.0)
    policy = world.agents[0].components["policy"]

    async def scenario():
        kinds = []
        for text in ("Hiking in the mountains is my weekend plan.", "Mountains and hiking again this weekend."):
            await world.platform.apply(Action("a1", "post", text=text), 0, "t")
            actions = await world.step(world.agents[0])
            for action in actions:
                await world.platform.apply(action, 0, "t")
            kinds.append([a.kind for a in actions])
        return kinds

    assert asyncio.run(scenario()) == [["browse", "like", "reblog", "follow"], ["browse", "like", "reblog"]]
    assert policy.get_state()["followed"] == ["a1"]
    assert asyncio.run(world.platform.followers("a1")) == ["a0"]


def test_empty_feed_and_posting():
    world = World([HIKER], post_probability=1.0)
    actions = asyncio.run(world.step(world.agents[0]))
    assert [a.kind for a in actions] == ["post"]
    assert actions[0].text in HIKER.sentences
    quiet = World([HIKER], post_probability=0.0)
    assert asyncio.run(quiet.step(quiet.agents[0])) == []
    silent = World([Persona("Nobody")], post_probability=1.0)
    assert asyncio.run(silent.step(silent.agents[0])) == []


def test_content_file_is_resolved_against_base_dir(tmp_path):
    (tmp_path / "lines.txt").write_text("first line\n\n  second line  \n", encoding="utf-8")
    config = EmbeddingBaselineConfig(content_file="lines.txt", post_probability=1.0)
    policy = build_embedding_baseline(config, BuildContext(services=None, seed=0, base_dir=str(tmp_path)))
    assert policy.content == ("first line", "second line")
    world = World([HIKER])
    world.agents[0].components["policy"] = policy
    texts = {asyncio.run(world.step(world.agents[0]))[-1].text for _ in range(20)}
    assert texts == {"first line", "second line"}
    with pytest.raises(UsageError, match="missing.txt: no such content file"):
        build_embedding_baseline(EmbeddingBaselineConfig(content_file="missing.txt"),
                                 BuildContext(services=None, seed=0, base_dir=str(tmp_path)))


def test_state_round_trips_through_json():
    world = World([HIKER, WALKER], post_probability=0.0)
    asyncio.run(world.platform.apply(Action("a1", "post", text=WALKER.sentences[0]), 0, "t"))
    policy = world.agents[0].components["policy"]
    asyncio.run(world.step(world.agents[0]))
    state = json.loads(json.dumps(policy.get_state()))
    # the persona vector is embedded again after a resume, not saved
    assert state == {"followed": ["a1"]}
    copy = EmbeddingBaseline(EmbeddingBaselineConfig())
    copy.set_state(state)
    assert json.loads(json.dumps(copy.get_state())) == state
    fresh = EmbeddingBaseline()
    assert fresh.get_state() == {"followed": []}
    # a restored agent follows nobody twice and re-embeds the same persona vector
    world.agents[0].components["policy"] = copy
    world.platform._reads.clear()
    assert [a.kind for a in asyncio.run(world.step(world.agents[0]))] == ["browse", "like", "reblog"]
    expected = asyncio.run(world.services.embedder.embed_one(HIKER.text))
    assert np.array_equal(copy._vector, expected)


def test_state_round_trips_without_the_persona_vector():
    """The persona vector is embedded again after a resume, never read from a checkpoint."""
    policy = EmbeddingBaseline()
    policy.set_state({"followed": ["a2"]})
    assert policy._vector is None and policy.get_state() == {"followed": ["a2"]}


def _example_run(seed):
    personas = [Persona.from_dict(json.loads(line)) for line in (EXAMPLES / "personas.jsonl").read_text().splitlines()]
    world = World(cycle_personas(personas, 60), seed=seed)
    trace = asyncio.run(world.play(6))
    return world, trace


def test_run_on_example_personas_is_deterministic():
    world, trace = _example_run(seed=0)
    _, again = _example_run(seed=0)
    assert [(a.to_dict(), ok) for a, ok in trace] == [(a.to_dict(), ok) for a, ok in again]
    counts = Counter(a.kind for a, ok in trace if ok)
    assert dict(counts) == {"post": 109, "browse": 300, "like": 294, "reblog": 125, "follow": 39}
    assert all(ok for _, ok in trace)  # the policy never asks for a refused action
    follows = [(a.agent_id, a.target_agent) for a, _ in trace if a.kind == "follow"]
    # The first follows go to the cycled copy of one's own persona ("Name #2").
    assert follows[:4] == [("a1", "a41"), ("a5", "a45"), ("a13", "a53"), ("a19", "a59")]
    _, other = _example_run(seed=1)
    assert [a.to_dict() for a, _ in other] != [a.to_dict() for a, _ in trace]


def test_registration():
    (spec,) = embedding_baseline.townsquare_register_policies()
    assert (spec.name, spec.config_model) == ("embedding_baseline", EmbeddingBaselineConfig)
    config = EmbeddingBaselineConfig()
    assert config.like_threshold < config.reblog_threshold < config.follow_threshold
    assert isinstance(spec.factory(None, BuildContext(services=None, seed=0)), EmbeddingBaseline)
    with pytest.raises(Exception):
        EmbeddingBaselineConfig(post_probability=1.5)


def test_posts_per_step(make_plugins, write_scenario, run_scenario):
    from helpers import read_table, scenario_text

    text = scenario_text(rounds=1, extra="[plugins.embedding_baseline]\npost_probability = 1.0\nposts_per_step = 7\n")
    run_dir, _ = run_scenario(write_scenario(text))
    authors = [row[1] for row in read_table(run_dir.path, "posts")]
    assert authors == ["users-0001"] * 7 + ["users-0002"] * 7 + ["users-0003"] * 7
