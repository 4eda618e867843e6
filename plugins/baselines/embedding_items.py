"""The Embedding baseline on the recommender-system platform: picks items by cosine, no LLM.

RecAgent compares its agents with an "Embedding" simulator (Wang et al., fig. 2a) whose users
pick the listed items closest to them. This policy (``embedding_items``) is that user on the
``recsys`` platform, with text embeddings of the persona and of each item's line (title, genres,
description) in place of learned vectors; it is what the offline cocoon experiment runs
(``benchmarks/cocoon.py``). Each time the agent is active it

1. reads the broadcasts its friends sent since its last step; the items in them are *heard of*;
2. enters the system; with probability ``friend_influence`` and a heard-of item it has not
   watched, it searches that item's title and watches it (a friend's tip);
3. else, with probability ``search_probability``, it searches one of its persona's
   ``interests`` (at random) and watches the closest unwatched result, as RecAgent's agents
   search by category (the paper trains MF on "searching behaviors and system recommendations");
4. otherwise it looks at up to ``max_pages`` recommendation pages and watches the item with the
   highest cosine to its persona on the first page where one reaches ``watch_threshold``;
5. rates a watched item ``clip(round(5 + 10 * cos), 1, 10)`` (our mapping), broadcasts it with
   its rating to its friends with probability ``broadcast_probability``, and leaves.

The persona vector is embedded once and checkpointed. Values are our choices (the paper gives
none); with the hash embedder, a persona that names two genres scores about 0.2-0.4 against an
item of one of them and under 0.1 against others.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import Action, BuildContext, ComponentError, PolicySpec, StepContext, hookimpl


class EmbeddingItemsConfig(BaseModel):
    """``[plugins.embedding_items]`` settings."""

    model_config = ConfigDict(extra="forbid")

    watch_threshold: float = Field(0.1, ge=-1.0, le=1.0, description="lowest cosine an item needs to be watched")
    max_pages: int = Field(2, ge=1)
    friend_influence: float = Field(0.3, ge=0.0, le=1.0, description="chance of watching a friend's tip instead")
    broadcast_probability: float = Field(0.5, ge=0.0, le=1.0)
    search_probability: float = Field(0.0, ge=0.0, le=1.0, description="chance of searching one of the persona's interests")


class EmbeddingItems:
    def __init__(self, config: EmbeddingItemsConfig | None, ctx: BuildContext):
        self.config = config or EmbeddingItemsConfig()
        platform = ctx.services.platform if ctx.services is not None else None
        if platform is None or not hasattr(platform, "join"):
            raise ComponentError('embedding_items needs the platform "recsys": add [platform] name = "recsys"')
        platform.join(ctx.agent)
        self._persona: np.ndarray | None = None
        self.heard_of: list[str] = []
        self.inbox_seen = 0

    async def persona(self, ctx: StepContext) -> np.ndarray:
        if self._persona is None:
            self._persona = np.asarray(await ctx.embedder.embed_one(ctx.agent.persona.text), dtype=np.float32)
        return self._persona

    async def step(self, ctx: StepContext) -> list[Action]:
        cfg, me, platform = self.config, ctx.agent.id, ctx.platform
        messages = platform.inbox(me, self.inbox_seen)
        self.inbox_seen += len(messages)
        watched = {i.id for i in platform.watched(me)}
        for message in messages:
            self.heard_of += [i for i in message.get("items", ()) if i not in watched and i not in self.heard_of]
        self.heard_of = [i for i in self.heard_of if i not in watched]
        persona = await self.persona(ctx)
        actions = [Action(me, "enter")]
        chosen = None
        if self.heard_of and ctx.rng.random() < cfg.friend_influence:
            item = platform.item(self.heard_of.pop(0))
            found = platform.search_items(item.title, platform.page_size) if item is not None else []
            actions.append(Action(me, "search", text=item.title if item else "", post_ids=tuple(i.id for i in found)))
            if item is not None and any(i.id == item.id for i in found):
                chosen = (item, float((await ctx.embedder.embed([item.line()]))[0] @ persona))
        interests = [str(i) for i in ctx.agent.persona.fields.get("interests") or ()]
        if chosen is None and interests and cfg.search_probability > 0 and ctx.rng.random() < cfg.search_probability:
            query = interests[int(ctx.rng.integers(len(interests)))]
            found = [i for i in platform.search_items(query, 50) if i.id not in watched][:platform.page_size]
            actions.append(Action(me, "search", text=query, post_ids=tuple(i.id for i in found)))
            if found:
                cosine = (await ctx.embedder.embed([i.line() for i in found])) @ persona
                best = int(np.argmax(cosine))
                chosen = (found[best], float(cosine[best]))
        if chosen is None:
            size = platform.page_size
            ranked = platform.recommend(me, size * cfg.max_pages, ctx.rng)
            for page in range(cfg.max_pages):
                items = ranked[page * size:(page + 1) * size]
                if not items:
                    break
                actions.append(Action(me, "recommend" if page == 0 else "next_page", post_ids=tuple(i.id for i in items),
                                      detail={"page": page}))
                cosine = (await ctx.embedder.embed([i.line() for i in items])) @ persona
                best = int(np.argmax(cosine))
                if cosine[best] >= cfg.watch_threshold:
                    chosen = (items[best], float(cosine[best]))
                    break
        if chosen is not None:
            item, cos = chosen
            rating = int(np.clip(round(5 + 10 * cos), 1, 10))
            actions.append(Action(me, "watch", target_post=item.id, text=f"cosine {cos:.3f}",
                                  detail={"rating": rating, "title": item.title, "genres": list(item.genres), "similarity": round(cos, 4)}))
            if platform.friends(me) and ctx.rng.random() < cfg.broadcast_probability:
                actions.append(Action(me, "broadcast", text=f"I watched <{item.title}> and rate it {rating}/10.", detail={"items": [item.id]}))
        actions.append(Action(me, "leave"))
        return actions

    def get_state(self) -> dict[str, Any]:
        return {"persona": None if self._persona is None else self._persona.tolist(), "heard_of": list(self.heard_of),
                "inbox_seen": self.inbox_seen}

    def set_state(self, state: dict[str, Any]) -> None:
        vector = state.get("persona")
        self._persona = None if vector is None else np.asarray(vector, dtype=np.float32)
        self.heard_of = list(state.get("heard_of", []))
        self.inbox_seen = int(state.get("inbox_seen", 0))


@hookimpl
def townsquare_register_policies():
    return [PolicySpec("embedding_items", EmbeddingItems, config_model=EmbeddingItemsConfig,
                       description="recsys: watches the listed item closest to the persona (cosine), no LLM (RecAgent's Embedding baseline)")]
