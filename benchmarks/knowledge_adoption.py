"""How often the knowledge boundary (Zhou et al. §3.1.1, T_k = 0.25 in §4.1) adopts
paragraph-shaped HotpotQA knowledge, measured offline.

For ``--personas`` synthetic personas (the ``synthetic`` source, no LLM), every sentence of the
persona's "preferences for social media content" is one post topic (the paper's topics come
from an LLM; these are their offline stand-ins). Each topic retrieves the top ``k`` items by
cosine with the project's offline embedder (``hash``; the ranking chromadb returns), and an
item is adopted when its TF-IDF cosine with the persona's "knowledge" exceeds T_k. Printed:
the adoption rate, the similarity quantiles, for Wikipedia paragraphs ("Title: ... Text: ...",
the official distractor format) and, for contrast, for question-answer items.

    townsquare data fetch hotpotqa-dev-distractor-sample
    python benchmarks/knowledge_adoption.py data:hotpotqa-dev-distractor-sample/hotpot_dev_distractor_sample.json
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from townsquare.lib.data_paths import data_path
from townsquare.plugins.embedders.hash import HashEmbedder
from townsquare.plugins.social_agent.knowledge.hotpotqa import knowledge_items, read_hotpotqa
from townsquare.plugins.social_agent.persona import persona_schema as S
from townsquare.plugins.social_agent.persona.synthetic import synthetic_persona
from townsquare.plugins.social_agent.tfidf import tfidf_cosine


def measure(texts: list[str], personas: list, k: int, threshold: float) -> dict[str, float]:
    embedder = HashEmbedder()
    items = np.asarray(asyncio.run(embedder.embed(texts)))
    sims: list[float] = []
    topics = 0
    for persona in personas:
        reference = S.knowledge_text(persona)
        for topic in [t for t in str(persona.fields.get(S.PREFERENCES, "")).split(". ") if t.strip()]:
            topics += 1
            query = np.asarray(asyncio.run(embedder.embed([topic])))[0]
            for row in np.argsort(-(items @ query), kind="stable")[:k]:
                sims.append(tfidf_cosine(texts[row], reference))
    values = np.asarray(sims)
    return {"topics": topics, "retrieved": len(values), "adopted": int((values > threshold).sum()),
            "rate": float((values > threshold).mean()), "q50": float(np.quantile(values, 0.5)),
            "q90": float(np.quantile(values, 0.9)), "max": float(values.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=data_path, help="a HotpotQA file in the official (distractor) format (data:NAME/... works)")
    parser.add_argument("--personas", type=int, default=100)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--threshold", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    personas = [synthetic_persona(rng) for _ in range(args.personas)]
    records = read_hotpotqa(args.path)
    for form in ("paragraphs", "qa"):
        texts = [text for text, _ in knowledge_items(records, form)]
        r = measure(texts, personas, args.k, args.threshold)
        print(f"{form:<10} items {len(texts):>4}  topics {r['topics']}  retrieved {r['retrieved']}  adopted {r['adopted']}"
              f"  rate {r['rate']:.3f}  TF-IDF median {r['q50']:.3f}  p90 {r['q90']:.3f}  max {r['max']:.3f}")


if __name__ == "__main__":
    main()
