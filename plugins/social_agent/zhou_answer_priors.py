"""What a model typically answers to Zhou et al.'s agent: the estimate's priors
(``townsquare_register_answer_priors``; read by ``townsquare estimate`` only).

* ``plan``: a typical plan for the activity level its prompt states (:data:`TYPICAL` scaled by
  it: browse up to 7 hours, like / forward / comment up to 50 / 20 / 20 percent, up to 3 posts
  a week; read off the plans SmolLM2 writes), at times spread over the day by the persona (a
  digest of the prompt); the disposition scales the probabilities and the posts (a model that
  acts more plans more);
* ``like``, ``reblog``, ``comment``: the share of decisions that act (the paper gives none): a
  fifth of likes and forwards, a quarter of comments, as SmolLM2 forwarded 19-25 % and
  commented on 20-28 % of the posts it was asked about on seeds 1 and 2 (the oracle acts on
  none); a plan's quotas cap them anyway;
* ``follow``: half the follow decisions follow someone (our choice);
* ``topics``, ``summary``, posts: as many topics as asked, text of the expected length (the
  stand-in's own typical answers).
"""

from __future__ import annotations

import hashlib
import re

from townsquare.api import hookimpl
from townsquare.lib.answer_priors import AnswerPrior

from .planning.plan_parsing import MINUTES_PER_DAY, Plan, Window

_ACTIVITY = re.compile(r"activity level is ([0-9]*\.?[0-9]+)")

#: decision shares (Zhou et al. give none; read off SmolLM2's decisions: see the module's doc)
SHARES = {"like": {"like": 0.2}, "reblog": {"forward": 0.2}, "comment": {"Comment content:": 0.25}, "follow": {"*": 0.5}}


#: a typical plan at full activity, read off the 16 plans SmolLM2 wrote for the quickstart's
#: personas on seeds 1 and 2 (activity 0.7-1): browse 7 hours (their mean window), like half of
#: what is seen (their mean, 53 %), post 3 times a week (their mean); forward and comment 20 %:
#: they asked 44 % and 34 % on average, but six in sixteen asked 5 % or less, and 20 % opens a
#: quota in as many four-post sessions as theirs did (about three in four)
TYPICAL = {"browse_hours": 7, "like": 50, "forward": 20, "comment": 20, "posts_per_week": 3}


def typical_plan(prompt: str, disposition: float) -> dict:
    """The plan answer for the activity level ``a`` that ``prompt`` states (0.5 when it states
    none): :data:`TYPICAL` scaled by ``a`` (browse ``1 + round((h - 1) a)`` hours, the
    probabilities ``p a`` percent, ``max(1, round(n a))`` posts a week), the probabilities also
    by the disposition; times spread by a digest of the prompt: browsing from 06:00 to 22:00,
    posting on day 1 to 7 from 07:00 to 21:00 for two hours."""
    match = _ACTIVITY.search(prompt)
    a = min(1.0, float(match.group(1)) if match else 0.5)
    digest = int.from_bytes(hashlib.blake2b(prompt.encode(), digest_size=8).digest(), "big")
    browse = 6 * 60 + 30 * (digest % 33)
    hours = 1 + round((TYPICAL["browse_hours"] - 1) * a)
    post = 7 * 60 + 30 * ((digest >> 16) % 29)
    percent = {key: min(100, round(TYPICAL[key] * a * disposition)) for key in ("like", "forward", "comment")}
    return Plan(Window(browse, (browse + 60 * hours - 1) % MINUTES_PER_DAY + 1), percent["like"], percent["forward"],
                percent["comment"], 1 + (digest >> 8) % 7, Window(post, post + 120),
                max(1, round(TYPICAL["posts_per_week"] * a * disposition))).to_answer()


@hookimpl
def townsquare_register_answer_priors():
    return [
        AnswerPrior("plan", answer=typical_plan, note="a typical plan for the stated activity level"),
        *(AnswerPrior(purpose, shares=shares, note="our choice") for purpose, shares in SHARES.items()),
    ]
