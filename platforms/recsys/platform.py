"""The recommender-system platform (Wang et al., "Simulator"; DESIGN.md §4).

Agents enter the system, get a page of recommendations (``page_size`` 5 as in the paper),
turn to the next page, search by keyword or category, watch an item (then write a one-line
feeling and a rating 1-10) and leave; beside the system they chat one-to-one and broadcast to
their friends. The action vocabulary is :data:`RECSYS_ACTIONS`; the engine refuses any other.

Reads (pages, search results, inboxes) happen during agent steps and never change state; the
engine applies the round's actions afterwards, in a fixed order: what was shown and watched
feeds the interaction log that the run's item recommender learns from, and chats and
broadcasts land in the receivers' inboxes for their next step.

The friend graph comes from the personas (field ``friends``: display names, as RecAgent's
relationship files give them). Policies call :meth:`RecsysPlatform.join` when their agent is
built, so the platform can show one agent's profile and earlier memories to its chat partner
(the paper's chat uses both sides' profiles and memories).

What a user is offered (:meth:`RecsysPlatform.recommend`): the recommender ranks the catalogue
less the items the user watched in the run or rated before it (``exclude_seen``; a persona's
``history`` holds its earlier ratings, e.g. a MovieLens user's) and, unless ``reshow``, less
every item already shown to the user on a page or in search results: the reference code
never recommends an item twice to the same user. With ``history_in_log`` a persona's earlier
ratings enter the interaction log when its agent joins (ratings on a 1-5 scale doubled to 1-10),
so the recommender learns from the real user's past as well as from the run.
"""

from __future__ import annotations

from typing import Any

import structlog

from townsquare.api import AccountView, Action, ActionResult, Agent, ComponentError, PostView
from townsquare.lib.items import Item, ItemInteractions, ItemRecommender

from .catalogue import Catalogue

log = structlog.get_logger("townsquare.platforms.recsys")


def history_of(persona: Any) -> list[dict[str, Any]]:
    """A persona's earlier ratings: field ``history``, a list of {"id", "title", "rating"}."""
    return [entry for entry in persona.fields.get("history") or () if isinstance(entry, dict) and "id" in entry]

#: What agents do on the recommender-system platform (Wang et al., "Simulator" and "Action Module").
RECSYS_ACTIONS: frozenset[str] = frozenset(
    {"enter", "recommend", "next_page", "search", "watch", "leave", "chat", "broadcast"}
)


