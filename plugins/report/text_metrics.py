"""Distinct-1/2: the lexical diversity of generated text (Li et al., 2016, "A Diversity-Promoting
Objective Function for Neural Conversation Models", §4.3).

distinct-n = (number of distinct n-grams) / (total number of n-grams), counted over a whole set
of texts (all posts of a run, or all its comments). Zhou et al. (Table 1) report it as a
percentage: 22.40 / 63.88 for posts, 3.38 / 19.05 for comments.

Where both papers are silent, we chose:

* tokens are lowercased words and single punctuation marks (``\\w+`` runs and any other
  non-space character), so "Hiking!" and "hiking" share the word ``hiking``;
* n-grams never cross the boundary between two texts;
* an empty set (or one whose texts are all shorter than n tokens) has no distinct-n: ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def distinct_n(texts: Iterable[str], n: int) -> float | None:
    """Distinct n-grams over total n-grams across ``texts``, as a fraction in [0, 1]."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    total = 0
    seen: set[tuple[str, ...]] = set()
    for text in texts:
        grams = ngrams(tokenize(text), n)
        total += len(grams)
        seen.update(grams)
    return len(seen) / total if total else None


def distinct_percent(texts: list[str]) -> dict[str, float | None]:
    """``{"distinct-1": %, "distinct-2": %}`` as Zhou et al. report them (percent, 2 decimals)."""
    out: dict[str, float | None] = {}
    for n in (1, 2):
        value = distinct_n(texts, n)
        out[f"distinct-{n}"] = None if value is None else round(100 * value, 2)
    return out
