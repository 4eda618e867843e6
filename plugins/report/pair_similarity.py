"""The text similarity behind Zhou et al.'s BERTScore columns and ΔBS (§4.2; appendix G), pluggable.

Zhou et al. score the similarity between a persona and a post with BERTScore (Zhang et al.,
2019) and report ΔBS = BS(posts the agent acted on) - BS(posts it browsed and did not act on)
(appendix G). A :class:`PairSimilarity` scores (persona, post) pairs:

* :class:`EmbedderSimilarity` (default): the cosine of the run's own embedder's unit vectors
  (rebuilt from the manifest; no download, no GPU). Not BERTScore: its scale differs (a hash
  embedder's cosines are far below BERTScore's 0.43-0.47), so compare Δs and rankings, not
  levels, with the paper;
* :class:`BertScoreSimilarity`: BERTScore F1 with the persona as reference and the post as
  candidate, when the optional ``bert_score`` package is installed (``pip install bert-score``;
  its model must be on this machine or downloadable; a local folder needs ``num_layers``,
  the layer whose token vectors are matched). :func:`make_similarity` with ``"auto"`` picks
  it when the package imports and its model is already on this machine (no download is tried:
  offline, a download attempt retries for a minute before failing), else the embedder.

The BERTScore path is checked against F1 computed by hand from the same model's token vectors
(greedy cosine matching; [CLS]/[SEP] out of the averages but match targets, as bert_score
does; no idf, no rescaling) with all-MiniLM-L6-v2 at layer 6 (tests/plugins/report/test_zhou_bertscore.py;
skipped without ``bert_score``): equal within 1e-4.

Every result says which backend produced it (``name``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from townsquare.api import UsageError

Embed = Callable[[Sequence[str]], np.ndarray]


class PairSimilarity(Protocol):
    name: str

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One similarity per (reference, candidate) pair."""


class EmbedderSimilarity:
    """Cosine of unit embedding rows (each distinct text embedded once)."""

    def __init__(self, embed: Embed, embedder_name: str):
        self.embed = embed
        self.name = f"cosine of the run's embedder ({embedder_name})"

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0)
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        vectors = np.asarray(self.embed(texts), dtype=np.float64)
        row = {t: i for i, t in enumerate(texts)}
        a = vectors[[row[r] for r, _ in pairs]]
        b = vectors[[row[c] for _, c in pairs]]
        return np.einsum("ij,ij->i", a, b)


def bert_score_available() -> bool:
    try:
        import bert_score  # noqa: F401
    except ImportError:
        return False
    return True


class BertScoreSimilarity:
    """BERTScore F1 (Zhang et al., 2019): ``bert_score.score(candidates, references)``."""

    def __init__(self, model_type: str | None = None, lang: str = "en", batch_size: int = 32, scorer: Any = None,
                 num_layers: int | None = None):
        if scorer is None:
            try:
                from bert_score import score as scorer
            except ImportError:
                raise UsageError("--similarity bertscore needs the bert_score package: pip install bert-score") from None
        self.scorer = scorer
        self.model_type = model_type
        self.lang = lang
        self.batch_size = batch_size
        self.num_layers = num_layers
        layer = f", layer {num_layers}" if num_layers else ""
        self.name = f"BERTScore F1 ({model_type or 'default model for ' + lang}{layer})"

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0)
        try:
            options = {"num_layers": self.num_layers} if self.num_layers else {}
            _, _, f1 = self.scorer([c for _, c in pairs], [r for r, _ in pairs], model_type=self.model_type, lang=self.lang,
                                   batch_size=self.batch_size, verbose=False, **options)
        except Exception as exc:  # a model that cannot be loaded (offline, no cache), out of memory...
            raise UsageError(f"BERTScore failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
        return np.asarray(f1.tolist() if hasattr(f1, "tolist") else f1, dtype=np.float64)


def model_on_this_machine(model_type: str | None, lang: str = "en") -> bool:
    """Whether BERTScore's model (``model_type``, else bert_score's default for ``lang``) is a
    local folder or already in the Hugging Face cache: nothing is downloaded to find out."""
    from pathlib import Path

    try:
        from bert_score.utils import lang2model
        from transformers import AutoConfig
    except ImportError:
        return False
    name = model_type or lang2model.get(lang)
    if not name:
        return False
    if Path(name).is_dir():
        return True
    try:
        AutoConfig.from_pretrained(name, local_files_only=True)
    except Exception:  # noqa: BLE001 - any failure means: not here
        return False
    return True


def make_similarity(choice: str, embedder: Callable[[], tuple[Embed, str]], model_type: str | None = None,
                    notes: list[str] | None = None, num_layers: int | None = None) -> PairSimilarity:
    """``choice``: ``embedder``, ``bertscore`` or ``auto`` (BERTScore when ``bert_score``
    imports and its model is on this machine and loads, else the embedder, with a line in
    ``notes`` saying why). ``embedder()`` gives the run's embed function and its name, built
    only when needed."""
    if choice not in ("auto", "embedder", "bertscore"):
        raise UsageError(f"--similarity {choice!r}: expected auto, embedder or bertscore")
    if choice == "bertscore":
        return BertScoreSimilarity(model_type, num_layers=num_layers)
    if choice == "auto" and bert_score_available():
        if not model_on_this_machine(model_type):
            if notes is not None:
                notes.append(f"BERTScore's model ({model_type or 'the default for English'}) is not on this machine; "
                             "the run's embedder's cosine is used instead (--similarity bertscore downloads it)")
            return EmbedderSimilarity(*embedder())
        scorer = BertScoreSimilarity(model_type, num_layers=num_layers)
        try:
            scorer.score([("a persona", "a post")])  # loads the model once, here rather than mid-evaluation
            return scorer
        except UsageError as exc:
            if notes is not None:
                notes.append(f"{exc}; the run's embedder's cosine is used instead")
    return EmbedderSimilarity(*embedder())
