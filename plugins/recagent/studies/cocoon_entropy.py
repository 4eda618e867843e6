"""Information-cocoon entropy (Wang et al., "Studying the information cocoon phenomenon", fig. 4):

    E = -(1/|U|) sum_{u in U} sum_{c in C} f_{u,c} log f_{u,c}

with f_{u,c} the frequency of category c among the items recommended to user u. Smaller E is a
stronger cocoon. Measured every round (metric ``cocoon_entropy``, key ``entropy``) over the
recommendation pages of that round (``recommend`` and ``next_page``; search results are not
recommendations); U is the agents that got a page in the round (``users``), so a round with
none stores no entropy. An item counts once for each of its genres, and the frequencies are
normalised over them; an item with no genre counts as the category "(none)". The paper does not
give the logarithm's base: natural log.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from townsquare.api import BuildContext, MetricSpec, RoundView, hookimpl

NO_CATEGORY = "(none)"


def category_entropy(items: Sequence[Sequence[str]]) -> float:
    """-sum_c f_c log f_c over the categories of ``items`` (each a sequence of genres)."""
    counts = Counter(g for genres in items for g in (genres or (NO_CATEGORY,)))
    total = sum(counts.values())
    return -sum(n / total * math.log(n / total) for n in counts.values()) if total else 0.0


def cocoon_entropy(recommended: Mapping[str, Sequence[Sequence[str]]]) -> float | None:
    """E over the users with at least one recommended item (None when there are none)."""
    users = [items for items in recommended.values() if items]
    return sum(category_entropy(items) for items in users) / len(users) if users else None


class CocoonEntropy:
    async def measure(self, view: RoundView) -> dict[str, float]:
        platform = view.platform
        log = getattr(platform, "recommended", None)
        if not log:
            return {"users": 0.0}
        recommended = {user: [platform.item(i).genres for i in ids if platform.item(i) is not None] for user, ids in log.items()}
        value = cocoon_entropy(recommended)
        out = {"users": float(sum(1 for items in recommended.values() if items))}
        if value is not None:
            out["entropy"] = value
        return out

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_cocoon_entropy(config: None, ctx: BuildContext) -> CocoonEntropy:
    return CocoonEntropy()


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("cocoon_entropy", build_cocoon_entropy,
                       description="recsys: entropy of the recommended items' genres per user, averaged (RecAgent fig. 4)")]
