"""RecAgent's action module (Wang et al., "Action Module" and "Simulator"): slot ``policy``,
component ``recagent_policy``, for the platform ``recsys``.

Each round an active agent (Pareto activity, the kernel's activity model) first reads what
friends sent it since its last step (chats and broadcasts become memories, and the items in
them are remembered as *heard of*), then chooses among the recommender system, a social
action, or nothing, and follows the paper's flow:

- recommender system: enter; a page of ``page_size`` recommendations; then, up to
  ``max_steps`` times, watch one listed item (a one-line feeling and a rating 1-10 follow;
  then the visit ends, as in the paper's "Watch ONLY ONE movie" and the reference code),
  see the next page (at most ``max_pages``), search by keyword or category (heard-of items
  are offered), or leave; finally leave;
- social: a one-to-one chat with a friend (see :mod:`.chat`: end detection, ``turn_cap``) or
  one broadcast to all friends;
- nothing.

Every decision is a :class:`.choices.Choice` answered by the policy's ``decider`` (the LLM;
a role-play front end may put a person there), with the unified four-part prompt
(:mod:`.unified_prompt`). Every event is also an observation written to the agent's memory
chain (sensory -> short-term -> long-term, whichever tiers are filled). With
``remember_friends = false`` what friends say never becomes a memory (posts received are not
written, and of a chat only the agent's own lines are): the agent still hears of
the titles they name, and everything else runs as usual, so the setting removes friends'
opinions from memory and nothing more (the conformity study's ablation). Memory tiers that
are disabled are skipped, never replaced by another design's component (``stand_ins=False``):
``-p no:short_term_memory`` is the paper's "w/o short", ``-p no:long_term_memory`` "w/o long",
``-p no:recagent_reflection`` "w/o reflection".
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import Action, BuildContext, ComponentError, MemoryRecord, PolicySpec, StepContext, hookimpl

from . import chat as social
from .choices import Choice, LLMDecider, PersonDecider
from .prompts import fill, load_prompts
from .unified_prompt import PROFILE_FIELDS, memory_tiers, render_profile, unified_prompt

log = structlog.get_logger("townsquare.plugins.recagent.policy")

REQUIRED = {
    "frame": frozenset({"name", "profile", "memory", "context", "instruction"}),
    "activity": frozenset(), "page": frozenset({"items", "heard_of", "labels"}), "search_query": frozenset(),
    "feeling": frozenset({"item", "details"}), "rating": frozenset({"item", "feeling"}), "social": frozenset(),
    "partner": frozenset({"friends"}), "chat_turn": frozenset({"other", "other_profile", "other_memory", "transcript", "known_items"}),
    "broadcast": frozenset({"known_items"}), "profile_filter": frozenset({"name", "profile", "behaviour"}),
    "pick": frozenset({"items", "picked", "labels"}),
}
#: what each behaviour is, for the LLM profile filter
BEHAVIOURS = {
    "activity": "deciding what to do with some free time",
    "recommender": "choosing, watching and rating movies in a movie recommender system",
    "social": "chatting with friends and posting messages to them",
}
DEFAULT_FIELDS = {
    "activity": ["age", "gender", "traits", "interests", "features"],
    "recommender": ["age", "gender", "traits", "interests", "favourites", "features", "history"],
    "social": ["age", "gender", "career", "traits", "interests", "features"],
}
RATINGS = tuple(str(n) for n in range(1, 11))


class RecAgentPolicyConfig(BaseModel):
    """``[plugins.recagent_policy]`` settings (limits are our choices; the paper gives none)."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = Field(4, ge=1, description="decisions per visit to the recommender system")
    max_pages: int = Field(3, ge=1, description="recommendation pages an agent may see per visit")
    turn_cap: int = Field(8, ge=2, description="lines per chat at most")
    recall_k: int = Field(5, ge=0, description="records asked of each memory tier per prompt (long-term caps at its N)")
    partner_memories: int = Field(5, ge=0, description="the chat partner's recent memories shown")
    profile_filter: Literal["fields", "llm"] = Field("fields", description="fields: keep profile_fields; llm: the LLM keeps what matters (the paper)")
    history_memories: int = Field(10, ge=0, description="latest earlier ratings (persona history) written into memory before the first step")
    known_items_shown: int = Field(20, ge=1, description="latest watched or heard-of items a chat or post may name")
    remember_friends: bool = Field(True, description="false: what friends say (messages received, their chat lines) never enters "
                                                     "memory; titles are still heard of (an ablation of the conformity pathway)")
    profile_fields: dict[str, list[str]] = Field(default_factory=lambda: {k: list(v) for k, v in DEFAULT_FIELDS.items()})
    prompts_file: str | None = None


