"""Do agents engage with posts that fit their persona? (Zhou et al. Table 1, appendix ΔBS.)

Zhou et al. compare the BERTScore between persona and post for posts an agent liked, reblogged
or commented on with posts it browsed and did not (``like`` vs ``not like``...), and report
ΔBS = score(action) - score(no action). Here the score is the cosine similarity of the run's
own embedder (the one its components used, rebuilt from the manifest), not BERTScore.

Choices where the paper is silent:

* per agent, the mean cosine between its persona text (:attr:`Persona.text`) and each post in
  a set; then the mean over the agents whose set is not empty (each agent weighs the same, however
  much it browsed); Δ = mean(acted) - mean(not acted);
* ``not like`` = posts the agent was shown (``browse``) and did not like; ``engaged`` = liked,
  reblogged or commented; ``browsed only`` = shown and none of the three;
* an agent's own posts are left out of every set (a feed may show them; they would flatter it);
* the ``post`` row (Table 1's last row): the agent's own top-level posts against its persona.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from townsquare.api import BuildContext, EmbeddingCache, UsageError
from townsquare.api.commands import load_plugins, resolve_scenario

ACTIONS = ("like", "reblog", "comment")

Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass
class Comparison:
    """One line pair of Table 1: posts the agents acted on vs posts they only saw."""

    action: str  # like | reblog | comment | engaged
    acted: float | None
    not_acted: float | None
    agents_acted: int
    agents_not: int
    posts_acted: int
    posts_not: int

    @property
    def delta(self) -> float | None:
        if self.acted is None or self.not_acted is None:
            return None
        return self.acted - self.not_acted


@dataclass
class SimilarityResult:
    embedder: str
    rows: list[Comparison]
    post_mean: float | None = None
    post_agents: int = 0
    posts: int = 0
    #: agent -> (mean over engaged posts, mean over browsed-only posts); None where empty
    per_agent: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)


def compare(
    personas: dict[str, str],
    engagement: dict[str, dict[str, set[str]]],
    posts: dict[str, tuple[str, str]],
    own_posts: dict[str, list[str]],
    embed: Embed,
    embedder_name: str = "",
) -> SimilarityResult:
    """``personas``: agent -> persona text; ``engagement``: agent -> {"browse"/"like"/...: post
    ids} (see :func:`tables.engagement`); ``posts``: post id -> (author, text); ``embed``: texts
    -> unit rows (a dot product is a cosine)."""
    # Which post texts each agent's sets hold; embedded all at once below.
    sets: dict[str, dict[str, list[str]]] = {}
    for agent, seen in engagement.items():
        if agent not in personas:
            continue
        known = {p for p in seen["browse"].union(*(seen[a] for a in ACTIONS)) if p in posts and posts[p][0] != agent}
        browsed = seen["browse"] & known
        chosen: dict[str, set[str]] = {"engaged": set()}
        for action in ACTIONS:
            chosen[action] = seen[action] & known
            chosen[f"not {action}"] = browsed - chosen[action]
            chosen["engaged"] |= chosen[action]
        chosen["not engaged"] = browsed - chosen["engaged"]
        sets[agent] = {key: [posts[p][1] for p in sorted(ids)] for key, ids in chosen.items()}
    for agent, own in own_posts.items():
        if agent in personas and own:
            sets.setdefault(agent, {})["post"] = list(own)

    texts = list(dict.fromkeys([personas[a] for a in sets] + [t for s in sets.values() for ts in s.values() for t in ts]))
    vectors = embed(texts) if texts else None
    row_of = {t: i for i, t in enumerate(texts)}

    per_set: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    per_agent: dict[str, tuple[float | None, float | None]] = {}
    for agent, agent_sets in sets.items():
        persona = vectors[row_of[personas[agent]]]
        means: dict[str, float] = {}
        for key, post_texts in agent_sets.items():
            if post_texts:
                means[key] = float(np.mean(vectors[[row_of[t] for t in post_texts]] @ persona))
                per_set.setdefault(key, []).append(means[key])
                counts[key] = counts.get(key, 0) + len(post_texts)
        if "not engaged" in agent_sets:
            per_agent[agent] = (means.get("engaged"), means.get("not engaged"))

    def mean(key: str) -> float | None:
        values = per_set.get(key)
        return float(np.mean(values)) if values else None

    def agents(key: str) -> int:
        return len(per_set.get(key, []))

    rows = [Comparison(a, mean(a), mean(f"not {a}"), agents(a), agents(f"not {a}"), counts.get(a, 0), counts.get(f"not {a}", 0))
            for a in (*ACTIONS, "engaged")]
    return SimilarityResult(embedder_name, rows, post_mean=mean("post"), post_agents=agents("post"), posts=counts.get("post", 0),
                            per_agent=per_agent)


# --------------------------------------------------------------------------- the run's embedder


def run_embedder(manifest: dict[str, Any], manifest_path: str, plugin_options: Sequence[str] = (),
                 plugins: Any = None) -> tuple[EmbeddingCache, str]:
    """The embedder the run used, rebuilt from its manifest with the plugins it ran with (its
    ``plugin_options`` plus ``plugin_options`` given now), or with ``plugins`` when given. When the scenario left the embedder
    ``auto``, the one recorded in the slot table is asked for by name, so a plugin installed
    since cannot silently replace it."""
    scenario = dict(manifest.get("scenario") or {})
    if not scenario:
        raise UsageError(f"{manifest_path}: no scenario recorded")
    used = next((r.get("component") for r in manifest.get("slot_table", []) if r.get("slot") == "embedder"), None)
    table = dict(scenario.get("embedder") or {"name": "auto"})
    if table.get("name") == "auto" and used:
        table["name"] = used
    scenario["embedder"] = table
    if plugins is None:
        plugins = load_plugins([*manifest.get("plugin_options", []), *plugin_options])
    resolved = resolve_scenario(scenario, manifest_path, manifest.get("base_dir", "."), plugins)
    choice = resolved.embedder
    ctx = BuildContext(services=None, seed=int(manifest.get("seed", resolved.model.seed)), base_dir=resolved.base_dir,
                       scenario=resolved.model)
    return EmbeddingCache(choice.spec.factory(choice.config, ctx)), choice.spec.name


def sync_embed(cache: EmbeddingCache, batch: int = 512) -> Embed:
    """A blocking ``embed(texts)`` over the cache, in batches (one event loop for all)."""

    async def run(texts: Sequence[str]) -> np.ndarray:
        parts = [await cache.embed(list(texts[i:i + batch])) for i in range(0, len(texts), batch)]
        return np.concatenate(parts) if parts else np.zeros((0, cache.dim), dtype=np.float32)

    return lambda texts: asyncio.run(run(texts))
