"""How often the offline model's comments copy the post they answer
(:mod:`townsquare.plugins.report.comment_copying`), per way of asking.

Takes the posts and personas of a finished quickstart run, pairs regular agents with posts
(seeded), and has SmolLM2 write each comment as the social agent does once it has chosen to
comment (the opening ``Comment content:``, then the text), in up to three variants:

* ``now``: the prompt as it is (the post first, the question last) and ``avoid`` decoding (the
  post's content words lowered by ``[llm] avoid_penalty`` logits);
* ``no-avoid``: the same prompt, plain decoding;
* ``post-last``: the earlier prompt, the question first and the post last, plain decoding.

    python benchmarks/comment_copying.py runs/quickstart [--comments 20] [--variants now post-last]

Prints each comment with whether it copies its post, and the share per variant.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
from pathlib import Path

#: the comment prompt before the post was moved first (for the ``post-last`` variant)
POST_LAST = """Would you write a comment under it? People mostly comment on posts that interest them or when they have an opinion to share. If you would not, reply exactly "no comment". If you would, reply with your comment, beginning with "Comment content:".

A post in your feed:
{post}"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--comments", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--variants", nargs="+", default=["now", "no-avoid", "post-last"], choices=["now", "no-avoid", "post-last"])
    args = parser.parse_args(argv)

    from townsquare.llm import LLMRequest, Message
    from townsquare.plugins.llm.local import LocalLLMConfig, build_local_llm
    from townsquare.plugins.report.comment_copying import copies
    from townsquare.plugins.social_agent.actions.action_prompts import action_prompts, fill

    with sqlite3.connect(f"file:{args.run / 'events.sqlite'}?mode=ro", uri=True) as db:
        posts = [text for (text,) in db.execute("SELECT text FROM posts WHERE reply_to IS NULL ORDER BY rowid") if text]
        agents = {a: (name, json.loads(p)) for a, name, p in db.execute("SELECT agent_id, name, persona FROM agents")}
    regular = sorted(a for a in agents if a.startswith("regular"))
    rng = random.Random(args.seed)
    pairs = [(rng.choice(regular), rng.choice(posts)) for _ in range(args.comments)]
    prompts = action_prompts(None, ".")
    llm = build_local_llm(LocalLLMConfig(), type("Context", (), {"seed": args.seed, "base_dir": "."})())
    shares = {}
    for variant in args.variants:
        question = POST_LAST if variant == "post-last" else prompts["comment"]
        copying = 0
        for agent, post in pairs:
            name, persona = agents[agent]
            messages = (Message("system", fill(prompts["comment_persona"], name=name, persona=" ".join(persona["sentences"]))),
                        Message("user", fill(question, post=post)))
            # the comment's text once the agent has chosen to comment: the opening "Comment content:" alone
            request = LLMRequest(messages=messages, answer_prefixes=("Comment content:",), max_tokens=60,
                                 temperature=1.0, purpose="comment", agent_id=agent, mode="logprob",
                                 avoid=post if variant == "now" else None)
            text = llm.complete_sync(request).text.removeprefix("Comment content:").strip()
            copied = copies(text, post)
            copying += copied
            print(f"{variant:9s} {'COPIES' if copied else 'answers'} | {post[:60]!r} -> {text[:100]!r}", flush=True)
        shares[variant] = copying
    for variant, copying in shares.items():
        print(f"{variant}: {copying} of {len(pairs)} comments copy their post ({copying / len(pairs):.0%})")


if __name__ == "__main__":
    main()
