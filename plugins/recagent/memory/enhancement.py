"""When a record enhances a short-term record (Wang et al., "Memory Module", short-term memory):
the similarity cut, its calibration to an embedder, and the reference code's recency bonus.
Not a plugin: :mod:`.short_term_memory` uses it.

The paper enhances a short-term record M_i by a new record when "the similarity is higher than
a predefined threshold" and gives no value. The reference code enhances when
sigmoid(cosine) >= 0.7, i.e. cosine > ln(0.7 / 0.3) = 0.847 (:data:`REFERENCE_COSINE`), with
OpenAI's embeddings. A cosine cut means different things for different embedders (MiniLM gives
0.64-0.76 between two watch records of different movies; the hashing embedder less), so the
threshold is a setting that takes either a number or ``"calibrated"``:

**Calibration** (:func:`calibrate`): the embedder embeds a fixed set of records written in the
shape sensory memory passes on (:func:`calibration_pairs`): *paraphrase* pairs, the same
experience told two ways (a watch with its rating, the post about it, a chat line about it),
and *unrelated* pairs, the same person's records of different movies, in the same or another
wording. The threshold is the cut that best separates the two distributions by Youden's J
(the share of paraphrase pairs above the cut minus the share of unrelated pairs above it,
maximised over the observed similarities; among equal J the higher cut): the standard choice
for a cut between two classes, with no target rate to pick. The result states the share of
each kind above the cut, so a reader sees how well the embedder separates them at all.

**Recency bonus** (:data:`REFERENCE_RECENT_BONUS`): the reference code adds 0.1 to the
similarity between a new record and the *latest* short-term record before the cut (its comment
calls it the primacy effect), so a record is readily enhanced by what follows it directly. The
paper does not mention it; it is the setting ``recent_bonus`` (0.1; 0 turns it off).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

#: the reference code's cut, sigmoid(cosine) >= 0.7, as a cosine: ln(0.7 / 0.3)
REFERENCE_COSINE = round(math.log(0.7 / 0.3), 3)
#: the reference code's bonus on the similarity to the latest short-term record
REFERENCE_RECENT_BONUS = 0.1

#: people, movies and the ways one experience is told: our own words, in the shape of the
#: records sensory memory passes on (one sentence naming the person, the movie and an opinion)
PEOPLE = ("Ada Reyes", "Bo Chen", "Carla Diaz", "Dev Patel")
MOVIES = (("Heat", "a tense crime story"), ("Toy Story", "a warm animated comedy"), ("Alien", "a frightening space horror"),
          ("Notting Hill", "a gentle romantic comedy"), ("Fargo", "a dark crime drama"), ("The Matrix", "a clever action film"),
          ("Titanic", "a sweeping romance"), ("Jumanji", "a playful fantasy adventure"))
WORDINGS = (
    "{p} watched <{m}> and felt: it was {d}, worth it. {p} rated it {s}/10.",
    "{p} posted to friends: My take on <{m}>: {s}/10.",
    "{p} chatted with a friend: [{p}]: I would give <{m}> {s}/10, {d}.",
    "{p} thinks <{m}> is {d} and scores it {s} out of 10.",
)


def calibration_pairs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(paraphrase pairs, unrelated pairs): every two wordings of one person's experience of one
    movie; every two records of one person about different movies (any two wordings)."""
    paraphrases, unrelated = [], []
    for n, person in enumerate(PEOPLE):
        told = {}
        for m, (movie, description) in enumerate(MOVIES):
            score = 3 + (n + 2 * m) % 7
            told[m] = [w.format(p=person, m=movie, d=description, s=score) for w in WORDINGS]
            paraphrases += list(combinations(told[m], 2))
        for a, b in combinations(sorted(told), 2):
            unrelated += [(told[a][i], told[b][(i + n) % len(WORDINGS)]) for i in range(len(WORDINGS))]
    return paraphrases, unrelated


def youden_cut(related: np.ndarray, unrelated: np.ndarray) -> tuple[float, float, float]:
    """(cut, share of ``related`` above it, share of ``unrelated`` above it) with the largest
    J = share related above - share unrelated above; "above" is strictly greater, the cut is the
    midpoint between an observed similarity and the next higher one (or just below the lowest)."""
    related, unrelated = np.asarray(related, float), np.asarray(unrelated, float)
    values = np.unique(np.concatenate([related, unrelated]))
    cuts = np.concatenate([[values[0] - 1e-6], (values[:-1] + values[1:]) / 2])
    tpr = (related[None, :] > cuts[:, None]).mean(axis=1)
    fpr = (unrelated[None, :] > cuts[:, None]).mean(axis=1)
    j = np.round(tpr - fpr, 12)
    best = int(np.flatnonzero(j == j.max())[-1])  # the highest cut among equals
    return float(cuts[best]), float(tpr[best]), float(fpr[best])


@dataclass(frozen=True)
class Calibration:
    threshold: float
    paraphrases_above: float
    unrelated_above: float
    paraphrase_median: float
    unrelated_median: float
    paraphrases_above_reference: float
    unrelated_above_reference: float

    def line(self) -> str:
        return (f"cut {self.threshold:.3f} (Youden's J): paraphrases above {self.paraphrases_above:.0%}, unrelated above "
                f"{self.unrelated_above:.0%}; medians {self.paraphrase_median:.3f} / {self.unrelated_median:.3f}; at the "
                f"reference {REFERENCE_COSINE}: {self.paraphrases_above_reference:.0%} / {self.unrelated_above_reference:.0%}")


async def pair_similarities(embedder: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    index = {t: i for i, t in enumerate(texts)}
    matrix = np.asarray(await embedder.embed(texts), dtype=float)
    matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return np.array([matrix[index[a]] @ matrix[index[b]] for a, b in pairs])


_CALIBRATED: "weakref.WeakKeyDictionary[Any, Calibration]" = weakref.WeakKeyDictionary()


async def calibrate(embedder: Any) -> Calibration:
    """The embedder's Youden cut on :func:`calibration_pairs` (computed once per embedder)."""
    try:
        return _CALIBRATED[embedder]
    except (KeyError, TypeError):
        pass
    paraphrases, unrelated = calibration_pairs()
    related, other = await pair_similarities(embedder, paraphrases), await pair_similarities(embedder, unrelated)
    cut, above, false = youden_cut(related, other)
    found = Calibration(round(cut, 4), above, false, float(np.median(related)), float(np.median(other)),
                        float((related > REFERENCE_COSINE).mean()), float((other > REFERENCE_COSINE).mean()))
    try:
        _CALIBRATED[embedder] = found
    except TypeError:
        pass
    return found