class RecAgentPolicy:
    def __init__(self, config: RecAgentPolicyConfig | None, ctx: BuildContext):
        self.config = config or RecAgentPolicyConfig()
        missing = sorted(set(DEFAULT_FIELDS) - set(self.config.profile_fields))
        if missing:
            raise ComponentError(f"plugins.recagent_policy.profile_fields: missing behaviour {missing[0]!r}")
        self.prompts = load_prompts("policy", REQUIRED, self.config.prompts_file, ctx.base_dir)
        self.decider = LLMDecider()
        self.heard_of: dict[str, str] = {}  # item id -> who told (agent id)
        self.inbox_seen = 0
        self.seeded = False
        self.filtered: dict[str, str] = {}  # "agent name|behaviour" -> profile text kept by the LLM filter
        self.agent, self.services = ctx.agent, ctx.services
        clock = getattr(ctx.scenario, "clock", None) if ctx.scenario is not None else None
        self.minutes_per_round = getattr(clock, "minutes_per_round", 60)
        platform = ctx.services.platform if ctx.services is not None else None
        if platform is None or not hasattr(platform, "join"):
            raise ComponentError("recagent_policy needs the platform 'recsys': add [platform] name = \"recsys\"")
        platform.join(ctx.agent)

    # ------------------------------------------------------------------ memory and prompts

    async def observe(self, ctx: StepContext, text: str, kind: str = "observation", **meta: Any) -> None:
        chain = memory_tiers(ctx)
        if chain:
            await chain.remember(ctx, [MemoryRecord(text, kind=kind, created=ctx.now, meta=meta)])

    async def read_memory(self, ctx: StepContext, query: str) -> list[MemoryRecord]:
        return await memory_tiers(ctx).recall(ctx, query, self.config.recall_k) if self.config.recall_k else []

    async def profile(self, ctx: StepContext, behaviour: str, persona: Any = None, person: str = "second") -> str:
        """``persona``'s profile (the agent's by default) filtered to ``behaviour``, said to the
        agent (``person = "second"``) or about another person (``"third"``: by fields, no LLM)."""
        persona = persona or ctx.agent.persona
        fields = self.config.profile_fields[behaviour]
        if self.config.profile_filter == "fields" or person != "second":
            return render_profile(persona, fields, person)
        key = f"{persona.name}|{behaviour}"
        if key not in self.filtered:
            full = render_profile(persona, PROFILE_FIELDS) if persona.fields else " ".join(persona.sentences)
            answer = await ctx.require_llm("recagent_policy").text(
                fill(self.prompts["profile_filter"], name=persona.name, profile=full, behaviour=BEHAVIOURS[behaviour]),
                purpose="recagent.profile_filter")
            self.filtered[key] = " ".join(answer.split()) or render_profile(persona, fields)
        return self.filtered[key]

    async def prompt(self, ctx: StepContext, behaviour: str, query: str, where: str, instruction: str) -> str:
        profile = await self.profile(ctx, "social" if behaviour in ("social", "broadcast") else behaviour)
        return await unified_prompt(ctx, self.prompts, profile, query, self.config.recall_k, where, instruction)

    def titles(self, ctx: StepContext, ids: Any) -> str:
        names = [f"<{ctx.platform.item(i).title}>" for i in ids if ctx.platform.item(i) is not None]
        return ", ".join(names) or "none"

    def known_items(self, ctx: StepContext, agent_id: str, heard_of: Any) -> list[str]:
        """Ids of the items ``agent_id`` watched (in the run or before it: its persona's
        history) or heard of, the only ones it may talk about: the latest ``known_items_shown``."""
        platform = ctx.platform
        member = platform.members.get(agent_id)
        earlier = [h["id"] for h in (member.persona.fields.get("history") or ()) if isinstance(h, dict) and "id" in h] if member else []
        ids = list(dict.fromkeys([*earlier, *(i.id for i in platform.watched(agent_id)), *heard_of]))
        return [i for i in ids if platform.item(i) is not None][-self.config.known_items_shown:]

    # ------------------------------------------------------------------ the step

    async def step(self, ctx: StepContext) -> list[Action]:
        name = ctx.agent.persona.name
        if not self.seeded:
            self.seeded = True
            await self.seed_memory(ctx)
        await self.read_inbox(ctx)
        prompt = await self.prompt(ctx, "activity", "what to do now", f"{name} has some free time.", self.prompts["activity"])
        choice = await self.decider.decide(ctx, Choice("activity", prompt, ("recommender", "social", "nothing"), default="nothing"))
        actions = await self.visit(ctx) if choice == "recommender" else await self.socialise(ctx) if choice == "social" else []
        if getattr(self.decider, "person", False):
            actions = [replace(a, detail={**a.detail, "played": True}) for a in actions]
        return actions

    async def on_round_start(self, round: int, now: Any) -> None:
        """Before the agent's first round, active or not, its earlier history becomes memory: an
        agent the activity model leaves idle still remembers what it watched before the run."""
        if not self.seeded:
            self.seeded = True
            llm = self.services.llm.for_agent(self.agent.id) if self.services.llm is not None else None
            await self.seed_memory(StepContext(agent=self.agent, round=round, now=now, minutes_per_round=self.minutes_per_round,
                                               services=self.services, llm=llm))

    async def seed_memory(self, ctx: StepContext) -> None:
        """Before the first step: the persona's ``memories`` and its latest earlier ratings
        (``history``, e.g. a MovieLens user's) become observations (the paper's real-data
        alignment: the user's earlier items profile the agent)."""
        name = ctx.agent.persona.name
        for text in ctx.agent.persona.fields.get("memories") or ():
            await self.observe(ctx, text)
        history = [h for h in ctx.agent.persona.fields.get("history") or () if isinstance(h, dict) and h.get("title")]
        for entry in history[-self.config.history_memories:] if self.config.history_memories else ():
            rating = f" and rated it {entry['rating']:g} out of 5" if entry.get("rating") is not None else ""
            await self.observe(ctx, f"{name} watched <{entry['title']}>{rating}.", item=entry.get("id"))

    async def read_inbox(self, ctx: StepContext) -> None:
        messages = ctx.platform.inbox(ctx.agent.id, self.inbox_seen)
        self.inbox_seen += len(messages)
        watched = {i.id for i in ctx.platform.watched(ctx.agent.id)}
        for message in messages:
            sender = ctx.platform.members[message["from"]].persona.name if message["from"] in ctx.platform.members else message["from"]
            if message["kind"] == "chat":
                text = f"{ctx.agent.persona.name} chatted with {sender}:\n{message['text']}"
            else:
                text = f"{sender} posted to friends: {message['text']}"
            for item in message.get("items", ()):
                if item not in watched:
                    self.heard_of.setdefault(item, message["from"])
            if not self.config.remember_friends:  # of a chat, only the agent's own lines; of a post, nothing
                if message["kind"] != "chat":
                    continue
                text = f"{ctx.agent.persona.name} chatted with {sender}:\n{own_lines(message['text'], ctx.agent.persona.name)}"
            await self.observe(ctx, text, kind="chat", sender=message["from"], items=list(message.get("items", ())))

    async def visit(self, ctx: StepContext) -> list[Action]:
        me, name, size = ctx.agent.id, ctx.agent.persona.name, ctx.platform.page_size
        actions = [Action(me, "enter")]
        await self.observe(ctx, f"{name} enters the recommender system.")
        ranked = ctx.platform.recommend(me, size * self.config.max_pages, ctx.rng)
        page = 0
        items = ranked[:size]
        actions.append(Action(me, "recommend", post_ids=tuple(i.id for i in items), detail={"page": 0}))
        await self.observe(ctx, f"{name} is recommended: {self.titles(ctx, [i.id for i in items])}.")
        for _ in range(self.config.max_steps):
            if not items:
                break
            labels = (*[f"watch {n + 1}" for n in range(len(items))], "next page", "search", "leave")
            listing = "\n".join(f"{n + 1}. {item.line()}" for n, item in enumerate(items))
            instruction = fill(self.prompts["page"], items=listing, heard_of=self.titles(ctx, self.heard_of),
                               labels=", ".join(f'"{label}"' for label in labels))
            prompt = await self.prompt(ctx, "recommender", " ".join(i.title for i in items),
                                       f"{name} is browsing the recommender system.", instruction)
            answer = await self.decider.decide(ctx, Choice("page", prompt, labels, default="leave"))
            if answer.startswith("watch "):
                actions.append(await self.watch(ctx, items[int(answer.split()[1]) - 1]))
                break
            elif answer == "next page":
                page += 1
                items = ranked[page * size:(page + 1) * size]
                if page >= self.config.max_pages or not items:
                    break
                actions.append(Action(me, "next_page", post_ids=tuple(i.id for i in items), detail={"page": page}))
                await self.observe(ctx, f"{name} looks at the next page: {self.titles(ctx, [i.id for i in items])}.")
            elif answer == "search":
                items = await self.search(ctx, actions, items)
            else:
                break
        actions.append(Action(me, "leave"))
        await self.observe(ctx, f"{name} leaves the recommender system.")
        return actions

    async def pick(self, ctx: StepContext, items: list[Any], picked: list[Any] = ()) -> Any:
        """The one of ``items`` the agent would watch next (the discrimination and generation
        tests: the agent's profile, memories and context, the list as a page)."""
        labels = tuple(f"watch {n + 1}" for n in range(len(items)))
        listing = "\n".join(f"{n + 1}. {item.line()}" for n, item in enumerate(items))
        already = f"You have already chosen: {self.titles(ctx, [i.id for i in picked])}.\n" if picked else ""
        prompt = await self.prompt(ctx, "recommender", " ".join(i.title for i in items),
                                   f"{ctx.agent.persona.name} is browsing the recommender system.",
                                   fill(self.prompts["pick"], items=listing, picked=already, labels=", ".join(f'"{x}"' for x in labels)))
        answer = await self.decider.decide(ctx, Choice("pick", prompt, labels, default=labels[0]))
        return items[int(answer.split()[1]) - 1]

    async def watch(self, ctx: StepContext, item: Any) -> Action:
        name = ctx.agent.persona.name
        where = f"{name} has just finished watching <{item.title}>."
        prompt = await self.prompt(ctx, "recommender", item.title, where, fill(self.prompts["feeling"], item=item.title, details=item.line()))
        feeling = await self.decider.decide(ctx, Choice("feeling", prompt, (), default="It was fine."))
        prompt = await self.prompt(ctx, "recommender", item.title, where, fill(self.prompts["rating"], item=item.title, feeling=feeling))
        rating = int(await self.decider.decide(ctx, Choice("rating", prompt, RATINGS, default="5")))
        self.heard_of.pop(item.id, None)
        await self.observe(ctx, f"{name} watched <{item.title}> and felt: {feeling} {name} rated it {rating}/10.", item=item.id)
        detail = {"rating": rating, "title": item.title, "genres": list(item.genres)}
        return Action(ctx.agent.id, "watch", target_post=item.id, text=feeling, detail=detail)

    async def search(self, ctx: StepContext, actions: list[Action], items: list[Any]) -> list[Any]:
        name = ctx.agent.persona.name
        default = next(iter(self.heard_of), None)
        fallback = ctx.platform.item(default).title if default else next(iter(ctx.agent.persona.fields.get("interests") or []), "movies")
        prompt = await self.prompt(ctx, "recommender", "movies I heard of", f"{name} is about to search the recommender system.",
                                   self.prompts["search_query"] + f"\nMovies you have heard about: {self.titles(ctx, self.heard_of)}")
        query = (await self.decider.decide(ctx, Choice("search_query", prompt, (), default=fallback))).strip("<>\"' ") or fallback
        found = ctx.platform.search_items(query, ctx.platform.page_size)
        actions.append(Action(ctx.agent.id, "search", text=query, post_ids=tuple(i.id for i in found)))
        if not found:
            await self.observe(ctx, f"{name} searched for {query!r} and found nothing.")
            return items
        await self.observe(ctx, f"{name} searched for {query!r} and found {self.titles(ctx, [i.id for i in found])}.")
        return found

    async def socialise(self, ctx: StepContext) -> list[Action]:
        name, platform = ctx.agent.persona.name, ctx.platform
        friends = platform.friends(ctx.agent.id)
        known = self.known_items(ctx, ctx.agent.id, self.heard_of)
        prompt = await self.prompt(ctx, "social", "friends movies", f"{name} is thinking about friends.", self.prompts["social"])
        kind = await self.decider.decide(ctx, Choice("social", prompt, ("chat", "broadcast"), default="broadcast")) if friends else "broadcast"
        if kind == "chat":
            by_name = {platform.members[f].persona.name: f for f in friends}
            if len(by_name) == 1:
                partner = next(iter(by_name.values()))
            else:
                prompt = await self.prompt(ctx, "social", "friends", f"{name} wants to chat.",
                                           fill(self.prompts["partner"], friends=", ".join(by_name)))
                default = list(by_name)[int(ctx.rng.integers(len(by_name)))]
                partner = by_name[await self.decider.decide(ctx, Choice("partner", prompt, tuple(by_name), default=default))]
            other_policy = platform.members[partner].components.get("policy")
            partner_known = self.known_items(ctx, partner, getattr(other_policy, "heard_of", {}))
            action = await social.chat(self, ctx, partner, known, partner_known)
            for item in action.detail["items"]:
                if item not in {i.id for i in platform.watched(ctx.agent.id)}:
                    self.heard_of.setdefault(item, partner)
            said = action.text if self.config.remember_friends else own_lines(action.text, name)
            await self.observe(ctx, f"{name} chatted with {platform.members[partner].persona.name}:\n{said}", kind="chat",
                               partner=partner, items=action.detail["items"])
            return [action]
        action = await social.broadcast(self, ctx, self.titles(ctx, known))
        if action is None:
            return []
        await self.observe(ctx, f"{name} posted to friends: {action.text}", kind="chat", items=action.detail["items"])
        return [action]

    # ------------------------------------------------------------------ role playing

    def play(self, read: Any, write: Any) -> "RecAgentPolicy":
        """The paper's role playing: a person takes this agent's decisions (``run --play``)."""
        self.decider = PersonDecider(read, write)
        return self

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {"heard_of": dict(self.heard_of), "inbox_seen": self.inbox_seen, "seeded": self.seeded, "filtered": dict(self.filtered)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.heard_of = dict(state.get("heard_of", {}))
        self.inbox_seen = int(state.get("inbox_seen", 0))
        self.seeded = bool(state.get("seeded", False))
        self.filtered = dict(state.get("filtered", {}))


def own_lines(transcript: str, name: str) -> str:
    """The lines ``name`` spoke in a chat transcript ("[Name]: ...")."""
    return "\n".join(line for line in transcript.splitlines() if line.startswith(f"[{name}]:"))


@hookimpl
def townsquare_register_policies():
    return [PolicySpec(
        "recagent_policy", RecAgentPolicy, config_model=RecAgentPolicyConfig, needs_llm=True, stand_ins=False,
        uses={"memory.sensory": "sensory_memory", "memory.short_term": "short_term_memory",
              "memory.long_term": "long_term_memory", "reflector": "recagent_reflection"},
        description="RecAgent: recommender system, chat, broadcast or nothing, with the unified four-part prompt",
    )]
