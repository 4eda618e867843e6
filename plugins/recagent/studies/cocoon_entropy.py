"""Information-cocoon entropy (Wang et al., "Studying the information cocoon phenomenon", fig. 4):

    E = -(1/|U|) sum_{u in U} sum_{c in C} f_{u,c} log f_{u,c}

with f_{u,c} the frequency of category c among the items recommended to user u. Smaller E is a
stronger cocoon. Measured every round (metric ``cocoon_entropy``). The paper does not say how an
item with several genres counts, so both readings are stored:

- ``entropy``: an item counts once for each of its genres, and the frequencies are normalised
  over them (every genre);
- ``entropy_first_genre``: an item counts once, by its first listed genre (MovieLens lists an
  item's genres alphabetically, so this is a fixed, not a chosen, genre).

They can disagree: a recommender that narrows a user's pages onto items with *more* genres
keeps the every-genre count up while the first-genre count falls. An item with no genre counts
as the category "(none)". The paper does not give the logarithm's base: natural log. Who U is
(``users``, a setting):

- ``"everyone"`` (default): every agent of the run, each by the page the recommender would
  serve it at the end of the round (its first ``page_size`` items, under any intervention such
  as Rec-Strategy, drawn with a generator of the run seed, the round and the agent, so the
  agents' own streams are untouched; nothing is shown or recorded). The measured set is the
  same under every treatment: a treatment cannot change who is measured (with the pages
  actually seen, Soc-Strategy's friends' tips send agents to search instead of browsing, and
  fewer agents get a page);
- ``"paged"``: the agents that got a recommendation page in the round (``recommend`` and
  ``next_page``; search results are not recommendations), by the items on their pages; a
  round with none stores no entropy.

``random_page`` and ``random_page_first_genre`` (stored in the first round measured): the
expected E of a page of ``page_size`` items drawn at random from the whole catalogue, under
each reading (the mean over ``random_pages`` pages drawn with a generator of the run seed). It
is the level a page of random items sits at: a recommender whose pages lie above it serves more
diverse pages than chance, and replacing one of its items by a random one (Rec-Strategy) then
*lowers* E on average; only pages below it have a cocoon that random items open.

``in_interest`` (with ``users = "everyone"``): the share of the items on the measured pages one
of whose genres is among the user's profile interests (persona field ``interests``; users
without interests are left out), so a reader sees whether the recommender has learnt what users
like, beside how narrow their pages are.

``entropy_cumulative`` is the reference code's variant: E over everything recommended to each
user on its pages so far, over the users with at least one page. ``users`` stores how many
agents the round's E averages.

Satisfaction (fig. 4c/d, upper left): with ``satisfaction = true`` and an LLM, every
``satisfaction_every`` rounds each agent that got a page is asked how satisfied it is with the
items shown, 1-10 (prompt ``satisfaction`` of ``prompts/studies.toml``); the mean is stored as
``satisfaction``. A malformed answer is repaired once, then counts as 5.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, ComponentError, MetricSpec, RoundView, hookimpl

from ..prompts import fill, load_prompts
from ..unified_prompt import render_profile

NO_CATEGORY = "(none)"
SCORES = tuple(str(n) for n in range(1, 11))


class CocoonEntropyConfig(BaseModel):
    """``[plugins.cocoon_entropy]`` settings."""

    model_config = ConfigDict(extra="forbid")

    users: Literal["everyone", "paged"] = Field("everyone", description="everyone: every agent's page of the round's end; paged: the pages seen")
    satisfaction: bool = Field(False, description="also ask each paged agent its satisfaction 1-10 (needs an LLM)")
    satisfaction_every: int = Field(5, ge=1, description="ask every this many rounds")
    random_pages: int = Field(2000, ge=0, description="random pages drawn for the random-page reference (0: none)")
    profile_fields: list[str] = Field(default_factory=lambda: ["age", "gender", "traits", "interests"])
    prompts_file: str | None = None


def category_entropy(items: Sequence[Sequence[str]], first_genre: bool = False) -> float:
    """-sum_c f_c log f_c over the categories of ``items`` (each a sequence of genres): every
    genre of an item counts, or (``first_genre``) only its first."""
    return counter_entropy(Counter(g for genres in items for g in (genres or (NO_CATEGORY,))[: 1 if first_genre else None]))


def counter_entropy(counts: Mapping[str, int]) -> float:
    total = sum(counts.values())
    return -sum(n / total * math.log(n / total) for n in counts.values() if n) if total else 0.0


def random_page_entropy(genres: Sequence[Sequence[str]], page_size: int, pages: int, rng: np.random.Generator,
                        first_genre: bool = False) -> float:
    """The mean E of ``pages`` pages of ``page_size`` distinct items drawn uniformly from a
    catalogue whose items have ``genres``."""
    if not genres or pages <= 0:
        return 0.0
    size = min(page_size, len(genres))
    return float(np.mean([category_entropy([genres[int(i)] for i in rng.choice(len(genres), size, replace=False)], first_genre)
                          for _ in range(pages)]))


def interest_share(pages: Mapping[str, Sequence[Sequence[str]]], interests: Mapping[str, Any]) -> float | None:
    """The share of the items on the pages of users with interests that meet one of them
    (genres and interests compared in lower case, without a trailing "movies"/"films")."""
    def key(text: str) -> str:
        return str(text).strip().lower().removesuffix(" movies").removesuffix(" films").replace("-", "")

    hits = total = 0
    for user, items in pages.items():
        wanted = {key(i) for i in interests.get(user) or ()}
        if not wanted:
            continue
        for genres in items:
            total += 1
            hits += any(key(g) in wanted for g in genres)
    return hits / total if total else None


def cocoon_entropy(recommended: Mapping[str, Sequence[Sequence[str]]], first_genre: bool = False) -> float | None:
    """E over the users with at least one recommended item (None when there are none)."""
    users = [items for items in recommended.values() if items]
    return sum(category_entropy(items, first_genre) for items in users) / len(users) if users else None


class CocoonEntropy:
    def __init__(self, config: CocoonEntropyConfig | None = None, ctx: BuildContext | None = None):
        self.config = config or CocoonEntropyConfig()
        self.seed = ctx.seed if ctx is not None else 0
        #: user -> genre -> count over every recommendation page so far (the cumulative variant)
        self.seen: dict[str, Counter] = {}
        self.reference_done = False
        self.llm = None
        if self.config.satisfaction:
            self.llm = getattr(ctx.services, "llm", None) if ctx is not None else None
            if self.llm is None:
                raise ComponentError("plugins.cocoon_entropy.satisfaction needs an LLM ([llm] or --llm)")
            self.prompt = load_prompts("studies", {"satisfaction": frozenset({"name", "profile", "items"})},
                                       self.config.prompts_file, ctx.base_dir)["satisfaction"]

    async def satisfaction(self, view: RoundView) -> float | None:
        agents = {a.id: a for a in view.agents}
        scores = []
        for user, ids in view.platform.recommended.items():
            agent = agents.get(user)
            items = [view.platform.item(i) for i in ids if view.platform.item(i) is not None]
            if agent is None or not items:
                continue
            prompt = fill(self.prompt, name=agent.persona.name, profile=render_profile(agent.persona, self.config.profile_fields),
                          items="\n".join(f"- {item.line()}" for item in items))
            answer = await self.llm.for_agent(user).choose(prompt, SCORES, purpose="recagent.satisfaction", default="5")
            scores.append(int(answer))
        return sum(scores) / len(scores) if scores else None

    def probe_pages(self, view: RoundView) -> dict[str, list[str]]:
        """Every agent's page at the round's end, read without showing it (see the docstring)."""
        platform = view.platform
        size = getattr(platform, "page_size", 5)
        pages = {}
        for n, agent in enumerate(view.agents):
            rng = np.random.default_rng([self.seed, 59, view.round, n])
            pages[agent.id] = [item.id for item in platform.recommend(agent.id, size, rng)]
        return pages

    async def measure(self, view: RoundView) -> dict[str, float]:
        platform = view.platform
        log = getattr(platform, "recommended", None)
        if log is None:
            return {"users": 0.0}
        genres = {}
        for user, ids in log.items():
            genres[user] = [platform.item(i).genres for i in ids if platform.item(i) is not None]
            self.seen.setdefault(user, Counter()).update(g for item in genres[user] for g in (item or (NO_CATEGORY,)))
        in_interest = None
        if self.config.users == "everyone":
            genres = {user: [platform.item(i).genres for i in ids if platform.item(i) is not None]
                      for user, ids in self.probe_pages(view).items()}
            in_interest = interest_share(genres, {a.id: a.persona.fields.get("interests") for a in view.agents})
        value = cocoon_entropy(genres)
        out = {"users": float(sum(1 for items in genres.values() if items))}
        if in_interest is not None:
            out["in_interest"] = in_interest
        if value is not None:
            out["entropy"] = value
            out["entropy_first_genre"] = cocoon_entropy(genres, first_genre=True)
        if not self.reference_done and self.config.random_pages and getattr(platform, "catalogue", None) is not None:
            self.reference_done = True
            catalogue = [item.genres for item in platform.catalogue.items]
            size = getattr(platform, "page_size", 5)
            for key, first in (("random_page", False), ("random_page_first_genre", True)):
                out[key] = random_page_entropy(catalogue, size, self.config.random_pages, np.random.default_rng([self.seed, 61]), first)
        cumulative = [counter_entropy(c) for c in self.seen.values() if c]
        if cumulative:
            out["entropy_cumulative"] = sum(cumulative) / len(cumulative)
        if self.llm is not None and view.round % self.config.satisfaction_every == 0:
            mean = await self.satisfaction(view)
            if mean is not None:
                out["satisfaction"] = mean
        return out

    def get_state(self) -> dict[str, Any]:
        return {"seen": {u: dict(c) for u, c in self.seen.items()}, "reference_done": self.reference_done}

    def set_state(self, state: dict[str, Any]) -> None:
        self.seen = {u: Counter(c) for u, c in state.get("seen", {}).items()}
        self.reference_done = bool(state.get("reference_done", False))


def build_cocoon_entropy(config: CocoonEntropyConfig | None, ctx: BuildContext) -> CocoonEntropy:
    return CocoonEntropy(config, ctx)


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("cocoon_entropy", build_cocoon_entropy, config_model=CocoonEntropyConfig,
                       description="recsys: entropy of the recommended items' genres per user, averaged (RecAgent fig. 4)")]
