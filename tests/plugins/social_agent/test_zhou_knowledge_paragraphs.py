"""Knowledge items as the paper has them: HotpotQA's Wikipedia paragraphs ("Title: ... Text:
...", Zhou et al. appendix H, table 17), read from the official distractor format, and the
knowledge boundary's T_k = 0.25 (§3.1.1, §4.1) on paragraph-shaped items."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from helpers import SHARED_DATA
from townsquare.api import KnowledgeItem, Persona, UsageError
from townsquare.plugins.social_agent.knowledge.hotpotqa import knowledge_items, paragraph_text, read_hotpotqa
from townsquare.plugins.social_agent.knowledge.knowledge_boundary import KnowledgeBoundary
from townsquare.plugins.social_agent.tfidf import tfidf_cosine

DATA = Path(__file__).resolve().parents[2] / "data"
FIXTURE = DATA / "hotpotqa_distractor_small.json"
#: a persona "knowledge" attribute in the paper's style (our words)
DOG_TRAINER = ("Mara knows dog training well: positive reinforcement, clicker training, recall and leash walking, "
               "and how to socialize a shy puppy. She also follows marathon training plans.")


def test_paragraphs_are_read_from_the_official_format():
    records = read_hotpotqa(FIXTURE)
    assert [len(r["context"]) for r in records] == [3, 3]
    items = knowledge_items(records)  # auto: every record has a context
    texts = [text for text, _ in items]
    # the paragraph shared by both questions is one item; the empty one is none
    assert len(items) == 4
    assert texts[1] == ("Title: Clicker training Text: Clicker training is a positive reinforcement method for training "
                        "dogs and other animals. A click marks the exact behavior, and a treat follows, so the dog learns "
                        "which behavior earns the reward.")
    assert items[3][1] == {"title": "Vellmar Station",
                           "question": "When was the railway station in the town where the chess olympiad was held opened?"}
    assert paragraph_text("T", ["One.", " Two."]) == "Title: T Text: One. Two."
    qa = knowledge_items(records, "qa")
    assert [t for t, _ in qa][1] == "Q: When was the railway station in the town where the chess olympiad was held opened? A: 1887"


def test_the_simplified_format_still_gives_question_answer_items(tmp_path):
    records = read_hotpotqa(DATA / "hotpotqa_sample.json")
    assert all("context" not in r for r in records)
    assert knowledge_items(records)[0][0].startswith("Q: ")
    with pytest.raises(UsageError, match=r'hotpotqa_sample.json: items = "paragraphs" but record 0 has no "context"'):
        knowledge_items(records, "paragraphs", str(DATA / "hotpotqa_sample.json"))


def test_a_malformed_context_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question": "q?", "answer": "a", "context": [["title only"]]}]))
    with pytest.raises(UsageError, match=r'bad.json: record 0: "context" must be a list of \[title, \[sentence, ...\]\] pairs'):
        read_hotpotqa(bad)


def test_t_k_on_paragraph_items():
    """TF-IDF cosine of each paragraph with the persona's knowledge, and what T_k = 0.25 keeps."""
    items = knowledge_items(read_hotpotqa(FIXTURE))
    sims = [round(tfidf_cosine(text, DOG_TRAINER), 4) for text, _ in items]
    assert sims == [0.2834, 0.3073, 0.0555, 0.0335]
    boundary = KnowledgeBoundary()
    assert boundary.config.threshold == 0.25
    kept = [boundary.adopt(KnowledgeItem(id=str(i), text=text), DOG_TRAINER) for i, (text, _) in enumerate(items)]
    assert [k is not None for k in kept] == [True, True, False, False]
    assert kept[1].meta["knowledge_similarity"] == 0.3073


class _Source:
    def __init__(self, items):
        self.items = items

    async def search(self, query, k):
        return self.items[:k]


class _Ctx:
    def __init__(self, items):
        self.services = type("S", (), {"knowledge": _Source(items)})()
        self.agent = type("A", (), {"id": "a-1", "persona": Persona(name="Mara", fields={"knowledge": DOG_TRAINER})})()


def test_the_boundary_counts_adoption_on_paragraphs():
    items = [KnowledgeItem(id=str(i), text=text) for i, (text, _) in enumerate(knowledge_items(read_hotpotqa(FIXTURE)))]
    boundary = KnowledgeBoundary()
    kept = asyncio.run(boundary.knowledge_for(_Ctx(items), "teaching a puppy to come back"))
    assert [k.id for k in kept] == ["0", "1"]
    assert boundary.get_state() == {"queries": 1, "retrieved": 3, "adopted": 2, "rejected": 1}


@pytest.mark.shared_data
def test_the_shared_distractor_sample_has_its_paragraphs():
    path = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_sample.json"
    if not path.exists():
        pytest.skip("shared data absent")
    records = read_hotpotqa(path)
    items = knowledge_items(records)
    assert len(records) == 53 and sum(len(r["context"]) for r in records) == 522
    assert len(items) == 521  # one paragraph belongs to two questions
    assert all(text.startswith("Title: ") and " Text: " in text for text, _ in items)