class RecsysPlatform:
    actions = RECSYS_ACTIONS

    def __init__(self, catalogue: Catalogue, recommender: ItemRecommender, page_size: int = 5, *, reshow: bool = False,
                 exclude_seen: bool = True, history_in_log: bool = True):
        if not hasattr(recommender, "rank_items"):
            raise ComponentError(
                f"platform 'recsys' needs an item recommender (item_popularity, item_random...), got {type(recommender).__name__}: "
                "add [recommender] name = \"item_popularity\" to the scenario")
        self.catalogue = catalogue
        self.recommender = recommender
        self.page_size = page_size
        self.reshow = reshow
        self.exclude_seen = exclude_seen
        self.history_in_log = history_in_log
        self.interactions = ItemInteractions()
        self.accounts: dict[str, AccountView] = {}
        self.members: dict[str, Agent] = {}  # live agents (not state: rebuilt when agents are built)
        self.inboxes: dict[str, list[dict[str, Any]]] = {}
        self.broadcasts: list[dict[str, Any]] = []
        self.in_system: dict[str, bool] = {}
        #: this round's recommendation pages per agent (item ids, in order): the cocoon metric reads it
        self.recommended: dict[str, list[str]] = {}
        #: friendships added during the run (Soc-Strategy), both directions
        self.extra_friends: dict[str, list[str]] = {}

    def on_round_start(self, round: int, now: Any) -> None:
        self.recommended = {}

    # ------------------------------------------------------------------ accounts and friends

    def join(self, agent: Agent) -> None:
        """Called by a policy when its agent is built. The persona's earlier ratings (field
        ``history``) enter the interaction log once (``history_in_log``; a resumed run has them
        from its checkpoint)."""
        self.members[agent.id] = agent
        if self.history_in_log and agent.id not in self.interactions.watched:
            for entry in history_of(agent.persona):
                if entry["id"] in self.catalogue.by_id:
                    rating = entry.get("rating")
                    self.interactions.record_watch(agent.id, entry["id"], None if rating is None else min(10.0, max(1.0, 2 * float(rating))))

    def rated_before(self, agent_id: str) -> set[str]:
        """Ids of the items the agent's persona rated before the run (its ``history``)."""
        agent = self.members.get(agent_id)
        return {entry["id"] for entry in history_of(agent.persona)} if agent is not None else set()

    async def register_account(self, agent_id: str, display_name: str, bio: str) -> AccountView:
        account = AccountView(id=agent_id, handle=agent_id, display_name=display_name, bio=bio)
        self.accounts[agent_id] = account
        return account

    def friends(self, agent_id: str) -> list[str]:
        """Ids of this agent's friends: the agents whose persona ``id`` is in its persona's
        ``friend_ids`` or, without those, whose display name is in its ``friends``."""
        agent = self.members.get(agent_id)
        if agent is None:
            return []
        ids = agent.persona.fields.get("friend_ids")
        if ids is not None:
            wanted = {str(i) for i in ids}
            return self._with_extra(agent_id, [m.id for m in self.members.values()
                                               if str(m.persona.fields.get("id")) in wanted and m.id != agent_id])
        names = set(agent.persona.fields.get("friends") or ())
        found = [a.id for a in self.accounts.values() if a.display_name in names and a.id != agent_id]
        return self._with_extra(agent_id, found)

    def _with_extra(self, agent_id: str, found: list[str]) -> list[str]:
        return list(dict.fromkeys([*found, *self.extra_friends.get(agent_id, ())]))

    def add_friend(self, a: str, b: str) -> None:
        """Make ``a`` and ``b`` friends from now on (an intervention such as Soc-Strategy)."""
        for x, y in ((a, b), (b, a)):
            if y not in self.extra_friends.setdefault(x, []):
                self.extra_friends[x].append(y)

    async def followers(self, agent_id: str) -> list[str]:
        return self.friends(agent_id)

    async def following(self, agent_id: str) -> list[str]:
        return self.friends(agent_id)

    async def profile(self, agent_id: str) -> AccountView | None:
        return self.accounts.get(agent_id)

    # ------------------------------------------------------------------ reads

    def offerable(self, viewer: str) -> list[Item]:
        """The items ``viewer`` may be recommended (see the module docstring)."""
        excluded: set[str] = set()
        if self.exclude_seen:
            excluded |= set(self.interactions.watched.get(viewer, ())) | self.rated_before(viewer)
        if not self.reshow:
            excluded |= set(self.interactions.shown.get(viewer, ()))
        return [item for item in self.catalogue.items if item.id not in excluded] if excluded else list(self.catalogue.items)

    def recommend(self, viewer: str, limit: int, rng: Any = None) -> list[Item]:
        """The recommender's ranking for ``viewer`` over the items it may be offered."""
        return self.recommender.rank_items(viewer, self.offerable(viewer), limit, rng, self.interactions)

    def search_items(self, query: str, limit: int) -> list[Item]:
        return self.catalogue.search(query)[:limit]

    def item(self, item_id: str) -> Item | None:
        return self.catalogue.get(item_id)

    def watched(self, agent_id: str) -> list[Item]:
        return [self.catalogue.by_id[i] for i in self.interactions.watched.get(agent_id, ()) if i in self.catalogue.by_id]

    def inbox(self, agent_id: str, start: int = 0) -> list[dict[str, Any]]:
        """Messages this agent received (chats and broadcasts), from index ``start`` on."""
        return [dict(m) for m in self.inboxes.get(agent_id, [])[start:]]

    async def home_timeline(self, viewer: str, limit: int, *, rng: Any = None, author_filter: Any = None) -> list[PostView]:
        """Friends' broadcasts, newest first (the platform's only feed)."""
        friends = set(self.friends(viewer))
        posts = [b for b in reversed(self.broadcasts) if b["author"] in friends and (author_filter is None or b["author"] in author_filter)]
        return [self._view(b) for b in posts[:limit]]

    async def public_timeline(self, limit: int) -> list[PostView]:
        return [self._view(b) for b in list(reversed(self.broadcasts))[:limit]]

    async def search(self, query: str, limit: int) -> list[PostView]:
        needle = query.lower()
        return [self._view(b) for b in reversed(self.broadcasts) if needle in b["text"].lower()][:limit]

    async def get_post(self, post_id: str) -> PostView | None:
        found = next((b for b in self.broadcasts if b["id"] == post_id), None)
        return self._view(found) if found else None

    def _view(self, b: dict[str, Any]) -> PostView:
        return PostView(id=b["id"], author_id=b["author"], text=b["text"], round=b["round"], created_at=b["created_at"],
                        extra={"items": list(b.get("items", ()))})

    # ------------------------------------------------------------------ writes

    async def apply(self, action: Action, round: int, now: str) -> ActionResult:
        handler = getattr(self, f"_apply_{action.kind}", None)
        if action.kind not in RECSYS_ACTIONS or handler is None:
            return ActionResult(ok=False, error=f"platform 'recsys' does not accept {action.kind!r}")
        if action.agent_id not in self.accounts:
            return ActionResult(ok=False, error=f"unknown agent {action.agent_id!r}")
        return handler(action, round, now)

    def _apply_enter(self, action: Action, round: int, now: str) -> ActionResult:
        self.in_system[action.agent_id] = True
        return ActionResult()

    def _apply_leave(self, action: Action, round: int, now: str) -> ActionResult:
        self.in_system[action.agent_id] = False
        return ActionResult()

    def _shown(self, action: Action, round: int, now: str) -> ActionResult:
        unknown = [i for i in action.post_ids if i not in self.catalogue.by_id]
        if unknown:
            return ActionResult(ok=False, error=f"unknown item {unknown[0]!r}")
        self.interactions.record_shown(action.agent_id, action.post_ids)
        return ActionResult()

    def _recommended(self, action: Action, round: int, now: str) -> ActionResult:
        result = self._shown(action, round, now)
        if result.ok:
            self.recommended.setdefault(action.agent_id, []).extend(action.post_ids)
        return result

    _apply_search = _shown
    _apply_recommend = _apply_next_page = _recommended

    def _apply_watch(self, action: Action, round: int, now: str) -> ActionResult:
        item_id = action.target_post
        if item_id not in self.catalogue.by_id:
            return ActionResult(ok=False, error=f"unknown item {item_id!r}")
        rating = action.detail.get("rating")
        if rating is not None and not (isinstance(rating, (int, float)) and 1 <= rating <= 10):
            return ActionResult(ok=False, error=f"rating {rating!r} is not in 1-10")
        self.interactions.record_watch(action.agent_id, item_id, rating)
        return ActionResult()

    def _deliver(self, receiver: str, message: dict[str, Any]) -> None:
        self.inboxes.setdefault(receiver, []).append(message)

    def _apply_chat(self, action: Action, round: int, now: str) -> ActionResult:
        partner = action.target_agent
        if partner not in self.accounts or partner == action.agent_id:
            return ActionResult(ok=False, error=f"cannot chat with {partner!r}")
        self._deliver(partner, {"kind": "chat", "from": action.agent_id, "round": round, "text": action.text or "",
                                "items": list(action.detail.get("items", ()))})
        return ActionResult()

    def _apply_broadcast(self, action: Action, round: int, now: str) -> ActionResult:
        if not (action.text or "").strip():
            return ActionResult(ok=False, error="empty broadcast")
        post_id = f"b{len(self.broadcasts) + 1}"
        message = {"id": post_id, "author": action.agent_id, "round": round, "created_at": now, "text": action.text,
                   "items": list(action.detail.get("items", ()))}
        self.broadcasts.append(message)
        for friend in self.friends(action.agent_id):
            self._deliver(friend, {"kind": "broadcast", "from": action.agent_id, "round": round, "text": action.text,
                                   "items": message["items"], "post_id": post_id})
        return ActionResult(created_id=post_id)

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {
            "interactions": self.interactions.get_state(),
            "inboxes": {k: [dict(m) for m in v] for k, v in self.inboxes.items()},
            "broadcasts": [dict(b) for b in self.broadcasts],
            "in_system": dict(self.in_system),
            "extra_friends": {k: list(v) for k, v in self.extra_friends.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.interactions.set_state(state.get("interactions", {}))
        self.inboxes = {k: [dict(m) for m in v] for k, v in state.get("inboxes", {}).items()}
        self.broadcasts = [dict(b) for b in state.get("broadcasts", [])]
        self.in_system = dict(state.get("in_system", {}))
        self.extra_friends = {k: list(v) for k, v in state.get("extra_friends", {}).items()}


