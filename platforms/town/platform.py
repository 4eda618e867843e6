"""The town platform (Park et al. §5, Smallville in text; DESIGN.md §4).

Agents live in arenas of the environment tree (:mod:`.world`). The action vocabulary is
:data:`TOWN_ACTIONS`; the engine refuses any other kind:

* ``move``: go to an arena, ``detail["to"]`` = ``world:sector:arena``. Only an arena the agent
  knows (its spatial memory) is accepted. Leaving frees the object it was using.
* ``use``: use an object of the agent's arena, ``detail["object"]`` = its address (or its
  name), ``detail["state"]`` = what it is doing with it ("being used to brew coffee"; the
  object's new state). The object used before goes back to ``idle``.
* ``talk``: start a conversation with ``target_agent``, who must be in the same arena and
  awake; each agent takes part in at most one conversation a round. The platform checks and records it;
  the dialogue itself (Park's :class:`Conversation`) is run by the speaker's policy once the
  action is accepted.
* ``wait``: stay and keep doing what one does (``detail["activity"]``).
* ``learn``: the agent now knows the sectors ``detail["sectors"]`` names (sector names of the
  town; each with all its arenas and their objects, as arriving there would show them): what it
  was told of a place (a conversation that named it) joins its spatial memory.

Every action may carry ``detail["activity"]``, the agent's current activity in words: others
perceive it. Perception (:meth:`TownPlatform.perceive`): the other agents and the objects of the
agent's arena as short sentences, at most ``att_bandwidth`` of them (the seed files' name).

What an agent sees it learns (§5.1: agents "update [their environment tree] to reflect newly
perceived areas"): wherever it is (its start, each arrival), the arena it stands in and every
other arena of the same sector join its spatial memory with their objects (the building it is
in, as the reference code's vision radius takes in the tiles around the agent). So the places
an agent can go grow with where it has been, and with the places it is told of (``learn``; the
reference code's agents also see the sectors they walk past, which a town of text has no path
for).

Asleep. An agent that took no action in the round before this one (its plan has it asleep, so
the engine did not step it), or whose activity says it is sleeping, is asleep: others perceive
it sleeping and cannot start a conversation with it (the reference code refuses a chat when
either side is sleeping). Agents that act every round are always awake.

Reads happen during agent steps and never change state; writes only in :meth:`apply`.
"""

from __future__ import annotations

import re
from typing import Any

import structlog

from townsquare.api import AccountView, Action, ActionResult, Agent, PostView

from . import world as w

log = structlog.get_logger("townsquare.platforms.town")

#: What agents do in the town (Park et al. §5.1: move, use objects, talk; and wait, and learn of a place).
TOWN_ACTIONS: frozenset[str] = frozenset({"move", "use", "talk", "wait", "learn"})
#: words of an activity that mean the agent is asleep
SLEEP_WORDS = ("sleeping", "asleep")


