"""TF-IDF cosine similarity, the text similarity Zhou et al. use twice (§3.1.1 knowledge
adoption against T_k = 0.25; §3.1.4 duplicate posts against T_p = 0.80), citing Salton and
Buckley (1988).

The paper does not say which TF-IDF variant or corpus it uses. We use the common one (as in
scikit-learn's ``TfidfVectorizer`` defaults, so results match what most Python code computes):
lowercased tokens of two or more word characters, raw term counts,
``idf(t) = ln((1 + n) / (1 + df(t))) + 1`` over the ``n`` texts being compared, and
L2-normalised rows. The corpus is the texts compared in one call: the pair for knowledge
adoption, the new post and the agent's earlier posts for the duplicate check.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence

TOKEN = re.compile(r"(?u)\b\w\w+\b")


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


def tfidf_vectors(texts: Sequence[str]) -> list[dict[str, float]]:
    """One sparse, L2-normalised TF-IDF vector per text, with IDF fitted on ``texts``."""
    counts = [Counter(tokenize(t)) for t in texts]
    n = len(texts)
    df: Counter[str] = Counter()
    for c in counts:
        df.update(c.keys())
    idf = {term: math.log((1 + n) / (1 + d)) + 1.0 for term, d in df.items()}
    vectors = []
    for c in counts:
        weights = {term: tf * idf[term] for term, tf in c.items()}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        vectors.append({t: w / norm for t, w in weights.items()} if norm else {})
    return vectors


def _dot(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(w * b.get(t, 0.0) for t, w in a.items())


def tfidf_cosine(a: str, b: str) -> float:
    """TF-IDF cosine similarity of two texts, fitted on the pair."""
    va, vb = tfidf_vectors([a, b])
    return _dot(va, vb)


def max_tfidf_cosine(text: str, others: Sequence[str]) -> float:
    """The highest TF-IDF cosine between ``text`` and any of ``others`` (0 when there are
    none), fitted on all of them together."""
    if not others:
        return 0.0
    vectors = tfidf_vectors([text, *others])
    return max(_dot(vectors[0], v) for v in vectors[1:])
