"""The hash embedder: deterministic, model-free, unit-length rows."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import numpy as np
import pytest
from pydantic import ValidationError

from townsquare.components import BuildContext
from townsquare.embedding import Embedder, EmbeddingCache
from townsquare.plugins.embedders import hash as hash_embedder
from townsquare.plugins.embedders.hash import HashEmbedder, HashEmbedderConfig


def embed(texts, **config):
    return asyncio.run(HashEmbedder(HashEmbedderConfig(**config)).embed(texts))


def test_shape_dtype_and_unit_rows():
    vectors = embed(["hiking in the mountains", "jazz", ""], dim=64)
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0)
    assert not vectors[2].any()  # nothing to hash: a zero row
    assert embed([]).shape == (0, 256)


def test_similarity_follows_shared_words():
    same_a, same_b, shared, unrelated = embed([
        "I love hiking in the mountains every weekend",
        "I love hiking in the mountains every weekend",
        "Hiking in the mountains is my weekend plan",
        "The stock market fell sharply today",
    ])
    assert float(same_a @ same_b) == pytest.approx(1.0, abs=1e-6)
    assert float(same_a @ shared) == pytest.approx(0.8451542, abs=1e-6)
    assert float(same_a @ unrelated) == pytest.approx(0.0, abs=1e-6)


def test_fixed_values_do_not_depend_on_the_process():
    embedder = HashEmbedder()
    assert embedder._bucket("jazz") == (131, -1.0)
    assert embedder._bucket("jazz music") == (178, 1.0)
    assert sorted(embedder.features("Jazz music, jazz!").items()) == [
        ("jazz", 2), ("jazz music", 1), ("music", 1), ("music jazz", 1)]
    vector = embed(["Jazz music, jazz!"])[0]
    assert np.flatnonzero(vector).tolist() == [131, 164, 178, 230]
    # jazz: -(1 + ln 2); the three count-1 features: +-1; then unit length.
    norm = np.sqrt((1 + np.log(2)) ** 2 + 3)
    assert vector[[131, 164, 178, 230]] == pytest.approx([-(1 + np.log(2)) / norm, -1 / norm, 1 / norm, 1 / norm], abs=1e-6)


def test_stable_under_another_hash_seed():
    code = ("import asyncio; from townsquare.plugins.embedders.hash import HashEmbedder; "
            "v = asyncio.run(HashEmbedder().embed(['Jazz music, jazz!']))[0]; "
            "print([int(i) for i in v.nonzero()[0]], round(float(v[131]), 6))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[131, 164, 178, 230] -0.69903"


def test_options_change_the_features():
    assert set(HashEmbedder(HashEmbedderConfig(ngram=1)).features("red apple tree")) == {"red", "apple", "tree"}
    assert "red apple tree" in HashEmbedder(HashEmbedderConfig(ngram=3)).features("red apple tree")
    assert "the" in HashEmbedder(HashEmbedderConfig(stop_words=False)).features("the tree")
    assert "the" not in HashEmbedder().features("the tree")
    with pytest.raises(ValidationError):
        HashEmbedderConfig(dim=0)
    with pytest.raises(ValidationError):
        HashEmbedderConfig(size=3)


def test_works_behind_the_cache_and_registers():
    (spec,) = hash_embedder.townsquare_register_embedders()
    assert (spec.name, spec.priority, spec.config_model) == ("hash", 100, HashEmbedderConfig)
    embedder = spec.factory(HashEmbedderConfig(dim=32), BuildContext(services=None, seed=0))
    assert isinstance(embedder, Embedder) and (embedder.name, embedder.dim) == ("hash", 32)
    cache = EmbeddingCache(embedder)
    vectors = asyncio.run(cache.embed(["a cat", "a dog", "a cat"]))
    assert vectors.shape == (3, 32) and np.array_equal(vectors[0], vectors[2])
    assert (cache.misses, cache.hits) == (2, 1)
    assert embedder.get_state() == {}
    embedder.set_state(embedder.get_state())
