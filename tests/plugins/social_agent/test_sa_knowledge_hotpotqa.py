"""The hotpotqa knowledge source: HotpotQA records in chromadb with the run's embeddings."""

from __future__ import annotations

import asyncio
import builtins
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import SHARED_DATA, read_table
from test_sa_persona_context import CountingEmbedder
from townsquare.actions import Action
from townsquare.components import BuildContext, Services
from townsquare.embedding import EmbeddingCache
from townsquare.errors import UsageError
from townsquare.plugins.embedders.hash import HashEmbedder
from townsquare.specs import PolicySpec
from townsquare.plugins.social_agent.knowledge.hotpotqa import (
    INSTALL_HINT, HotpotQAConfig, build_hotpotqa, item_text, read_hotpotqa)

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLE = DATA / "hotpotqa_sample.json"
chromadb = pytest.importorskip("chromadb", reason="chromadb not installed (pip install -e '.[knowledge]')")


def build(tmp_path, embedder=None, **config):
    services = Services(platform=None, embedder=EmbeddingCache(embedder or HashEmbedder()), run_dir=str(tmp_path))
    ctx = BuildContext(services=services, seed=0, base_dir=str(DATA))
    return build_hotpotqa(HotpotQAConfig(path="hotpotqa_sample.json", **config), ctx)


def test_read_and_item_text(tmp_path):
    records = read_hotpotqa(SAMPLE)
    assert len(records) == 12 and records[1] == {
        "question": "Were the designers of the Lancia Stratos and the Ferrari Dino from the same country?",
        "answer": "yes", "type": "comparison"}
    assert item_text(records[1]).endswith("same country? A: yes")
    assert len(read_hotpotqa(SAMPLE, limit=5)) == 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question": "q?", "answer": 3}]))
    with pytest.raises(UsageError, match=r"bad.json: record 0: expected"):
        read_hotpotqa(bad)
    with pytest.raises(UsageError, match="no such HotpotQA file"):
        read_hotpotqa(tmp_path / "none.json")
    with pytest.raises(UsageError, match="needs path"):
        build_hotpotqa(None, BuildContext(services=None, seed=0))


@pytest.mark.parametrize("persist", [True, False])
@pytest.mark.parametrize("query, first", [
    ("puppy breed for first-time owners", 0),
    ("jazz quintet trumpet album", 2),
    ("motorbike engine restored in a garage documentary", 8),
    ("sourdough bread and soda bread yeast", 9),
])
def test_query_returns_the_relevant_item_first(tmp_path, persist, query, first):
    source = build(tmp_path, persist=persist)
    items = asyncio.run(source.search(query, 3))
    assert [item.id for item in items][0] == f"hotpotqa-{first}"
    assert len(items) == 3 and items[0].score >= items[1].score >= items[2].score
    record = read_hotpotqa(SAMPLE)[first]
    assert items[0].text == item_text(record) and items[0].meta == record
    # the score is the embedder's cosine
    vectors = asyncio.run(HashEmbedder().embed([query, item_text(record)]))
    assert items[0].score == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-4)
    assert (tmp_path / "knowledge").exists() == persist


def test_explicit_embeddings_only_and_persistent_reuse(tmp_path):
    embedder = CountingEmbedder()
    source = build(tmp_path, embedder, batch_size=5)
    assert asyncio.run(source.search("chess olympiad", 20))[0].id == "hotpotqa-3"  # k larger than the collection
    assert embedder.texts == 12 + 1 and not source.reused
    assert asyncio.run(source.search("x", 0)) == []
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(tmp_path / "knowledge"), settings=Settings(anonymized_telemetry=False))
    collection = client.get_collection("hotpotqa", embedding_function=None)
    assert collection.count() == 12
    assert collection.configuration_json["embedding_function"] is None
    again = build(tmp_path, embedder)
    asyncio.run(again.search("chess olympiad", 1))
    assert again.reused and embedder.texts == 12 + 2  # reopened: only the query is embedded (new run cache)
    limited = build(tmp_path, embedder, limit=4)  # other data: the collection is rebuilt
    found = asyncio.run(limited.search("chess olympiad", 10))
    assert not limited.reused and found[0].id == "hotpotqa-3" and len(found) == 4


