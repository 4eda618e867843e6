"""The voice of a post: is it the persona speaking for itself?

A persona agent's post should read as that person writing on their own account: in the first
person ("I tried a new sourdough starter"), not a third-person bio of the persona ("Tobias is a
German carpenter..."), not a letter or an assistant's reply to someone ("Dear Sarah,", "I'm so
glad you reached out!"), and never with the prompt showing through ("You're the person described
in the 'Persona information' above"). Three shares, each a plain word test (no model), used by
``benchmarks/groundedness.py``'s voice column:

* ``first_person``: the post says I / me / my / mine / myself / we / us / our (any case, "us"
  lower-case only, so "US" is not counted);
* ``leaks``: the post repeats the prompt's scaffolding (its field names, its instructions, the
  platform's description, an assistant's or a model's self-reference), :data:`LEAK_MARKERS`,
  or opens as the prompt's role line does, :data:`LEAK_OPENING` ("Impersona: ...", "You are
  Alba López, 28", "You're Tobias");
* ``addresses``: the post opens like a letter, a greeting or an assistant's reply to someone,
  :data:`ADDRESS_OPENINGS`.
"""

from __future__ import annotations

import re
from typing import Iterable

_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "we", "we're", "we've", "we'd",
                          "we'll", "our", "ours", "ourselves"})

#: phrases of the prompts and of assistant talk that never belong in a post (lower case)
LEAK_MARKERS = (
    "persona information", "the person described", "you're the person", "you are the person", "twitter-like site",
    "500 characters", "topic:", "knowledge:", "write one post", "reply with the text", "text of the post",
    "chat history", "as an ai", "language model", "basic information:", "hobbies:", "personality:",
    "detailed historical behaviour", "preferences for social media content", "smollm", "helpful ai", "ai assistant",
)

#: a post that opens as the system prompt's role line: "Impersona:" (a model's garbled "impersonate"),
#: or "You are" / "You're" and a capitalised name (a second-person "you are amazing" is not one)
LEAK_OPENING = re.compile(r"^[\W_]*(?:(?i:impersona\w*)\s*:|(?i:you\s+are|you['\u2019]re)\s+[A-Z][\w'\u2019-]*)")

#: how a letter, a greeting or an assistant's reply opens (lower case, at the start of the post)
ADDRESS_OPENINGS = (
    "dear ", "hi ", "hi,", "hello", "hey ", "hey,", "greetings", "to whom", "i'm glad", "i am glad", "i'm so glad",
    "i'm happy to help", "glad to help", "thank you for", "thanks for reaching", "sure,", "sure!", "certainly",
    "of course", "here's", "here is", "absolutely!", "what a great question", "i hope you're", "i hope this",
)


def is_first_person(text: str) -> bool:
    return any(word.lower() in FIRST_PERSON or word == "us" for word in _WORD.findall(text))


def leaks_prompt(text: str) -> bool:
    low = text.lower()
    return any(marker in low for marker in LEAK_MARKERS) or LEAK_OPENING.match(text) is not None


def addresses_someone(text: str) -> bool:
    low = text.strip().lstrip("\"'*").lower()
    return low.startswith(ADDRESS_OPENINGS)


def voice_shares(posts: Iterable[str]) -> dict[str, float]:
    """``first_person``, ``leaks``, ``addresses`` as shares of ``posts`` and ``posts`` their count
    (the shares are 0 for no post)."""
    texts = [t for t in posts if t and t.strip()]
    n = len(texts)
    if not n:
        return {"posts": 0, "first_person": 0.0, "leaks": 0.0, "addresses": 0.0}
    return {"posts": n, "first_person": sum(map(is_first_person, texts)) / n, "leaks": sum(map(leaks_prompt, texts)) / n,
            "addresses": sum(map(addresses_someone, texts)) / n}
