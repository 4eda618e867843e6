"""Distinct-1/2: the lexical diversity of generated text (Li et al., 2016, "A Diversity-Promoting
Objective Function for Neural Conversation Models", §5 Experiments, evaluation metrics), as
Zhou et al. use it for posts and comments (§4.2, Table 1).

Li et al. count "the number of distinct unigrams and bigrams in generated responses", a
number "scaled by total number of generated tokens to avoid favoring long sentences":

    distinct-n = |distinct n-grams over all texts| / (total tokens over all texts)   (per token)

counted over a whole set of texts (all posts of a run, or all its comments). For n = 1 this is
also distinct unigrams / all unigrams; for n >= 2 it differs from "distinct n-grams / all
n-grams", a common variant (``per="ngram"``), because a text of T tokens has T - n + 1
n-grams. Zhou et al. (Table 1) report it as a percentage: 22.40 / 63.88 for posts, 3.38 /
19.05 for comments.

Where both papers are silent, we chose:

* tokens are lowercased words and single punctuation marks (``\\w+`` runs and any other
  non-space character), so "Hiking!" and "hiking" share the word ``hiking``;
* n-grams never cross the boundary between two texts;
* a set with no token at all has no distinct-n: ``None`` (texts shorter than n tokens have
  tokens and no n-gram: distinct-n is 0 per token, ``None`` per n-gram).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

_TOKEN = re.compile(r"\w+|[^\w\s]")

#: what distinct n-grams are divided by: all tokens (Li et al.) or all n-grams (the variant)
Per = Literal["token", "ngram"]


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def distinct_n(texts: Iterable[str], n: int, per: Per = "token") -> float | None:
    """Distinct n-grams across ``texts`` over all tokens (``per="token"``, Li et al.) or over
    all n-grams (``per="ngram"``), as a fraction."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if per not in ("token", "ngram"):
        raise ValueError(f"per must be 'token' or 'ngram', got {per!r}")
    tokens = total = 0
    seen: set[tuple[str, ...]] = set()
    for text in texts:
        words = tokenize(text)
        grams = ngrams(words, n)
        tokens += len(words)
        total += len(grams)
        seen.update(grams)
    denominator = tokens if per == "token" else total
    return len(seen) / denominator if denominator else None


def distinct_percent(texts: list[str], per: Per = "token") -> dict[str, float | None]:
    """``{"distinct-1": %, "distinct-2": %}`` as Zhou et al. report them (percent, 2 decimals)."""
    out: dict[str, float | None] = {}
    for n in (1, 2):
        value = distinct_n(texts, n, per)
        out[f"distinct-{n}"] = None if value is None else round(100 * value, 2)
    return out