def test_search_is_exact_and_the_same_on_every_build(tmp_path):
    """Builds in other folders and a reopened collection answer every query alike: exact
    cosines, ties (items sharing no word with the query: cosine 0) in file order. chromadb's
    approximate index answered each build differently, so a replay saw other knowledge."""
    queries = ["chess olympiad", "jazz", "qzxv wplk", "bread", "the"]

    def answers(source):
        return [[(item.id, item.score) for item in asyncio.run(source.search(q, 6))] for q in queries]

    first = answers(build(tmp_path / "a"))
    assert first == answers(build(tmp_path / "b")) == answers(build(tmp_path / "c", batch_size=5))
    reopened = build(tmp_path / "a")
    assert answers(reopened) == first and reopened.reused
    ties = [(a, b) for found in first for a, b in zip(found, found[1:]) if a[1] == b[1]]
    assert len(ties) >= 3 and all(int(a[0].split("-")[1]) < int(b[0].split("-")[1]) for a, b in ties)
    vectors = np.stack([HashEmbedder().embed_sync([text])[0] for text in build(tmp_path / "d").texts])
    query = HashEmbedder().embed_sync(["chess olympiad"])[0]
    cosines = vectors @ query / np.linalg.norm(vectors, axis=1) / np.linalg.norm(query)
    assert [s for _, s in first[0]] == pytest.approx(sorted(cosines, reverse=True)[:6], abs=1e-6)


def test_missing_chromadb_is_one_line(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_chromadb(name, *args, **kwargs):
        if name == "chromadb" or name.startswith("chromadb."):
            raise ImportError("No module named 'chromadb'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_chromadb)
    with pytest.raises(UsageError) as info:
        build(tmp_path)
    assert str(info.value) == INSTALL_HINT == 'knowledge source "hotpotqa" needs chromadb: pip install -e ".[knowledge]"'


class KnowledgeProbe:
    """Test policy: posts how many items its knowledge component adopted for one topic."""

    def __init__(self, config, ctx):
        pass

    async def step(self, ctx):
        adopted = await ctx.agent.components["persona.knowledge"].knowledge_for(ctx, "dog training and puppies")
        return [Action(ctx.agent.id, "post", text=f"adopted {len(adopted)}", detail={"ids": [i.id for i in adopted]})]

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


class ProbePlugin:
    plugin_name = "knowledge_probe"

    @staticmethod
    def townsquare_register_policies():
        return [PolicySpec("knowledge_probe", KnowledgeProbe)]


def test_knowledge_boundary_over_hotpotqa_in_a_run(write_scenario, run_scenario, make_plugins, tmp_path):
    plugins = make_plugins(ProbePlugin, enable=["townsquare.plugins.social_agent.knowledge.hotpotqa",
                                                "townsquare.plugins.social_agent.knowledge.knowledge_boundary",
                                                "townsquare.plugins.social_agent.persona.synthetic"], strict=False)
    scenario = write_scenario(f"""
name = "kbrun"
rounds = 1
[activity]
model = "always"
[knowledge]
name = "hotpotqa"
path = "{SAMPLE}"
[[populations]]
name = "users"
count = 3
slots = {{ policy = "knowledge_probe", "persona.knowledge" = "knowledge_boundary" }}
[populations.personas]
name = "inline"
items = [
  {{ name = "Dog trainer", sentences = ["I train puppies."], fields = {{ knowledge = "Knows positive reinforcement dog training for puppies and which breed suits first-time owners." }} }},
  {{ name = "Astronomer", sentences = ["I watch stars."], fields = {{ knowledge = "Knows telescopes, spiral galaxies and astronomy." }} }},
]
""")
    run_dir, summary = run_scenario(scenario, plugins=plugins)
    assert summary.rounds_completed == 1
    assert (Path(run_dir.path) / "knowledge").is_dir()
    posts = [(row[3], row[7]) for row in read_table(run_dir.path, "actions") if row[4] == "post"]
    # the dog trainer adopts the puppy-breed record; the astronomer adopts nothing on dogs
    assert posts == [("users-0001", "adopted 1"), ("users-0002", "adopted 0"), ("users-0003", "adopted 1")]
    detail = json.loads([row for row in read_table(run_dir.path, "actions") if row[4] == "post"][0][12])
    assert detail == {"ids": ["hotpotqa-0"]}


@pytest.mark.shared_data
@pytest.mark.slow
def test_shared_hotpotqa_dev_set(tmp_path):
    path = SHARED_DATA / "hotpotqa" / "hotpot_dev_v1_simplified.json"
    if not path.exists():
        pytest.skip("shared data absent")
    services = Services(platform=None, embedder=EmbeddingCache(HashEmbedder()), run_dir=str(tmp_path))
    source = build_hotpotqa(HotpotQAConfig(path=str(path)), BuildContext(services=services, seed=0))
    items = asyncio.run(source.search("Were Scott Derrickson and Ed Wood of the same nationality?", 3))
    assert len(source.texts) == 7405
    assert items[0].meta["answer"] == "yes" and "Scott Derrickson" in items[0].text
    assert source.build_seconds is not None and np.isfinite(source.build_seconds)
