"""Park et al.'s retrieval score (§4.1) with hand-computed values, and the reference code's
variant (0.99 per rank, oldest first; weights recency 0.5, relevance 3, importance 2)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from ga_support import T0
from townsquare.api import MemoryRecord, MemoryRetrieval
from townsquare.plugins.generative_agents.memory.park_retrieval import ParkRetrieval, ParkRetrievalConfig, min_max

NOW = T0 + timedelta(hours=100)
#: last accessed 0 h, 10 h and 100 h before NOW; importance 2, 5, 8; cosine 0.1, 0.5, 0.3
RECORDS = [
    MemoryRecord("fresh", importance=2, last_access=NOW),
    MemoryRecord("ten hours", importance=5, last_access=NOW - timedelta(hours=10)),
    MemoryRecord("hundred hours", importance=8, last_access=NOW - timedelta(hours=100)),
]
RELEVANCE = np.array([0.1, 0.5, 0.3])


def test_min_max_and_the_constant_case():
    assert min_max(np.array([2.0, 5.0, 8.0])).tolist() == [0.0, 0.5, 1.0]
    assert min_max(np.array([3.0, 3.0])).tolist() == [0.5, 0.5]


def test_paper_score_by_hand():
    scorer = ParkRetrieval()
    assert isinstance(scorer, MemoryRetrieval)
    assert scorer.decay == 0.995 and scorer.weights == (1.0, 1.0, 1.0)
    # recency: 0.995**0 = 1, 0.995**10 = 0.9511101, 0.995**100 = 0.6057704
    # normalised: 1, (0.9511101 - 0.6057704) / (1 - 0.6057704) = 0.8759859, 0
    parts = scorer.components(RECORDS, RELEVANCE, NOW)
    assert parts["recency"] == pytest.approx([1.0, 0.8759859, 0.0], abs=1e-6)
    assert parts["importance"].tolist() == [0.0, 0.5, 1.0]
    assert parts["relevance"] == pytest.approx([0.0, 1.0, 0.5])
    # sums: 1 + 0 + 0; 0.8759859 + 0.5 + 1; 0 + 1 + 0.5
    assert scorer.score(RECORDS, RELEVANCE, NOW) == pytest.approx([1.0, 2.3759859, 1.5], abs=1e-6)


def test_reference_code_variant_by_hand():
    scorer = ParkRetrieval(ParkRetrievalConfig(mode="reference_code"))
    # ranks by last access oldest first: hundred hours 0.99**1, ten hours 0.99**2, fresh 0.99**3
    # normalised: 1, (0.9801 - 0.970299) / (0.99 - 0.970299) = 0.4974874, 0
    parts = scorer.components(RECORDS, RELEVANCE, NOW)
    assert parts["recency"] == pytest.approx([0.0, 0.4974874, 1.0], abs=1e-6)
    # 0.5 * recency + 2 * importance + 3 * relevance
    assert scorer.score(RECORDS, RELEVANCE, NOW) == pytest.approx([0.0, 0.2487437 + 1.0 + 3.0, 0.5 + 2.0 + 1.5], abs=1e-6)


def test_settings_override_the_mode():
    scorer = ParkRetrieval(ParkRetrievalConfig(recency_decay=0.5, relevance_weight=0.0, importance_weight=2.0))
    # recency 1, 0.5**10, 0.5**100 -> normalised 1, 0.0009766, 0
    assert scorer.score(RECORDS, RELEVANCE, NOW) == pytest.approx([1.0, 0.0009766 + 1.0, 2.0], abs=1e-6)


def test_a_record_never_accessed_counts_from_its_creation():
    record = MemoryRecord("old", importance=1, created=NOW - timedelta(hours=1))
    other = MemoryRecord("new", importance=1, created=NOW)
    recency = ParkRetrieval().components([record, other], np.array([0.0, 0.0]), NOW)["recency"]
    assert recency.tolist() == [0.0, 1.0]


def test_reference_code_mode_takes_each_personas_own_decay():
    from types import SimpleNamespace

    from townsquare.api import Persona
    from townsquare.plugins.generative_agents.memory.park_retrieval import build_park_retrieval

    def built(mode, decay=None, **settings):
        fields = {} if decay is None else {"recency_decay": decay}
        ctx = SimpleNamespace(agent=SimpleNamespace(persona=Persona("Maria Lopez", [], fields)))
        return build_park_retrieval(ParkRetrievalConfig(mode=mode, **settings), ctx)

    # every agent of the 25-agent base carries 0.995; the reference code reads it from the seed
    assert built("reference_code", 0.995).decay == 0.995 and built("reference_code").decay == 0.99
    reference = built("reference_code", 0.995)
    # ranks 1, 2, 3 by last access, oldest first: 0.995 ** 3, 0.995 ** 2, 0.995 ** 1 for fresh, ten hours, hundred
    access = np.array([0.0, -10.0, -100.0])
    assert reference.recency(access, NOW).tolist() == pytest.approx([0.995 ** 3, 0.995 ** 2, 0.995])
    assert built("paper", 0.9).decay == 0.995  # the paper's value whatever the seed says
    assert built("reference_code", 0.995, recency_decay=0.98).decay == 0.98  # a setting wins
