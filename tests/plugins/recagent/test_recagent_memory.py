"""RecAgent's memory tiers (plugins/recagent/memory): sensory compression and importance,
short-term enhancement after K, long-term forgetting g(M) and reading top-N + all short-term."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from recagent_support import T0, make_ctx, run
from townsquare.api import EmbeddingCache, Memory, MemoryRecord, agent_memory
from townsquare.plugins.recagent.memory import forgetting
from townsquare.plugins.recagent.memory.long_term_memory import LongTermMemory, LongTermMemoryConfig
from townsquare.plugins.recagent.memory.sensory_memory import SensoryMemory, SensoryMemoryConfig
from townsquare.plugins.recagent.memory.enhancement import calibrate, calibration_pairs, youden_cut
from townsquare.plugins.recagent.memory.short_term_memory import ENHANCE_COSINE, ShortTermMemory, ShortTermMemoryConfig
from townsquare.plugins.embedders.hash import HashEmbedder

SENSORY_RULES = {
    "Heat": '{"sentence": "Ada watched Heat and loved the bank heist.", "importance": 8}',
    "enters": '{"sentence": "Ada entered the recommender system.", "importance": 2}',
}


# ---------------------------------------------------------------- g(M)


def test_g_of_the_paper_puts_the_power_on_recency():
    # g = 1 - (s + r)/2 * max(r^beta, delta), s importance, r recency.
    # s = 0.8, r = 0.5, beta = 2, delta = 0.1: max(0.25, 0.1) = 0.25; g = 1 - 0.65 * 0.25 = 0.8375
    assert forgetting.g_value(0.8, 0.5, 2.0, 0.1) == pytest.approx(0.8375)
    # an old record (r = 0.1): r^2 = 0.01 < delta, the floor keeps its importance in play:
    # important g = 1 - 0.5 * 0.1 = 0.95, trivial g = 1 - 0.1 * 0.1 = 0.99
    assert forgetting.g_value(0.9, 0.1, 2.0, 0.1) == pytest.approx(0.95)
    assert forgetting.g_value(0.1, 0.1, 2.0, 0.1) == pytest.approx(0.99)
    # a fresh trivial record (r = 0.9): 1 - 0.5 * 0.81 = 0.595, far less likely to go than an old one
    assert forgetting.g_value(0.1, 0.9, 2.0, 0.1) == pytest.approx(0.595)
    # delta -> 1 leaves the mean of recency and importance: g = 1 - (0.5 + 0.2)/2 = 0.65
    assert forgetting.g_value(0.2, 0.5, 2.0, 0.999999) == pytest.approx(0.65, abs=1e-6)
    # the reference code's values: importance 0.4, recency 0.9, beta 1.5, delta 0.01
    assert forgetting.g_value(0.4, 0.9, 1.5, 0.01) == pytest.approx(1 - 0.65 * 0.9 ** 1.5)
    # the power acts on recency, not importance: swapping the two changes g
    assert forgetting.g_value(0.9, 0.3, 3.0, 0.01) == pytest.approx(1 - 0.6 * 0.027)
    assert forgetting.g_value(0.3, 0.9, 3.0, 0.01) == pytest.approx(1 - 0.6 * 0.729)


def test_recency_importance_normalisation_and_probabilities():
    assert forgetting.power_recency(np.array([0.0, 24.0, 72.0]), 24.0) == pytest.approx([1 - forgetting.EPS, 0.5, 0.25])
    assert forgetting.exponential_recency(np.array([10.0]), 0.01) == pytest.approx([0.99 ** 10])
    assert forgetting.normalised_importance(np.array([8.0, 0.0])) == pytest.approx([0.8, forgetting.EPS])
    assert forgetting.forget_probabilities(np.array([0.2, 0.6]), 1.0) == pytest.approx([0.25, 0.75])
    assert forgetting.forget_probabilities(np.array([0.2, 0.6]), 2.0) == pytest.approx([0.5, 1.0])


@pytest.mark.parametrize("mode,beta,delta", [("power", 3.0, 0.1), ("reference", 1.5, 0.01)])
def test_each_mode_forgets_on_recency_with_its_own_values(mode, beta, delta):
    memory = LongTermMemory(LongTermMemoryConfig(mode=mode))
    assert memory.beta_delta == (beta, delta)
    hours = [1.0, 24.0, 24.0 * 7, 24.0 * 60]
    memory.store.records = [MemoryRecord(f"{h}h", importance=5, created=T0, last_access=T0 - timedelta(hours=h), id=f"r{h}")
                            for h in hours]
    g = memory.forget_values(T0)
    recency = memory.recency(T0)
    assert g == pytest.approx([1 - (0.5 + r) / 2 * max(r ** beta, delta) for r in recency])
    assert list(g) == sorted(g) and g[0] < g[-1]  # equal importance: the older, the likelier to go
    if mode == "power":  # recency 1 / (1 + h / 24): 0.96, 0.5, 0.125, 0.0164
        assert recency == pytest.approx([24 / 25, 0.5, 0.125, 1 / 61])
    else:  # 0.99 ** h
        assert recency == pytest.approx([0.99, 0.99 ** 24, 0.99 ** 168, 0.99 ** 1440], rel=1e-6, abs=2e-3)
    # equal recency: the more important, the less likely to go
    memory.store.records = [MemoryRecord("a", importance=9, created=T0, last_access=T0, id="a"),
                            MemoryRecord("b", importance=2, created=T0, last_access=T0, id="b")]
    low, high = memory.forget_values(T0 + timedelta(hours=30))
    assert low < high
    # explicit settings win over the mode's defaults
    assert LongTermMemory(LongTermMemoryConfig(mode=mode, beta=2.0, delta=0.2)).beta_delta == (2.0, 0.2)


def test_long_term_forget_values_follow_the_records():
    memory = LongTermMemory(LongTermMemoryConfig(beta=2.0, delta=0.1, recency_hours=24.0))
    memory.store.records = [
        MemoryRecord("old and important", importance=8, created=T0, last_access=T0, id="a"),
        MemoryRecord("old and trivial", importance=2, created=T0, last_access=T0, id="b"),
    ]
    g = memory.forget_values(T0 + timedelta(hours=24))  # recency 0.5 for both: max(0.25, 0.1) = 0.25
    assert g == pytest.approx([1 - 0.65 * 0.25, 1 - 0.35 * 0.25])


def test_forgetting_drops_the_unimportant_old_records_more_often():
    config = LongTermMemoryConfig(beta=2.0, delta=0.1, min_records=0, forget_per_pass=1.0)
    kept = {"fresh": 0, "stale": 0}
    for seed in range(200):
        memory = LongTermMemory(config)
        memory.store.records = [
            MemoryRecord("fresh", importance=9, created=T0, last_access=T0 + timedelta(hours=47), id="fresh"),
            MemoryRecord("stale", importance=1, created=T0, last_access=T0, id="stale"),
        ]
        memory.forget(T0 + timedelta(hours=48), np.random.default_rng(seed))
        for r in memory.store.records:
            kept[r.id] += 1
    # g(fresh) = 1 - (0.9+0.96)/2*0.96^2 ~ 0.14, g(stale) = 1 - (0.1+0.333)/2*0.111 ~ 0.98: p ~ 0.13 / 0.87
    assert kept["fresh"] > 150 and kept["stale"] < 50


def test_no_forgetting_at_or_below_min_records_or_in_mode_none():
    memory = LongTermMemory(LongTermMemoryConfig(min_records=2, forget_per_pass=5))
    memory.store.records = [MemoryRecord(f"m{i}", importance=1, created=T0, id=f"m{i}") for i in range(2)]
    assert memory.forget(T0 + timedelta(days=30), np.random.default_rng(0)) == []
    memory = LongTermMemory(LongTermMemoryConfig(mode="none", min_records=0, forget_per_pass=5))
    memory.store.records = [MemoryRecord("m", importance=1, created=T0, id="m")]
    assert memory.forget(T0 + timedelta(days=30), np.random.default_rng(0)) == []


def test_reference_mode_spares_recent_records():
    memory = LongTermMemory(LongTermMemoryConfig(mode="reference", min_records=0, forget_per_pass=50, spare_hours=24))
    memory.store.records = [MemoryRecord("recent", importance=1, created=T0, last_access=T0 + timedelta(hours=40), id="r"),
                            MemoryRecord("old", importance=1, created=T0, last_access=T0, id="o")]
    memory.forget(T0 + timedelta(hours=48), np.random.default_rng(0))
    assert [r.id for r in memory.store.records] == ["r"]


# ---------------------------------------------------------------- sensory


def test_sensory_compresses_scores_and_passes_on_only_item_content():
    ctx = make_ctx(rules=SENSORY_RULES)
    memory = SensoryMemory()
    out = run(memory.remember(ctx, [MemoryRecord("Ada watched the movie <Heat> and said: so tense!"),
                                    MemoryRecord("Ada enters the recommender system.")]))
    # importance 2 < 7 (the reference code's cut): entering the system stays in the sensory buffer
    assert [(r.text, r.importance, r.created) for r in out] == [("Ada watched Heat and loved the bank heist.", 8.0, T0)]
    assert [r.importance for r in memory.store.records] == [8.0, 2.0]
    assert out[0].meta["observation"].startswith("Ada watched the movie")
    assert run(memory.recall(ctx, "Heat", 5)) == [] and memory.since(None) == []
    everything = SensoryMemory(SensoryMemoryConfig(discard_below=0))
    assert len(run(everything.remember(ctx, [MemoryRecord("Ada enters the recommender system.")]))) == 1


def test_sensory_falls_back_to_the_raw_observation_and_can_discard():
    ctx = make_ctx(rules={"Heat": "no json here", "enters": '{"sentence": "x", "importance": 2}'})
    memory = SensoryMemory(SensoryMemoryConfig(default_importance=4, discard_below=3))
    out = run(memory.remember(ctx, [MemoryRecord("watched <Heat>"), MemoryRecord("Ada enters")]))
    assert [(r.text, r.importance) for r in out] == [("watched <Heat>", 4.0)]  # importance 2 < 3: discarded
    assert [c.status for c in ctx.calls].count("parse_failure") == 1
    # an unusable answer is no judgement: the raw observation passes on even under the default cut of 7
    out = run(SensoryMemory(SensoryMemoryConfig(default_importance=3)).remember(ctx, [MemoryRecord("watched <Heat>")]))
    assert [(r.text, r.importance) for r in out] == [("watched <Heat>", 3.0)]


# ---------------------------------------------------------------- short-term


def test_enhancement_after_k_promotes_record_and_insights():
    memory = ShortTermMemory(ShortTermMemoryConfig(enhance_k=2, similarity_threshold=0.5))
    ctx = make_ctx(rules={"insight": '{"insights": ["Ada is drawn to crime thrillers."]}'},
                   components={"memory.short_term": memory, "memory.long_term": LongTermMemory()})
    first = run(memory.remember(ctx, [MemoryRecord("Ada watched Heat", importance=6)]))
    other = run(memory.remember(ctx, [MemoryRecord("Ada cooked pasta", importance=3)]))
    second = run(memory.remember(ctx, [MemoryRecord("Ada talked about Heat with Bo", importance=7)]))
    assert first == other == second == []
    assert memory.count("st1") == 1 and memory.count("st2") == 0
    moved = run(memory.remember(ctx, [MemoryRecord("Ada rated Heat 9", importance=8)]))
    # st1 now enhanced twice (st3, st4): it and one insight move on; st3 was enhanced once (by st4)
    assert [(r.text, r.kind) for r in moved] == [("Ada watched Heat", "observation"), ("Ada is drawn to crime thrillers.", "insight")]
    assert moved[1].evidence == ("st1", "st3", "st4") and moved[1].importance == 8
    assert [r.id for r in memory.records] == ["st2", "st3", "st4"] and memory.count("st3") == 1


def test_records_below_the_threshold_enhance_nothing():
    ctx = make_ctx()
    # the reference code's cut sigmoid(cosine) >= 0.7 is cosine ln(7/3) = 0.847
    assert ENHANCE_COSINE == pytest.approx(0.847) and ShortTermMemoryConfig().similarity_threshold == "calibrated"
    memory = ShortTermMemory(ShortTermMemoryConfig(similarity_threshold=ENHANCE_COSINE, recent_bonus=0))
    # "heat jazz" has cosine 1/sqrt(2) ~ 0.707 with "heat": below 0.847
    assert run(memory.remember(ctx, [MemoryRecord("heat"), MemoryRecord("heat jazz")])) == []
    assert memory.count("st1") == 0
    loose = ShortTermMemory(ShortTermMemoryConfig(enhance_k=5, similarity_threshold=0.7, recent_bonus=0))
    run(loose.remember(ctx, [MemoryRecord("heat"), MemoryRecord("heat jazz")]))
    assert loose.count("st1") == 1
    with pytest.raises(ValueError):
        ShortTermMemoryConfig(similarity_threshold=1.2)


def test_the_latest_record_gets_the_recent_bonus():
    # cosine("heat", "heat jazz") = 0.707; + 0.1 for the latest record = 0.807 > 0.75; 0.707 alone is not
    ctx = make_ctx()
    memory = ShortTermMemory(ShortTermMemoryConfig(enhance_k=5, similarity_threshold=0.75))
    run(memory.remember(ctx, [MemoryRecord("heat"), MemoryRecord("heat jazz")]))
    assert memory.count("st1") == 1 and memory.enhancements == {"observation": 1, "retrieval": 0}
    run(memory.remember(ctx, [MemoryRecord("cooking"), MemoryRecord("heat cooking")]))
    # "heat cooking": 0.707 with "heat" (not the latest: no bonus), 0.707 + 0.1 with "cooking" (the latest)
    assert memory.count("st1") == 1 and memory.count("st3") == 1
    plain = ShortTermMemory(ShortTermMemoryConfig(enhance_k=5, similarity_threshold=0.75, recent_bonus=0))
    run(plain.remember(ctx, [MemoryRecord("heat"), MemoryRecord("heat jazz")]))
    assert plain.count("st1") == 0


def test_records_read_from_long_term_memory_re_enter_and_enhance():
    """The retrieval route: a long-term record read for an observation enhances the short-term
    records it resembles (once per pair), is not stored there, and what it promotes is written
    to long-term memory with its insight."""
    long_term = LongTermMemory(LongTermMemoryConfig(top_n=1, min_records=100))
    short_term = ShortTermMemory(ShortTermMemoryConfig(enhance_k=2, similarity_threshold=0.9, recent_bonus=0))
    # the insight is answered only to a prompt that lists the long-term record among the memories
    ctx = make_ctx(rules={"- heat long ago": '{"insights": ["Ada keeps coming back to heat."]}'},
                   components={"memory.short_term": short_term, "memory.long_term": long_term})
    run(long_term.remember(ctx, [MemoryRecord("heat long ago", importance=8), MemoryRecord("jazz long ago", importance=8)]))
    run(short_term.remember(ctx, [MemoryRecord("heat a", importance=7), MemoryRecord("cooking b", importance=7)]))
    assert short_term.count("st1") == 0  # "heat a" and "cooking b" are orthogonal
    found = run(agent_memory(ctx.agent).recall(ctx, "heat", 5))
    assert [r.text for r in found] == ["heat long ago", "heat a", "cooking b"]
    assert short_term.enhancers == {"st1": ["lt1"]} and short_term.enhancements == {"observation": 0, "retrieval": 1}
    run(agent_memory(ctx.agent).recall(ctx, "heat", 5))  # the same record again: no second label
    assert short_term.count("st1") == 1 and len(short_term.records) == 2
    run(agent_memory(ctx.agent).remember(ctx, [MemoryRecord("heat c", importance=6)]))  # the second enhancement: K = 2
    assert [r.text for r in short_term.records] == ["cooking b", "heat c"]
    assert [(r.text, r.kind) for r in long_term.records[2:]] == [("heat a", "observation"), ("Ada keeps coming back to heat.", "insight")]
    assert long_term.records[3].evidence == ("st1", "lt1", "st3")
    off = ShortTermMemory(ShortTermMemoryConfig(enhance_k=2, similarity_threshold=0.9, retrieval_enhances=False))
    run(off.remember(ctx, [MemoryRecord("heat a")]))
    assert run(off.reenter(ctx, long_term.records)) == [] and off.count("st1") == 0


def test_without_a_long_term_tier_nothing_is_promoted():
    memory = ShortTermMemory(ShortTermMemoryConfig(enhance_k=1, similarity_threshold=0.5))
    ctx = make_ctx(components={"memory.short_term": memory})
    assert run(memory.remember(ctx, [MemoryRecord("heat a"), MemoryRecord("heat b")])) == []
    assert memory.count("st1") == 1 and memory.promoted == 0 and len(memory.records) == 2


def test_youden_cut_separates_paraphrases_from_unrelated_records():
    # observed values 0.3 0.5 0.6 0.7 0.8 0.9; J at the midpoints 0.4: 1 - 2/3, 0.55: 1 - 1/3,
    # 0.65: 2/3 - 1/3, 0.75: 2/3 - 0, 0.85: 1/3 - 0; the best J (2/3) twice: the higher cut, 0.75
    cut, above, false = youden_cut(np.array([0.9, 0.8, 0.6]), np.array([0.5, 0.7, 0.3]))
    assert (cut, above, false) == (pytest.approx(0.75), pytest.approx(2 / 3), 0.0)
    paraphrases, unrelated = calibration_pairs()
    assert len(paraphrases) == 4 * 8 * 6 and len(unrelated) == 4 * 28 * 4
    # the hashing embedder: every unrelated pair and every paraphrase pair lies below 0.847
    found = run(calibrate(HashEmbedder()))
    assert found.threshold == pytest.approx(0.371, abs=1e-3)
    assert found.paraphrases_above == pytest.approx(63 / 64) and found.unrelated_above == pytest.approx(107 / 448)
    assert found.paraphrases_above_reference == found.unrelated_above_reference == 0.0
    ctx = make_ctx()
    ctx.services.embedder = EmbeddingCache(HashEmbedder())
    assert run(ShortTermMemory().threshold(ctx)) == pytest.approx(0.371, abs=1e-3)


def test_short_term_capacity_drops_least_important_then_least_enhanced_oldest():
    ctx = make_ctx()
    memory = ShortTermMemory(ShortTermMemoryConfig(capacity=2, enhance_k=5, similarity_threshold=0.5))
    run(memory.remember(ctx, [MemoryRecord("cooking a", importance=5), MemoryRecord("jazz b", importance=5),
                              MemoryRecord("cooking c", importance=5)]))
    assert [r.text for r in memory.records] == ["cooking a", "cooking c"]  # equal importance: "cooking a" was enhanced
    memory = ShortTermMemory(ShortTermMemoryConfig(capacity=2, enhance_k=5, similarity_threshold=0.5))
    run(memory.remember(ctx, [MemoryRecord("cooking a", importance=3), MemoryRecord("jazz b", importance=9),
                              MemoryRecord("cooking c", importance=4)]))
    assert [r.text for r in memory.records] == ["jazz b", "cooking c"]  # the least important goes, enhanced or not


# ---------------------------------------------------------------- reading and the chain


def test_reading_is_top_n_long_term_plus_all_short_term():
    long_term = LongTermMemory(LongTermMemoryConfig(top_n=2, min_records=100))
    short_term = ShortTermMemory(ShortTermMemoryConfig(similarity_threshold=0.99, enhance_k=9))
    ctx = make_ctx(components={"memory.short_term": short_term, "memory.long_term": long_term})
    run(long_term.remember(ctx, [MemoryRecord("heat one"), MemoryRecord("jazz two"), MemoryRecord("heat three"),
                                 MemoryRecord("cooking four")]))
    run(short_term.remember(ctx, [MemoryRecord("jazz now"), MemoryRecord("cooking now"), MemoryRecord("other now")]))
    later = replace(ctx, now=T0 + timedelta(hours=5))
    found = run(agent_memory(ctx.agent).recall(later, "heat", 10))
    assert [r.text for r in found] == ["heat one", "heat three", "jazz now", "cooking now", "other now"]
    assert all(r.last_access == later.now for r in found[:2])
    assert long_term.records[1].last_access == T0  # not read


def test_long_term_reading_ranks_by_relevance_and_importance():
    ctx = make_ctx()
    memory = LongTermMemory(LongTermMemoryConfig(top_n=2, min_records=100))
    run(memory.remember(ctx, [MemoryRecord("heat dull", importance=2), MemoryRecord("jazz big", importance=10),
                              MemoryRecord("heat big", importance=9), MemoryRecord("cooking", importance=1)]))
    # relevance to "heat": 1, 0, 1, 0; + importance / 10: 1.2, 1.0, 1.9, 0.1
    assert [r.text for r in run(memory.recall(ctx, "heat", 5))] == ["heat big", "heat dull"]
    assert memory.reading_scores(np.array([1.0, 0.0, 1.0, 0.0]), T0) == pytest.approx([1.2, 1.0, 1.9, 0.1])
    # relevance only: the first of the equally relevant records
    plain = LongTermMemory(LongTermMemoryConfig(top_n=1, min_records=100, recall_importance=0))
    run(plain.remember(ctx, [MemoryRecord("heat dull", importance=2), MemoryRecord("heat big", importance=9)]))
    assert [r.text for r in run(plain.recall(ctx, "heat", 5))] == ["heat dull"]
    # with recency: a record read an hour ago outranks an equally relevant one read two days ago
    timed = LongTermMemory(LongTermMemoryConfig(top_n=1, min_records=100, recall_importance=0, recall_recency=1.0))
    timed.store.records = [MemoryRecord("heat old", created=T0, last_access=T0 - timedelta(hours=48), id="a"),
                           MemoryRecord("heat new", created=T0, last_access=T0 - timedelta(hours=1), id="b")]
    assert [r.text for r in run(timed.recall(ctx, "heat", 5))] == ["heat new"]


def test_records_flow_sensory_short_long_and_ablations_skip_a_tier():
    rules = {"high-level insight": '{"insights": ["Ada loves heist films."]}', **SENSORY_RULES}
    tiers = {"memory.sensory": SensoryMemory(), "memory.short_term": ShortTermMemory(ShortTermMemoryConfig(enhance_k=1, similarity_threshold=0.5)),
             "memory.long_term": LongTermMemory()}
    assert all(isinstance(t, Memory) for t in tiers.values())
    ctx = make_ctx(rules=rules, components=tiers)
    chain = agent_memory(ctx.agent)
    run(chain.remember(ctx, [MemoryRecord("Ada watched <Heat>")]))
    run(chain.remember(ctx, [MemoryRecord("Ada watched <Heat> again")]))
    assert [r.text for r in tiers["memory.long_term"].records] == ["Ada watched Heat and loved the bank heist.", "Ada loves heist films."]
    # w/o short: sensory records go straight to long-term memory
    no_short = {"memory.sensory": SensoryMemory(), "memory.long_term": LongTermMemory()}
    ctx = make_ctx(rules=rules, components=no_short)
    run(agent_memory(ctx.agent).remember(ctx, [MemoryRecord("Ada enters"), MemoryRecord("Ada watched <Heat>")]))
    assert [r.text for r in no_short["memory.long_term"].records] == ["Ada watched Heat and loved the bank heist."]


def test_reflection_adds_insights_and_merges_duplicates():
    ctx = make_ctx(rules={"high-level insights": '{"insights": ["Ada loves heat films", "Ada loves heat films too"]}'})
    memory = LongTermMemory(LongTermMemoryConfig(reflect_importance=10, merge_threshold=0.95, min_records=100))
    run(memory.remember(ctx, [MemoryRecord("jazz night", importance=6), MemoryRecord("cooking class", importance=3)]))
    assert run(memory.reflect(ctx)) == []  # 9 < 10
    run(memory.remember(ctx, [MemoryRecord("watched heat", importance=5)]))
    added = run(memory.reflect(ctx))
    # both insights are about "heat", as is "watched heat": the three merge into the oldest
    assert [r.text for r in memory.records] == ["jazz night", "cooking class", "watched heat"]
    assert added == [] and memory.merged == 2 and memory.reflections == 1
    assert memory.records[2].importance == 6 and len(memory.records[2].evidence) == 5


def test_state_round_trips_and_vectors_are_rebuilt():
    ctx = make_ctx()
    memory = ShortTermMemory(ShortTermMemoryConfig(enhance_k=5, similarity_threshold=0.5))
    run(memory.remember(ctx, [MemoryRecord("heat a"), MemoryRecord("heat b")]))
    state = memory.get_state()
    assert [r["text"] for r in state["records"]] == ["heat a", "heat b"]
    copy = ShortTermMemory(ShortTermMemoryConfig(enhance_k=5, similarity_threshold=0.5))
    copy.set_state(state)
    run(copy.remember(ctx, [MemoryRecord("heat c")]))
    assert copy.count("st1") == 2 and copy.get_state()["counter"] == 3
    long_term = LongTermMemory()
    run(long_term.remember(ctx, [MemoryRecord("jazz")]))
    again = LongTermMemory()
    again.set_state(long_term.get_state())
    assert again.get_state() == long_term.get_state()


def test_in_a_run_routine_events_stay_out_and_watches_stay_in(run_scenario, make_plugins):
    """Importance at work in a whole run (the oracle scores by the prompt's scale): entering and
    leaving never pass sensory memory, watches do and are still remembered at the end."""
    import sqlite3
    from pathlib import Path

    examples = Path(__file__).resolve().parents[3] / "examples"
    plugins = make_plugins(enable=["townsquare.testing.oracle"])
    run_dir, _ = run_scenario(examples / "conformity.toml", plugins=plugins, overrides=["rounds=6", "llm.name=oracle"])
    _, state = run_dir.latest_checkpoint()
    kept = [r["text"] for a in state["agents"].values() for slot in ("memory.short_term", "memory.long_term")
            for r in a["components"][slot]["records"]]
    assert kept and not [t for t in kept if " enters the recommender system" in t or " leaves the recommender system" in t]
    sensed = [r for a in state["agents"].values() for r in a["components"]["memory.sensory"]["records"]]
    assert any(r["importance"] < 7 for r in sensed)  # routine observations were scored low and stopped there
    db = sqlite3.connect(run_dir.events_path)
    watches = db.execute("SELECT agent_id, json_extract(detail, '$.title') FROM actions WHERE kind = 'watch'").fetchall()
    remembered = [1 for agent, title in watches
                  if any(f"<{title}>" in r["text"] for slot in ("memory.short_term", "memory.long_term")
                         for r in state["agents"][agent]["components"][slot]["records"])]
    assert watches and len(remembered) >= 0.8 * len(watches)


def long_term_counts(run_dir) -> tuple[int, int, int, int]:
    """(long-term records, forgotten, records read since written, reflection rows of long-term memory)."""
    import sqlite3

    _, state = run_dir.latest_checkpoint()
    tiers = [a["components"].get("memory.long_term") or {} for a in state["agents"].values()]
    db = sqlite3.connect(run_dir.events_path)
    try:
        rows = db.execute("SELECT COUNT(*) FROM reflections WHERE source = 'long_term_memory' AND kind = 'reflection'").fetchone()[0]
    finally:
        db.close()
    records = [r for t in tiers for r in t.get("records", [])]
    return len(records), sum(t.get("forgotten", 0) for t in tiers), sum(r["last_access"] != r["created"] for r in records), rows


def test_in_a_run_long_term_memory_fills_forgets_is_read_and_reflects(run_scenario, make_plugins):
    """Every stage of long-term memory runs in an ordinary run (the oracle, the hashing embedder,
    the calibrated cut): records are promoted into it, read (which marks them), forgotten and
    reflected on; without the long-term tier there are none of either."""
    from pathlib import Path

    examples = Path(__file__).resolve().parents[3] / "examples"
    options = dict(overrides=["rounds=6", "llm.name=oracle", "plugins.long_term_memory.min_records=5"])
    run_dir, _ = run_scenario(examples / "conformity.toml", plugins=make_plugins(enable=["townsquare.testing.oracle"]), **options)
    records, forgotten, read, reflections = long_term_counts(run_dir)
    assert records > 20 and forgotten > 0 and read > 0 and reflections > 0
    ablated, _ = run_scenario(examples / "conformity.toml", plugins=make_plugins(enable=["townsquare.testing.oracle"],
                                                                                  disable=["long_term_memory"]), **options)
    assert long_term_counts(ablated) == (0, 0, 0, 0)


def test_the_memory_benchmark_prints_the_tiers_round_by_round(tmp_path):
    """benchmarks/recagent_memory.py: per round the promotions (by route), long-term records,
    forgettings and reflections; with -p no:long_term_memory none of them."""
    import argparse
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("recagent_memory_benchmark", root / "benchmarks" / "recagent_memory.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    args = argparse.Namespace(rounds=5, mode="power", threshold="calibrated", embedder="hash", seed=7)
    scenario = root / "examples" / "conformity.toml"
    rows = bench.per_round(bench.run_once(scenario, args, tmp_path / "full"))
    assert [r["round"] for r in rows] == [0, 1, 2, 3, 4]  # every round's checkpoint is kept
    assert all(a[k] <= b[k] for a, b in zip(rows, rows[1:]) for k in ("promoted", "by_observation", "by_retrieval", "reflections"))
    assert rows[-1]["promoted"] == sum(r["new_promoted"] for r in rows) > 0
    assert rows[-1]["long_term_records"] > 0 and rows[-1]["by_retrieval"] > 0 and rows[-1]["reflections"] > 0
    ablated = bench.tier_counts(bench.latest_state(bench.run_once(scenario, args, tmp_path / "ablated", ablate=True)))
    assert (ablated["promoted"], ablated["long_term_records"], ablated["reflections"], ablated["forgotten"]) == (0, 0, 0, 0)