class TownPlatform:
    actions = TOWN_ACTIONS

    def __init__(self, world: w.World, spatial: dict[str, w.Tree] | None = None, homes: dict[str, str] | None = None,
                 att_bandwidth: int = 8):
        self.world = world
        self.spatial_seed = spatial or {}  # persona name -> known tree (the seed files)
        self.homes = homes or {}  # persona name -> arena address
        self.att_bandwidth = att_bandwidth
        self.members: dict[str, Agent] = {}  # live agents (rebuilt when agents are built)
        self.accounts: dict[str, AccountView] = {}
        self.names: dict[str, str] = {}  # agent id -> display name
        self.position: dict[str, str] = {}  # agent id -> arena address
        self.using: dict[str, str] = {}  # agent id -> object address
        self.activity: dict[str, str] = {}  # agent id -> what it is doing, in words
        self.known: dict[str, w.Tree] = {}  # agent id -> spatial memory
        self.talked: dict[str, int] = {}  # agent id -> the round of its last conversation
        self.acted: dict[str, int] = {}  # agent id -> the last round it took an action in
        self.round = 0

    # ------------------------------------------------------------------ agents

    def join(self, agent: Agent) -> None:
        """Called by a policy when its agent is built: the agent's spatial memory and start.

        The known tree is the persona's ``spatial_memory`` field, else the seed tree of the
        persona's name, else the whole town; the start is the persona's ``living_area``, else
        the home the seed files give, else the first known arena. The start arena is always
        known (added when missing)."""
        self.members[agent.id] = agent
        self.names[agent.id] = agent.persona.name
        if agent.id in self.known:  # restored from a checkpoint, or joined twice
            return
        fields = agent.persona.fields
        seed = fields.get("spatial_memory")
        tree = w.read_tree(seed, f"persona {agent.persona.name!r}: spatial_memory") if seed else \
            w.copy_tree(self.spatial_seed.get(agent.persona.name) or self.world.tree)
        home = str(fields.get("living_area") or self.homes.get(agent.persona.name) or "")
        start = w.arena_of(home) if home else ""
        if not start or not w.has_arena(self.world.tree, start):
            known_in_town = [a for a in w.arenas(tree) if w.has_arena(self.world.tree, a)]
            start = (known_in_town or w.arenas(self.world.tree))[0]
        self.known[agent.id] = tree
        self._arrive(agent.id, start)

    def _arrive(self, agent_id: str, arena: str) -> bool:
        """The agent is in ``arena``; it sees the arena and the rest of its sector (True when
        that taught it anything)."""
        self.position[agent_id] = arena
        world, sector, name = w.split(arena)
        learned = w.merge_arena(self.known[agent_id], world, sector, name, self.world.objects(arena))
        for other in w.arenas_of(self.world.tree, world, sector):
            learned |= w.merge_arena(self.known[agent_id], world, sector, other,
                                     self.world.objects(w.join(world, sector, other)))
        return learned

    def on_round_start(self, round: int, now: Any) -> None:
        self.round = round

    def asleep(self, agent_id: str, round: int | None = None) -> bool:
        """Whether ``agent_id`` is asleep in ``round`` (default: the current one; see the module
        docstring)."""
        now = self.round if round is None else round
        doing = self.activity.get(agent_id, "").lower()
        return self.acted.get(agent_id, -2) < now - 1 or any(word in doing for word in SLEEP_WORDS)

    async def register_account(self, agent_id: str, display_name: str, bio: str) -> AccountView:
        account = AccountView(id=agent_id, handle=agent_id, display_name=display_name, bio=bio)
        self.accounts[agent_id] = account
        self.names.setdefault(agent_id, display_name)
        return account

    async def profile(self, agent_id: str) -> AccountView | None:
        return self.accounts.get(agent_id)

    async def followers(self, agent_id: str) -> list[str]:
        return []

    async def following(self, agent_id: str) -> list[str]:
        return []

    # ------------------------------------------------------------------ reads

    def where(self, agent_id: str) -> str | None:
        return self.position.get(agent_id)

    def doing(self, agent_id: str) -> str | None:
        """What ``agent_id`` is doing, in words (its last action's activity)."""
        return self.activity.get(agent_id)

    def spatial_memory(self, agent_id: str, told: list[str] | None = None) -> w.Tree:
        """A copy of what ``agent_id`` knows of the town (with the sectors ``told`` names, as it
        will know them once its ``learn`` action is applied)."""
        tree = w.copy_tree(self.known.get(agent_id, {}))
        return w.merge(tree, self.sector_tree(told)) if told else tree

    def sectors_named(self, text: str) -> list[str]:
        """The town's sectors whose names ``text`` states (whole words, any case; a longer name
        wins over a shorter one inside it: "Dorm for Oak Hill College" is not "Oak Hill College"),
        in the order they are first named."""
        low, found = text.lower(), []
        taken: list[tuple[int, int]] = []
        for world_name, sectors in self.world.tree.items():
            for sector in sorted(sectors, key=len, reverse=True):
                for match in re.finditer(rf"(?<!\w){re.escape(sector.lower())}(?!\w)", low):
                    if not any(a <= match.start() < b for a, b in taken):
                        taken.append((match.start(), match.end()))
                        found.append((match.start(), sector))
        return list(dict.fromkeys(sector for _, sector in sorted(found)))

    def sector_tree(self, sectors: list[str]) -> w.Tree:
        """The town's arenas of ``sectors`` (names), with their objects, as a tree."""
        tree: w.Tree = {}
        for world_name, known in self.world.tree.items():
            for sector in sectors:
                for arena in w.arenas_of(self.world.tree, world_name, sector) if sector in known else []:
                    w.merge_arena(tree, world_name, sector, arena, self.world.objects(w.join(world_name, sector, arena)))
        return tree

    def present(self, arena: str, but: str | None = None) -> list[str]:
        """Agent ids in ``arena``, in join order."""
        return [a for a, at in self.position.items() if at == arena and a != but]

    def place_text(self, arena: str) -> str:
        """``Hobbs Cafe, cafe`` for ``the Ville:Hobbs Cafe:cafe``."""
        parts = w.split(arena)
        return ", ".join(parts[1:]) if len(parts) == 3 else arena

    def perceive(self, agent_id: str) -> list[str]:
        """What ``agent_id`` perceives in its arena, one short sentence each: the other agents
        (where they are and what they are doing), then the objects and their states; at most
        ``att_bandwidth`` sentences (people first)."""
        arena = self.position.get(agent_id)
        if arena is None:
            return []
        place = self.place_text(arena)
        seen = []
        for other in self.present(arena, but=agent_id):
            doing = "sleeping" if self.asleep(other) else self.activity.get(other)
            seen.append(f"{self.names.get(other, other)} is at {place}" + (f", {doing}" if doing else ""))
        for name in self.world.objects(arena):
            seen.append(f"{self.world.describe_object(w.join(arena, name))} ({place})")
        return seen[: self.att_bandwidth]

    async def home_timeline(self, viewer: str, limit: int, *, rng: Any = None, author_filter: Any = None) -> list[PostView]:
        return []  # the town has no feed: agents perceive their arena instead

    async def public_timeline(self, limit: int) -> list[PostView]:
        return []

    async def search(self, query: str, limit: int) -> list[PostView]:
        return []

    async def get_post(self, post_id: str) -> PostView | None:
        return None

    # ------------------------------------------------------------------ writes

    async def apply(self, action: Action, round: int, now: str) -> ActionResult:
        handler = getattr(self, f"_apply_{action.kind}", None)
        if action.kind not in TOWN_ACTIONS or handler is None:
            return ActionResult(ok=False, error=f"platform 'town' does not accept {action.kind!r}")
        if action.agent_id not in self.position:
            return ActionResult(ok=False, error=f"agent {action.agent_id!r} is not in the town")
        result = handler(action, round)
        if result.ok:
            self.acted[action.agent_id] = round
            if isinstance(action.detail.get("activity"), str):
                self.activity[action.agent_id] = action.detail["activity"][:200]
        return result

    def _release(self, agent_id: str) -> None:
        held = self.using.pop(agent_id, None)
        if held is not None and held not in self.using.values():
            self.world.set_state(held, w.IDLE)

    def _apply_move(self, action: Action, round: int) -> ActionResult:
        target = str(action.detail.get("to") or "")
        if not w.has_arena(self.world.tree, target):
            return ActionResult(ok=False, error=f"no arena {target!r} in the town")
        if not w.has_arena(self.known[action.agent_id], target):
            return ActionResult(ok=False, error=f"{self.names.get(action.agent_id)} does not know {target!r}")
        if self.position[action.agent_id] != target:
            self._release(action.agent_id)
        learned = self._arrive(action.agent_id, target)
        if learned:
            log.debug("town.learned", agent=action.agent_id, arena=target)
        return ActionResult()

    def _object_address(self, agent_id: str, named: str) -> str | None:
        arena = self.position[agent_id]
        if named.startswith(arena + w.SEP):
            named = named[len(arena) + 1:]
        return w.join(arena, named) if named in self.world.objects(arena) else None

    def _apply_use(self, action: Action, round: int) -> ActionResult:
        named = str(action.detail.get("object") or "")
        address = self._object_address(action.agent_id, named)
        if address is None:
            return ActionResult(ok=False, error=f"no object {named!r} in {self.position[action.agent_id]!r}")
        state = " ".join(str(action.detail.get("state") or "in use").split())[:200]
        if self.using.get(action.agent_id) != address:
            self._release(action.agent_id)
        self.using[action.agent_id] = address
        self.world.set_state(address, state)
        return ActionResult()

    def _apply_talk(self, action: Action, round: int) -> ActionResult:
        me, other = action.agent_id, action.target_agent
        if other not in self.position or other == me:
            return ActionResult(ok=False, error=f"cannot talk with {other!r}")
        if self.position[other] != self.position[me]:
            return ActionResult(ok=False, error=f"{self.names.get(other, other)} is not in {self.place_text(self.position[me])}")
        if self.asleep(other, round):
            return ActionResult(ok=False, error=f"{self.names.get(other, other)} is asleep")
        for who in (me, other):
            if self.talked.get(who) == round:
                return ActionResult(ok=False, error=f"{self.names.get(who, who)} is already in a conversation this round")
        self.talked[me] = self.talked[other] = round
        return ActionResult()

    def _apply_wait(self, action: Action, round: int) -> ActionResult:
        return ActionResult()

    def _apply_learn(self, action: Action, round: int) -> ActionResult:
        named = action.detail.get("sectors")
        if not isinstance(named, list) or not named:
            return ActionResult(ok=False, error="learn: detail[\"sectors\"] must be a list of sector names")
        tree = self.sector_tree([str(n) for n in named])
        if not tree:
            return ActionResult(ok=False, error=f"no sector {named[0]!r} in the town")
        w.merge(self.known[action.agent_id], tree)
        return ActionResult()

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {
            "world": self.world.get_state(),
            "position": dict(self.position), "using": dict(self.using), "activity": dict(self.activity),
            "known": {a: w.copy_tree(t) for a, t in self.known.items()}, "talked": dict(self.talked),
            "acted": dict(self.acted), "round": self.round,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.world.set_state_all(state.get("world", {}))
        self.position = dict(state.get("position", {}))
        self.using = dict(state.get("using", {}))
        self.activity = dict(state.get("activity", {}))
        self.known = {a: w.copy_tree(t) for a, t in state.get("known", {}).items()}
        self.talked = {a: int(r) for a, r in state.get("talked", {}).items()}
        self.acted = {a: int(r) for a, r in state.get("acted", {}).items()}
        self.round = int(state.get("round", 0))
