"""What a model typically answers to Zhou et al.'s agent: the estimate's priors
(``townsquare_register_answer_priors``; read by ``townsquare estimate`` only).

* ``plan``: the plan the design expects for the activity level its prompt states
  (:func:`.planning.plan_parsing.plan_for` with ``u = 1``: browse ``1 + round(3a)`` hours, like /
  forward / comment ``30a`` / ``10a`` / ``5a`` percent, ``max(1, round(7a))`` posts a week), at
  times spread over the day by the persona (a digest of the prompt), the activity level scaled
  by the disposition (a model that acts more plans more);
* ``like``, ``reblog``, ``comment``: the share of decisions that act, our choice (the paper
  gives none); a plan's quotas cap them anyway;
* ``follow``: half the follow decisions follow someone (our choice);
* ``topics``, ``summary``, posts: as many topics as asked, text of the expected length (the
  stand-in's own typical answers).
"""

from __future__ import annotations

import hashlib
import re

from townsquare.api import AnswerPrior, hookimpl

from .planning.plan_parsing import plan_for

_ACTIVITY = re.compile(r"activity level is ([0-9]*\.?[0-9]+)")

#: decision shares (our choice: Zhou et al. give none)
SHARES = {"like": {"like": 0.1}, "reblog": {"forward": 0.05}, "comment": {"Comment content:": 0.05}, "follow": {"*": 0.5}}


def typical_plan(prompt: str, disposition: float) -> dict:
    """The plan answer for the activity level ``prompt`` states (0.5 when it states none), times
    spread by a digest of the prompt: browsing from 06:00 to 22:00, posting 07:00 to 21:00."""
    match = _ACTIVITY.search(prompt)
    activity = min(1.0, (float(match.group(1)) if match else 0.5) * disposition)
    digest = int.from_bytes(hashlib.blake2b(prompt.encode(), digest_size=8).digest(), "big")
    browse = 6 * 60 + 30 * (digest % 33)
    day = 1 + (digest >> 8) % 7
    post = 7 * 60 + 30 * ((digest >> 16) % 29)
    return plan_for(activity, browse, day, post).to_answer()


@hookimpl
def townsquare_register_answer_priors():
    return [
        AnswerPrior("plan", answer=typical_plan, note="the design's plan for the stated activity level"),
        *(AnswerPrior(purpose, shares=shares, note="our choice") for purpose, shares in SHARES.items()),
    ]
