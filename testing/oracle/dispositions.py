"""The oracle's dispositions: how it reads a prompt, as settings, FOR TESTS ONLY.

A finding proven with the oracle shows that a pathway exists; how large it comes out depends on
how the reader weighs what it sees. These settings name those choices so a study can sweep them
(``townsquare sweep --vary llm.news_importance=4,6,8``) and so a real model's own dispositions
can be measured on the same scale. Each one changes only how the oracle reads a prompt, never
what it sees. The defaults are the oracle's fixed rules before they became settings.

- ``news_importance`` (1-10, default 8): the importance it gives a memory that holds news of an
  event with a date or a clock time (Park et al.'s poignancy question, §4.1); a planning note
  about such an event gets one more (at most 10), as every plan with news does.
- ``relay_fidelity`` (0-1, default 1): the share of relays (news about someone else, passed on in
  a conversation; the speaker's own plans and its status line are told whole) that keep the
  event's date, time and place; the rest pass on the bare news
  ("Isabella Rodriguez is planning a Valentine's Day party").
- ``conformity_weight`` (0-1, default 0.5): how far a rating moves from the agent's own score
  toward the mean of the opinions it recalls (RecAgent's rating and re-rating, §3.3): 0 keeps
  its own score, 1 takes the others' mean.
- ``follow_page`` (0-1, default 0): the share of watch choices taken from the top of the page the
  recommender shows rather than from the fixed interests in the profile (titles heard of are
  still watched first).

Shares are drawn per request from a hash of the request's own text (:func:`draw`): the same
prompt always gets the same answer, so a run replays exactly, and over many different prompts
the share comes out as set.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Dispositions:
    news_importance: int = 8
    relay_fidelity: float = 1.0
    conformity_weight: float = 0.5
    follow_page: float = 0.0

    def moved(self, own: float, recalled: float) -> float:
        """``own`` moved toward ``recalled`` by ``conformity_weight`` (0.5: their midpoint)."""
        w = self.conformity_weight
        return (1 - w) * own + w * recalled


def draw(text: str, what: str) -> float:
    """A number in [0, 1) that depends only on ``text`` and on which disposition asks."""
    digest = hashlib.sha256(f"{what}\0{text}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64
