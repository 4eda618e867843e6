"""The oracle's rules for Zhou et al.'s social-media agent, FOR TESTS ONLY.

- ``plan``: the plan a careful reader writes for the activity level the prompt states ("Your
  activity level is 0.32, where 1 is the most active"), each item in proportion to it: at full
  activity, browse 7 hours, like half of what it sees, forward and comment on a fifth, post
  three times a week (the typical plan ``townsquare estimate`` declares, read off what SmolLM2
  writes); at times the prompt does not give, so spread by the persona (a digest of its text:
  browsing from 06:00 to 22:00, posting on day 1 to 7 from 07:00 to 21:00). With no level in
  the prompt it plans as ``a = 0.5``.
- ``topics``: as many as the prompt asks for, from the persona's hobbies, then its preferences
  for social media content (or, when the schema lists the allowed topics, those).

Every other purpose of the design (like, forward, comment, follow, summaries) gets the generic
rules (:mod:`.generic`): a careful reader with nothing in the post to act on does nothing, so the
agents browse and post as planned and leave posts alone.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .prompt_view import PromptView

_LEVEL = re.compile(r"activity level is ([0-9]*\.?[0-9]+)", re.I)
_COUNT = re.compile(r"Suggest (\d+) topics", re.I)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _clock(minutes: int) -> str:
    minutes %= 24 * 60
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def plan(view: PromptView) -> Any:
    if view.json_schema is None or "browsing_start" not in (view.json_schema.get("properties") or {}):
        return None
    found = _LEVEL.search(view.text)
    a = min(1.0, max(0.0, float(found.group(1)))) if found else 0.5
    digest = _digest(_line(view, "Name") + _line(view, "Detailed historical behaviour information") or view.text)
    browse = 6 * 60 + 30 * (digest % 33)
    post = 7 * 60 + 30 * ((digest >> 16) % 29)
    hours = 1 + round(6 * a)
    return {
        "browsing_start": _clock(browse), "browsing_end": _clock(browse + 60 * hours) if (browse + 60 * hours) % 1440 else "24:00",
        "probability_of_liking": round(50 * a), "probability_of_forwarding": round(20 * a),
        "probability_of_commenting": round(20 * a), "posting_day": 1 + (digest >> 8) % 7,
        "posting_start": _clock(post), "posting_end": _clock(post + 120), "posts_per_week": max(1, round(3 * a)),
    }


def _line(view: PromptView, heading: str) -> str:
    found = re.search(rf"^{re.escape(heading)}:\s*(.*)$", view.text, re.M)
    return found.group(1).strip() if found else ""


def topics(view: PromptView) -> Any:
    schema = ((view.json_schema or {}).get("properties") or {}).get("topics")
    if schema is None:
        return None
    count = int(schema.get("maxItems") or (_COUNT.search(view.last) or _COUNT.search(view.text) or [None, 1])[1])
    allowed = (schema.get("items") or {}).get("enum")
    if allowed:
        pool = list(allowed)
    else:
        hobbies = [h.strip() for h in _line(view, "Hobbies").split(",") if h.strip()]
        preferences = [s.strip() for s in re.split(r"(?<=\.)\s+", _line(view, "Preferences for social media content")) if s.strip()]
        pool = hobbies + [" ".join(p.split()[:12]).rstrip(".") for p in preferences]
    return {"topics": pool[:count] or ["my day"]}


RULES = {"plan": plan, "topics": topics}
