"""What a model typically answers to a design's purposes: the records a design declares through
``townsquare_register_answer_priors`` and ``townsquare estimate`` alone reads
(:mod:`townsquare.commands.typical_answers`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class AnswerPrior:
    """What a model typically answers to one of a design's purposes, declared by the design
    that asks it (``townsquare_register_answer_priors``). Only ``townsquare estimate`` reads it:
    its dry run answers every request as these records say, so the forecast follows the calls
    an acting model's answers lead to (:mod:`townsquare.commands.typical_answers`).

    ``purpose``: the purpose, or a prefix ending in ``.`` (``conversation.``); the most
    specific record wins. ``shares``: for a label decision or an answer with openings, the share
    of answers that give each label (``"*"``: any label that takes an action, such as a follow
    decision's candidate ids); the rest take no action. ``answer(prompt, disposition)``: for a
    JSON or free-text purpose, the typical answer to ``prompt`` (a JSON value or text), at
    ``disposition`` (1: typical; the estimate's range plays 0.5 and 1.5, a model that acts
    half as much or half again as much). Shares are scaled by the disposition too (capped at 1).
    ``completion_tokens``: how long a typical answer is (the length the prompt asks for: "one or
    two sentences" about 40 tokens), which sizes the prompts that quote it later; unset, the
    estimate's default for the kind of answer. ``note``: where the numbers come from."""

    purpose: str
    shares: dict[str, float] = field(default_factory=dict)
    answer: Callable[[str, float], Any] | None = None
    completion_tokens: int | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if not self.purpose or (self.shares and self.answer is not None):
            raise ValueError(f"answer prior {self.purpose!r}: give a purpose and at most one of shares and answer")
        if self.completion_tokens is not None and self.completion_tokens < 1:
            raise ValueError(f"answer prior {self.purpose!r}: completion_tokens must be at least 1")
        bad = [label for label, share in self.shares.items() if not 0.0 <= share <= 1.0]
        if bad or sum(self.shares.values()) > 1.0 + 1e-9:
            raise ValueError(f"answer prior {self.purpose!r}: shares must lie in [0, 1] and sum to at most 1")
