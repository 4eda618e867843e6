"""Does a comment answer the post it is under, or copy it?

A reply that repeats the post it answers (verbatim, or word for word rearranged) is the post
again in another author's mouth, not a reaction to it: small models do this often. A comment
**copies** its post when either holds (a plain word test, no model; words are lowercased
letter/digit runs):

* it shares a run of at least :data:`COPY_RUN` words in a row with the post (a verbatim copy of
  a phrase as long as a short clause), or
* it has at least :data:`MIN_CONTENT` distinct content words (words not in :data:`townsquare.lib.function_words.FUNCTION_WORDS`)
  and at least :data:`CONTENT_SHARE` of them occur in the post (a paraphrase: the post's words
  reshuffled). A reply that picks up the post's topic word or two ("I love hiking too!") stays
  under it.

The thresholds are our choice (no paper defines copying): five words in a row rarely recur by
chance between two short texts on one topic, and a reply with its own point brings words of its
own. ``groundedness`` reports the share of a run's comments that copy
(``comments.copying``; docs/groundedness.md).
"""

from __future__ import annotations

import re

from townsquare.lib.function_words import FUNCTION_WORDS

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

#: words in a row a comment may share with its post before it counts as a copy
COPY_RUN = 5
#: the share of a comment's content words found in its post from which it counts as a paraphrase
CONTENT_SHARE = 0.6
#: content words a comment needs before the share is read (a three-word reply is judged by runs only)
MIN_CONTENT = 4



def words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def longest_shared_run(a: list[str], b: list[str]) -> int:
    """The most words in a row that ``a`` and ``b`` share (longest common substring, in words)."""
    best = 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


def content_share(comment: str, post: str) -> float | None:
    """The share of the comment's distinct content words that occur in the post (None below
    :data:`MIN_CONTENT` content words)."""
    mine = {w for w in words(comment) if w not in FUNCTION_WORDS}
    if len(mine) < MIN_CONTENT:
        return None
    theirs = set(words(post))
    return len(mine & theirs) / len(mine)


def copies(comment: str, post: str) -> bool:
    """Whether ``comment`` copies ``post`` (see the module's doc)."""
    if longest_shared_run(words(comment), words(post)) >= COPY_RUN:
        return True
    share = content_share(comment, post)
    return share is not None and share >= CONTENT_SHARE
