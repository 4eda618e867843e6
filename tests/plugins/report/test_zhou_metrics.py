"""Zhou et al.'s metrics, each formula on known inputs: distinct-n per token (Li et al.), ΔBS on
known vectors, C.score from known judge answers, the Info / Cons / Hum grades parsed (with a
repair request), the stages and the groups of (agent, post) pairs."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

from townsquare.api import LLMClient, LLMResponse, Persona
from townsquare.plugins.report.pair_similarity import BertScoreSimilarity, EmbedderSimilarity, make_similarity
from townsquare.plugins.report.text_metrics import distinct_n, distinct_percent
from townsquare.plugins.report.zhou_judges import (LLMNLIJudge, QualityJudge, QualityParseError, TransformersNLIJudge, c_score,
                                                   evaluation_persona, judge_prompts, mean_grades, parse_quality)
from townsquare.plugins.report.zhou_metrics import ActionRow, RunData, Stage, groups, regular_populations, sample, stages_of, texts_by


class Replies:
    """An LLM handler answering from (pattern, replies) rules matched against the whole
    conversation (a repair request holds the first prompt); each rule's replies are used in
    turn (the last one repeats). Records every last message and purpose."""

    def __init__(self, rules: dict[str, list[str]]):
        self.rules = {re.compile(k, re.S): list(v) for k, v in rules.items()}
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, request):
        prompt = request.messages[-1].content
        self.seen.append((request.purpose, prompt))
        conversation = "\n".join(m.content for m in request.messages)
        for pattern, replies in self.rules.items():
            if pattern.search(conversation):
                return LLMResponse(text=replies.pop(0) if len(replies) > 1 else replies[0])
        raise AssertionError(f"no rule for {prompt[:80]!r}")


def client(rules: dict[str, list[str]]) -> tuple[LLMClient, Replies, list]:
    handler = Replies(rules)
    failures: list = []
    return LLMClient(handler, model="stub-judge", on_parse_failure=lambda request, answer, kind: failures.append(answer)), handler, failures


# --------------------------------------------------------------------------- distinct-n


def test_distinct_n_per_token_on_a_known_text():
    # "the cat sat on the mat ." -> 7 tokens: 6 distinct unigrams; 6 bigrams, all distinct
    text = ["The cat sat on the mat."]
    assert distinct_n(text, 1) == pytest.approx(6 / 7)
    assert distinct_n(text, 2) == pytest.approx(6 / 7)  # per token (Li et al.)
    assert distinct_n(text, 2, per="ngram") == pytest.approx(6 / 6)
    # two texts sharing a bigram: 14 tokens, 11 distinct bigrams... counted without crossing
    two = ["The cat sat.", "The cat ran away."]  # tokens 4 + 5 = 9; bigrams: the cat, cat sat, sat ., cat ran, ran away, away .
    assert distinct_n(two, 2) == pytest.approx(6 / 9)
    assert distinct_percent(two) == {"distinct-1": round(100 * 6 / 9, 2), "distinct-2": round(100 * 6 / 9, 2)}


# --------------------------------------------------------------------------- ΔBS


VECTORS = {"P": [1.0, 0.0], "near": [0.8, 0.6], "far": [0.0, 1.0], "half": [0.6, 0.8]}


def fake_embed(texts):
    return np.array([VECTORS[t] for t in texts])


def test_embedder_similarity_and_delta_bs_on_known_vectors():
    sim = EmbedderSimilarity(fake_embed, "fake")
    assert sim.name == "cosine of the run's embedder (fake)"
    assert sim.score([("P", "near"), ("P", "far"), ("P", "half"), ("near", "half")]).tolist() == pytest.approx([0.8, 0.0, 0.6, 0.96])
    acted = float(np.mean(sim.score([("P", "near"), ("P", "half")])))  # 0.7
    not_acted = float(np.mean(sim.score([("P", "far"), ("P", "half")])))  # 0.3
    row = ActionRow("stage 1", "like", 2, 2, bs_acted=acted, bs_not=not_acted, c_acted=0.5, c_not=-0.5)
    assert row.delta_bs == pytest.approx(0.4) and row.delta_c == pytest.approx(1.0)
    assert ActionRow("stage 1", "post", 3, 0, bs_acted=0.5).delta_bs is None
    assert sim.score([]).size == 0


def test_bertscore_backend_uses_f1_with_the_persona_as_reference():
    calls = []

    def scorer(candidates, references, **options):
        calls.append((candidates, references, options))
        return [0.1, 0.2], [0.3, 0.4], [0.91, 0.42]

    sim = BertScoreSimilarity("roberta-large", scorer=scorer)
    assert sim.score([("persona A", "post 1"), ("persona B", "post 2")]).tolist() == [0.91, 0.42]
    assert calls[0][:2] == (["post 1", "post 2"], ["persona A", "persona B"])
    assert calls[0][2]["model_type"] == "roberta-large" and sim.name == "BERTScore F1 (roberta-large)"


def test_similarity_choice(monkeypatch):
    import townsquare.plugins.report.pair_similarity as ps

    installed = ps.bert_score_available()
    monkeypatch.setattr(ps, "bert_score_available", lambda: False)
    assert isinstance(make_similarity("auto", lambda: (fake_embed, "fake")), EmbedderSimilarity)
    from townsquare.api import UsageError

    with pytest.raises(UsageError, match="--similarity 'bleu'"):
        make_similarity("bleu", lambda: (fake_embed, "fake"))
    if not installed:
        with pytest.raises(UsageError, match="needs the bert_score package"):
            make_similarity("bertscore", lambda: (fake_embed, "fake"))


# --------------------------------------------------------------------------- C.score


def test_c_score_from_labels():
    assert c_score(["entailment", "entailment", "neutral", "contradiction"]) == pytest.approx(0.25)
    assert c_score(["entailment", None, "contradiction", "contradiction"]) == pytest.approx(-1 / 3)  # unjudged left out
    assert c_score([None]) is None and c_score([]) is None


def test_llm_nli_judge_from_known_answers_with_one_repair():
    llm, handler, failures = client({
        "Text:\nI trained my puppy": ["entailment"],
        "Text:\nTax law": ["Contradiction."],
        "Text:\nWeather": ["hmm, hard to say", "neutral"],  # repaired
        "Text:\nNoise": ["???", "still unsure"],  # unreadable twice: unjudged
    })
    judge = LLMNLIJudge(llm, judge_prompts())
    pairs = [("Loves dogs", "I trained my puppy"), ("Loves dogs", "Tax law"), ("Loves dogs", "Weather"), ("Loves dogs", "Noise")]
    labels = asyncio.run(judge.labels(pairs))
    assert labels == ["entailment", "contradiction", "neutral", None]
    assert c_score(labels) == pytest.approx((1 - 1 + 0) / 3)
    assert judge.failures == 1 and failures == ["still unsure"]
    assert judge.name == "LLM NLI judge (stub-judge)"
    assert [p for p, _ in handler.seen].count("zhou.nli.repair") == 2
    assert "Profile:\nLoves dogs" in handler.seen[0][1]


def test_transformers_nli_labels_are_read_by_name():
    def pipeline(inputs, **options):
        return [{"label": label} for label in ("ENTAILMENT", "neutral", "CONTRADICTION", "LABEL_7")][:len(inputs)]

    judge = TransformersNLIJudge("some/nli-model", pipeline=pipeline)
    labels = asyncio.run(judge.labels([("a", "b")] * 4))
    assert labels == ["entailment", "neutral", "contradiction", None] and judge.failures == 1


# --------------------------------------------------------------------------- Info / Cons / Hum


@pytest.mark.parametrize("answer, grades", [
    ('{"informativeness": 3, "consistency": 2, "humanness": 1}', (3, 2, 1)),
    ('Sure! {"Info": "2", "Cons": 3.0, "Hum": 3} hope that helps', (2, 3, 3)),
    ("Informativeness: 2\nConsistency - 2\nHumanness: 3", (2, 2, 3)),
    ('```json\n{"informativeness": 1, "consistency": 1, "humanness": 2}\n```', (1, 1, 2)),
])
def test_parse_quality(answer, grades):
    assert parse_quality(answer) == dict(zip(("informativeness", "consistency", "humanness"), grades))


@pytest.mark.parametrize("answer, problem", [
    ('{"informativeness": 3, "consistency": 2}', "no humanness grade"),
    ('{"informativeness": 4, "consistency": 2, "humanness": 2}', "informativeness is 4, not 1, 2 or 3"),
    ('{"informativeness": 2.5, "consistency": 2, "humanness": 2}', "not 1, 2 or 3"),
    ('{"informativeness": "good", "consistency": 2, "humanness": 2}', "not a number"),
    ("", "no informativeness grade"),
])
def test_parse_quality_rejects(answer, problem):
    with pytest.raises(QualityParseError, match=re.escape(problem)):
        parse_quality(answer)


def test_quality_judge_repairs_once_then_leaves_the_text_out():
    llm, handler, failures = client({
        "The post:\nGood post": ['{"informativeness": 3, "consistency": 3, "humanness": 2}'],
        "The comment:\nShort": ["three, three, three", '{"informativeness": 1, "consistency": 2, "humanness": 3}'],
        "The post:\nJunk": ["no idea", "still no idea"],
    })
    judge = QualityJudge(llm, judge_prompts(), batch=1)
    grades = asyncio.run(judge.grades([("post", "Hobbies: hiking", "Good post", ""), ("comment", "Hobbies: hiking", "Short", "A hike"),
                                       ("post", "Hobbies: hiking", "Junk", "")]))
    assert grades == [{"informativeness": 3, "consistency": 3, "humanness": 2},
                      {"informativeness": 1, "consistency": 2, "humanness": 3}, None]
    assert judge.failures == 1 and failures == ["still no idea"]
    assert mean_grades(grades) == {"informativeness": 2.0, "consistency": 2.5, "humanness": 2.5}
    comment_prompt = next(p for purpose, p in handler.seen if "Short" in p and purpose == "zhou.quality")
    assert "It replies to this post:\nA hike" in comment_prompt
    assert [p for p, _ in handler.seen].count("zhou.quality.repair") == 2


def test_evaluation_persona_uses_the_three_attributes():
    persona = Persona(name="Sarah", sentences=["I run."], fields={
        "personality": "Kind", "hobbies": "Running, Reading", "preferences for social media content": "Dog stories",
        "knowledge": "Training methods", "age": 24})
    assert evaluation_persona(persona) == ("Name: Sarah. Personality: Kind Hobbies: Running, Reading "
                                           "Preferences for social media content: Dog stories")
    plain = Persona(name="Bo", sentences=["I play jazz."])
    assert evaluation_persona(plain) == plain.text


# --------------------------------------------------------------------------- stages and groups


MANIFEST = {"scenario": {"populations": [
    {"name": "initial", "count": 2, "end_round": 1},
    {"name": "regular", "count": 2, "feed_stages": [{"start_round": 5, "authors": ["regular"]},
                                                    {"start_round": 1, "end_round": 5, "authors": ["initial"]}]},
]}}


def test_regular_agents_and_stages_from_the_manifest():
    assert regular_populations(MANIFEST) == ["regular"]
    assert stages_of(MANIFEST, ["regular"]) == [Stage("stage 1", 1, 5), Stage("stage 2", 5, None)]
    plain = {"scenario": {"populations": [{"name": "users", "count": 3}]}}
    assert regular_populations(plain) == ["users"] and stages_of(plain, ["users"]) == [Stage("all rounds", 0, None)]
    assert regular_populations(MANIFEST, ["initial"]) == ["initial"]
    from townsquare.api import UsageError

    with pytest.raises(UsageError, match="--population 'x': the run has initial, regular"):
        regular_populations(MANIFEST, ["x"])


def test_groups_per_stage():
    data = RunData(
        personas={"r1": "P1", "r2": "P2"},
        posts={"i1": ("i", "seed one", 0, None), "i2": ("i", "seed two", 0, None), "m1": ("r1", "mine", 2, None),
               "c1": ("r1", "nice", 3, "i1"), "r2p": ("r2", "later", 6, None)},
        decisions=[("r1", "browse", "i1", 2), ("r1", "browse", "i2", 2), ("r1", "browse", "m1", 3), ("r1", "like", "i1", 2),
                   ("r1", "comment", "i1", 3), ("r2", "browse", "i1", 3), ("r2", "browse", "m1", 6), ("r2", "like", "m1", 6)],
        knowledge_posts=[("r1", 2, True), ("r2", 6, False)])
    one, two = Stage("stage 1", 1, 5), Stage("stage 2", 5, None)
    first = groups(data, one)
    assert first["like"] == [("r1", "i1")] and first["not like"] == [("r1", "i2"), ("r2", "i1")]
    assert first["comment"] == [("r1", "i1")] and first["not comment"] == [("r1", "i2"), ("r2", "i1")]
    assert first["reblog"] == [] and first["post"] == [("r1", "m1")]  # r1's own post m1 is never "browsed"
    second = groups(data, two)
    assert second["like"] == [("r2", "m1")] and second["not like"] == [] and second["post"] == [("r2", "r2p")]
    assert texts_by(data, one, comments=True) == [("r1", "nice", "seed one")]
    assert texts_by(data, one, comments=False) == [("r1", "mine", "")]
    rng = np.random.default_rng(0)
    picked = sample(list(range(10)), 3, rng)
    assert len(picked) == 3 and picked == sorted(picked) and sample([1, 2], 3, rng) == [1, 2] and sample([1, 2, 3], 0, rng) == [1, 2, 3]


def test_bertscore_that_cannot_load_falls_back_to_the_embedder_under_auto(monkeypatch):
    import townsquare.plugins.report.pair_similarity as ps
    from townsquare.api import UsageError

    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load this model\nmore detail")

    monkeypatch.setattr(ps, "bert_score_available", lambda: True)
    monkeypatch.setattr(ps, "BertScoreSimilarity", lambda model_type=None, num_layers=None: BertScoreSimilarity(model_type, scorer=offline))
    # its model is not on this machine: no download is tried under auto
    monkeypatch.setattr(ps, "model_on_this_machine", lambda model_type: False)
    notes: list[str] = []
    chosen = make_similarity("auto", lambda: (fake_embed, "fake"), notes=notes)
    assert isinstance(chosen, EmbedderSimilarity) and "is not on this machine" in notes[0]
    # it is, but fails to load
    monkeypatch.setattr(ps, "model_on_this_machine", lambda model_type: True)
    notes = []
    chosen = make_similarity("auto", lambda: (fake_embed, "fake"), notes=notes)
    assert isinstance(chosen, EmbedderSimilarity)
    assert notes == ["BERTScore failed: OSError: We couldn't connect to 'https://huggingface.co' to load this model; "
                     "the run's embedder's cosine is used instead"]
    with pytest.raises(UsageError, match="^BERTScore failed: OSError"):
        make_similarity("bertscore", lambda: (fake_embed, "fake")).score([("a", "b")])
