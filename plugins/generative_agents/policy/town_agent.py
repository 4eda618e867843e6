"""A generative agent in the town: slot ``policy``, component ``town_agent``.

Park et al.'s loop (§4: perceive -> remember -> retrieve -> react or continue -> act) on the
``town`` platform. Each time the agent is active:

1. **Seed** (first step only): unless the memory seeded itself (``memory_stream`` does, §3.1),
   the persona's sentences (traits, background, ``currently``, lifestyle, daily plan
   requirement) are written into it, one record a sentence, as the paper seeds each agent's
   memory from its description; the day plan then recalls them.
2. **Perceive and remember**: the platform's sentences about the agent's arena (the people
   there and what they do, the objects and their states); each sentence not perceived in the
   previous step becomes an ``observation`` record (what stays the same is not stored again).
3. **React or continue**: for the first person newly seen (awake), the planner (``day_plan``)
   is asked whether to react, re-planning the rest of the day if so (§4.3.1, it retrieves what
   the agent remembers about the observation and the person); then, for the first person present
   and awake it has not talked with lately, the dialogue decides whether to start a conversation
   (§4.3.2). A conversation is a ``talk`` action; once the platform
   accepts it, the two agents talk (Park's :class:`Conversation`: both remember it through their
   conversation memory, and it enters both schedules). The same pair does not start another
   conversation within ``talk_cooldown_minutes``. Nobody talks to a sleeping agent (the
   platform refuses it too). A side that remembers the conversation (it has a conversation
   memory) learns the places of the town it names that it did not know: at its next step a
   ``learn`` action adds them to its spatial memory, and the place choice may pick them at once
   (``learn_places``).
4. **Act**: the hour-level plan's current action (``current_action``; with no planner, the
   persona's ``currently``) says what the agent does; when it changes, the recursive location
   choice (:mod:`..planning.location`) picks sector, arena and object among the places the
   agent knows, and the model says the object's new state. The agent moves there (``move``)
   and uses the object (``use``), else keeps going (``wait``). Each action's ``detail`` holds
   ``activity`` and ``at`` (the arena address after it), so the actions table traces where
   every agent was.

Prompts are bounded: memories come through the memory's top-k recall, the summary
description is the ``persona.context`` component's cached one (Park's ``agent_summary``), option
lists are the agent's known places.

The slots this policy uses are Park's (:data:`PARK_SLOTS`) and nothing stands in for one that is
disabled (``stand_ins=False``): ``-p no:NAME`` empties its slot, so every ablation removes
exactly one pathway (``-p no:agent_summary``: prompts describe the agent from its seed, nothing
remembered reaches a plan; ``-p no:conversation_memory``: conversations are not remembered).
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timedelta
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import Action, ActionResult, ComponentError, MemoryRecord, PolicySpec, StepContext, agent_memory, hookimpl

from ..dialogue.conversation import Conversation, ConversationConfig, Dialogue
from ..dialogue.conversation_memory import conversation_memory_of
from ..memory.memory_text import cut
from ..planning.agent_summary import summary_description
from ..planning.location import Location, choose_location
from ..prompt_files import fill, load_prompts

log = structlog.get_logger("townsquare.plugins.generative_agents.town_agent")

_WHERE = frozenset({"summary", "name", "activity", "options"})
REQUIRED: dict[str, frozenset[str]] = {
    "sector": _WHERE, "arena": _WHERE | {"sector"}, "object": frozenset({"name", "activity", "options"}),
    "object_state": frozenset({"name", "object", "activity"}),
}
#: Park's components for the slots this policy uses
PARK_SLOTS: dict[str, str | None] = {
    "memory.stream": "memory_stream", "memory.retrieval": "park_retrieval", "reflector": "park_reflection",
    "planner": "day_plan", "persona.context": "agent_summary", "memory.sensory": "conversation_memory",
}
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


class TownAgentConfig(BaseModel):
    """``[plugins.town_agent]`` settings."""

    model_config = ConfigDict(extra="forbid")

    react: bool = Field(True, description="ask the planner to react to a newly seen person (Park §4.3.1)")
    talk: bool = Field(True, description="may start conversations (Park §4.3.2)")
    #: a pair that talked does not start again for this long (our choice; the paper gives none)
    talk_cooldown_minutes: int = Field(180, ge=0)
    describe_objects: bool = Field(True, description="the model words an object's state; False: 'being used for <activity>'")
    learn_places: bool = Field(True, description="places of the town named in a remembered conversation join the "
                               "listener's spatial memory (our choice; the paper's agents learn places by seeing them)")
    activity_chars: int = Field(200, gt=0)
    conversation: ConversationConfig = Field(default_factory=ConversationConfig)
    prompts_file: str | None = None


def seed_sentences(persona: Any) -> list[str]:
    """The persona's description as single sentences (the memory's seed)."""
    out: list[str] = []
    for text in persona.sentences:
        out += [s.strip() for s in _SENTENCE.split(" ".join(str(text).split())) if s.strip()]
    return out


class TownAgent:
    def __init__(self, config: TownAgentConfig, prompts: dict[str, str], dialogue: Dialogue):
        self.config = config
        self.prompts = prompts
        self.dialogue = dialogue
        self.seeded = False
        self.perceived: list[str] = []
        self.plan_key: str | None = None
        self.target: dict[str, str | None] | None = None  # {"arena", "object", "state"}
        self.last_talk: dict[str, str] = {}  # partner id -> simulated time (ISO)
        self.told: list[str] = []  # sectors named in conversations, not yet known
        self._key: str | None = None
        self.counts = {"moves": 0, "uses": 0, "waits": 0, "talks": 0, "conversations": 0, "reactions": 0}

    # ------------------------------------------------------------------ the step

    async def step(self, ctx: StepContext) -> list[Action]:
        platform, me, memory = _town(ctx), ctx.agent.id, agent_memory(ctx.agent)
        if not self.seeded:
            self.seeded = True
            if memory:
                await memory.recall(ctx, ctx.agent.persona.name, 1)  # a memory that seeds itself does it on first use
                if not any(r.meta.get("seed") for r in memory.since(None)):
                    await memory.remember(ctx, [MemoryRecord(s, kind="observation", meta={"seed": True})
                                                for s in seed_sentences(ctx.agent.persona)])
        seen = platform.perceive(me)
        fresh = [s for s in seen if s not in self.perceived]
        self.perceived = seen
        arena = platform.where(me)
        if fresh and memory:
            await memory.remember(ctx, [MemoryRecord(s, kind="observation", meta={"at": arena}) for s in fresh])
        planner = ctx.agent.components.get("planner")
        learned = [Action(me, "learn", detail={"sectors": list(self.told), "at": arena})] if self.told else []
        talk = await self._react(ctx, platform, planner, fresh)
        activity = await self._activity(ctx, planner)
        if talk is not None:
            self.told = []
            return [*learned, talk, Action(me, "wait", detail={"activity": activity, "at": arena})]
        actions = await self._act(ctx, platform, planner, memory, activity)
        self.told = []
        return [*learned, *actions]

    async def _activity(self, ctx: StepContext, planner: Any) -> str:
        if planner is not None and hasattr(planner, "current_action"):
            step = await planner.current_action(ctx)
            text = step.text if step is not None else "sleeping"
            self._key = f"{ctx.now.date()} {getattr(step, 'start', '')} {text}"
        else:
            text = str(ctx.agent.persona.fields.get("currently") or "going about the day")
            self._key = f"{ctx.now.date()} {text}"
        return cut(" ".join(text.split()), self.config.activity_chars)

    async def _react(self, ctx: StepContext, platform: Any, planner: Any, fresh: list[str]) -> Action | None:
        """React or continue on each person newly seen (at most one reaction a step), then
        perhaps talk with the first person present the agent has not talked with lately;
        a ``talk`` action if it starts a conversation."""
        me, cfg = ctx.agent.id, self.config
        arena = platform.where(me)
        people = [(other, platform.names.get(other, other)) for other in platform.present(arena, but=me)
                  if not platform.asleep(other)]
        if cfg.react and planner is not None and hasattr(planner, "react"):
            for other, name in people:
                observation = next((s for s in fresh if s.startswith(f"{name} is at ")), None)
                if observation is not None:
                    if await planner.react(ctx, observation, about=name):
                        self.counts["reactions"] += 1
                    break
        if not cfg.talk:
            return None
        for other, name in people:
            if not self._may_talk(other, ctx.now):
                continue
            observation = next((s for s in platform.perceive(me) if s.startswith(f"{name} is at ")), f"{name} is here")
            if await self.dialogue.should_initiate(ctx, name, observation):
                self.counts["talks"] += 1
                return Action(me, "talk", target_agent=other, text=observation, detail={"at": arena})
            return None
        return None

    def _may_talk(self, other: str, now: datetime) -> bool:
        last = self.last_talk.get(other)
        return last is None or now - datetime.fromisoformat(last) >= timedelta(minutes=self.config.talk_cooldown_minutes)

    async def _act(self, ctx: StepContext, platform: Any, planner: Any, memory: Any, activity: str) -> list[Action]:
        me, name = ctx.agent.id, ctx.agent.persona.name
        here = platform.where(me)
        if self._key == self.plan_key and self.target is not None:
            self.counts["waits"] += 1
            return [Action(me, "wait", detail={"activity": activity, "at": here})]
        self.plan_key = self._key
        llm = ctx.require_llm("town_agent")
        summary = await summary_description(ctx, activity)
        # what it was told of is known from now (the learn action goes first)
        place = await choose_location(llm, self.prompts, platform.spatial_memory(me, self.told), name=name, activity=activity,
                                      current=here, home=str(ctx.agent.persona.fields.get("living_area") or ""),
                                      summary=summary)
        if place is None:
            self.target = {"arena": here, "object": None, "state": None}
            return [Action(me, "wait", detail={"activity": activity, "at": here})]
        state = await self._object_state(ctx, llm, place, activity) if place.object else None
        self.target = {"arena": place.arena_address, "object": place.object, "state": state}
        actions = []
        if place.arena_address != here:
            self.counts["moves"] += 1
            actions.append(Action(me, "move", detail={"to": place.arena_address, "activity": activity, "at": place.arena_address}))
        if place.object:
            self.counts["uses"] += 1
            actions.append(Action(me, "use", detail={"object": place.object, "state": state, "activity": activity,
                                                      "at": place.arena_address}))
        if not actions:
            actions.append(Action(me, "wait", detail={"activity": activity, "at": here}))
        if memory:
            where = f"{place.object} in {place.arena}, {place.sector}" if place.object else f"{place.arena}, {place.sector}"
            await memory.remember(ctx, [MemoryRecord(f"{name} is {activity} at {where}", kind="action",
                                                     meta={"at": place.arena_address})])
        return actions

    async def _object_state(self, ctx: StepContext, llm: Any, place: Location, activity: str) -> str:
        fallback = f"being used for {activity}"
        if not self.config.describe_objects:
            return cut(fallback, self.config.activity_chars)
        prompt = fill(self.prompts["object_state"], name=ctx.agent.persona.name, object=place.object, activity=activity)
        answer = " ".join((await llm.text(prompt, purpose="town.object_state", max_tokens=24)).split()).strip('".')
        return cut(answer or fallback, self.config.activity_chars)

    # ------------------------------------------------------------------ conversations

    async def on_applied(self, ctx: StepContext, applied: list[tuple[Action, ActionResult]]) -> None:
        """Run the conversation of an accepted ``talk`` (both sides present, Park §4.3.2)."""
        for action, result in applied:
            if action.kind != "talk" or not result.ok or ctx.services.llm is None:
                continue
            platform = _town(ctx)
            partner = platform.members.get(action.target_agent)
            if partner is None:
                continue
            mine = dataclasses.replace(ctx, llm=ctx.services.llm.for_agent(ctx.agent.id))
            theirs = dataclasses.replace(ctx, agent=partner, llm=ctx.services.llm.for_agent(partner.id))
            other_policy = partner.components.get("policy")
            other_side = getattr(other_policy, "dialogue", None) or Dialogue(self.config.conversation)
            transcript = await Conversation(self.config.conversation).run((mine, self.dialogue), (theirs, other_side),
                                                                          action.text or "")
            self.counts["conversations"] += 1
            if self.config.learn_places and transcript.turns:
                named = platform.sectors_named(transcript.text())
                for agent, policy in ((ctx.agent, self), (partner, other_policy)):
                    if isinstance(policy, TownAgent) and conversation_memory_of(agent) is not None:
                        policy.hear_of(platform, agent.id, named)
            self.last_talk[partner.id] = ctx.now.isoformat()
            if isinstance(other_policy, TownAgent):
                other_policy.last_talk[ctx.agent.id] = ctx.now.isoformat()
            log.debug("town.conversation", agent=ctx.agent.id, partner=partner.id, turns=len(transcript.turns),
                      ended=transcript.ended)

    def hear_of(self, platform: Any, me: str, sectors: list[str]) -> None:
        """Sectors named to the agent that it does not know yet become known at its next step."""
        known = {s for sectors_of in platform.spatial_memory(me).values() for s in sectors_of}
        self.told += [s for s in sectors if s not in known and s not in self.told]

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        return {"seeded": self.seeded, "perceived": list(self.perceived), "plan_key": self.plan_key,
                "target": dict(self.target) if self.target else None, "last_talk": dict(self.last_talk),
                "counts": dict(self.counts), "told": list(self.told), "dialogue": self.dialogue.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.seeded = bool(state.get("seeded", False))
        self.perceived = list(state.get("perceived", []))
        self.plan_key = state.get("plan_key")
        self.target = dict(state["target"]) if state.get("target") else None
        self.last_talk = dict(state.get("last_talk", {}))
        self.told = list(state.get("told", []))
        self.counts = {**self.counts, **state.get("counts", {})}
        self.dialogue.set_state(state.get("dialogue", {}))


def _town(ctx: Any) -> Any:
    platform = ctx.services.platform
    if not hasattr(platform, "perceive"):
        raise ComponentError("policy 'town_agent' needs [platform] name = \"town\"")
    return platform


def build_town_agent(config: TownAgentConfig | None, ctx: Any) -> TownAgent:
    config = config or TownAgentConfig()
    base_dir = getattr(ctx, "base_dir", ".") or "."
    agent = TownAgent(config, load_prompts("town", REQUIRED, config.prompts_file, base_dir),
                      Dialogue(config.conversation, base_dir=base_dir))
    if ctx.agent is not None and ctx.services is not None:
        _town(ctx).join(ctx.agent)
    return agent


@hookimpl
def townsquare_register_policies():
    return [
        PolicySpec(
            "town_agent", build_town_agent, config_model=TownAgentConfig, priority=-10, needs_llm=True, uses=PARK_SLOTS,
            stand_ins=False, description="Park et al. in the town: perceive, remember, react or continue, choose a place among known ones, act, talk",
        )
    ]
