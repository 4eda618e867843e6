"""A branch's simulation: the interventions (:class:`Intervention`) and the simulation that
applies them just before its first round (:class:`BranchSimulation`).

Apart from :mod:`townsquare.branch` (making a branch run directory) because the runner needs
these to resume a branch (:func:`resume_options`), and the branch command needs the runner.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, Iterable

import structlog

from .actions import Action
from .engine import Simulation
from .errors import UsageError
from .files import read_user_text
from .memory import MemoryRecord, agent_memory
from .persona import Persona
from .specs import AGENT_SLOTS

log = structlog.get_logger("townsquare.branch")

KINDS = ("persona", "post", "memory", "follow", "unfollow")


@dataclass
class Intervention:
    """One change applied before the branch's first round. ``target`` is the agent (the author
    for a post, the follower for a follow); ``value`` the text, file or followee."""

    kind: str
    target: str
    value: str
    #: a persona file's content, read when the branch is checked (not stored in the manifest)
    persona: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["persona"] is None:
            data.pop("persona")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Intervention":
        return cls(kind=data["kind"], target=data["target"], value=data["value"], persona=data.get("persona"))

    def describe(self) -> str:
        return f"--{self.kind} {self.target}={self.value}"


def parse_interventions(pairs: Iterable[tuple[str, str]]) -> list[Intervention]:
    """``[("post", "users-0001=hello"), ...]`` -> interventions; a malformed one is a UsageError."""
    found = []
    for kind, raw in pairs:
        if kind not in KINDS:
            raise UsageError(f"unknown intervention --{kind} (known: {', '.join(KINDS)})")
        target, sep, value = raw.partition("=")
        if not sep or not target.strip() or not value.strip():
            raise UsageError(f"--{kind} {raw!r}: expected {'AGENT=FILE' if kind == 'persona' else 'AGENT=VALUE'}")
        found.append(Intervention(kind, target.strip(), value if kind in ("post", "memory") else value.strip()))
    return found


def read_persona_file(path: str, current_name: str) -> dict[str, Any]:
    """A persona file: JSON (``{"name", "sentences", "fields"}``) or plain text, one sentence a
    line (the agent keeps its name)."""
    text = read_user_text(path, "persona file", max_mb=1, limit_name="a persona file's size")
    stripped = text.strip()
    if not stripped:
        raise UsageError(f"{path}: persona file is empty")
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data.get("sentences", []), list) or not isinstance(data.get("fields", {}), dict):
            raise UsageError(f"{path}: a persona has \"sentences\" (a list) and \"fields\" (an object)")
        return Persona.from_dict({"name": current_name, **data}).to_dict()
    return Persona(name=current_name, sentences=[line.strip() for line in stripped.splitlines() if line.strip()]).to_dict()


class BranchSimulation(Simulation):
    """A :class:`Simulation` resumed from a parent's checkpoint that applies interventions
    before round ``at`` and lets components the branch changed start fresh."""

    def __init__(self, *args: Any, at: int, interventions: list[Intervention], parent_slots: list[dict[str, str]], **kw: Any):
        super().__init__(*args, **kw)
        self.at = at
        self.interventions = interventions
        self.parent_components = {(row["scope"], row["slot"]): row["component"] for row in parent_slots}
        self._intervened = False

    def _changed(self, scope: str, slot: str) -> bool:
        new = {(row["scope"], row["slot"]): row["component"] for row in self.scenario.slot_table()}
        return self.parent_components.get((scope, slot)) != new.get((scope, slot))

    def fresh_slots(self) -> frozenset[tuple[str, str]]:
        """The agents' components the branch changed start fresh (see :meth:`Simulation.fresh_slots`)."""
        return frozenset((pop.config.name, slot) for pop in self.scenario.populations for slot in AGENT_SLOTS
                         if self._changed(pop.config.name, slot))

    def set_state(self, state: dict[str, Any]) -> None:
        fresh = self.get_state(self.at - 1, agents=False)
        merged = dict(state)
        recommender_slot = self.scenario.recommender.slot
        if self._changed("run", recommender_slot):
            merged["recommender"] = fresh["recommender"]
        merged["metrics"] = {name: state.get("metrics", {}).get(name, fresh["metrics"][name]) for name in fresh["metrics"]}
        super().set_state(merged)

    async def play_round(self, r: int) -> None:
        if r == self.at and not self._intervened:
            self._intervened = True
            for intervention in self.interventions:
                await self._apply(intervention, r)
        await super().play_round(r)

    async def _apply(self, change: Intervention, r: int) -> None:
        now_iso = self.now(r)
        agents = {a.id: a for a in self.agents}
        log.info("branch.intervention", round=r, kind=change.kind, target=change.target)
        if change.kind == "persona":
            agent = agents[change.target]
            agent.persona = Persona.from_dict(change.persona or {})
            await self.on_agent(agent, SetPersona(agent.persona.to_dict()), r)
            await self.platform.register_account(agent.id, agent.persona.name, " ".join(agent.persona.sentences[:2]))
            self.store.db.execute("UPDATE agents SET name = ?, persona = ? WHERE agent_id = ?",
                                  (agent.persona.name, json.dumps(agent.persona.to_dict(), ensure_ascii=False), agent.id))
            return
        if change.kind == "memory":
            await self.on_agent(agents[change.target], RememberObservation(change.value), r)
            return
        if change.kind == "post":
            if change.target not in agents:
                await self.platform.register_account(change.target, change.target, "an account outside the simulation")
            action = Action(agent_id=change.target, kind="post", text=change.value, detail={"intervention": "post"})
        else:
            action = Action(agent_id=change.target, kind=change.kind, target_agent=change.value, detail={"intervention": change.kind})
        result = await self.platform.apply(action, r, now_iso)
        if not result.ok:
            log.warning("branch.intervention_refused", kind=change.kind, target=change.target, error=result.error)
        self._record_action(r, now_iso, action, result, [])
        self.hook.townsquare_on_action_applied(run=self.info, round=r, action=action, result=result)


@dataclass
class SetPersona:
    """A branch's ``--persona``, applied to the agent where it is held (:meth:`Simulation.on_agent`)."""

    persona: dict[str, Any]

    async def __call__(self, host: Any, agent: Any, r: int) -> None:
        agent.persona = Persona.from_dict(self.persona)


@dataclass
class RememberObservation:
    """A branch's ``--memory``: an observation the agent's memory chain takes in, where the
    agent is held (:meth:`Simulation.on_agent`)."""

    text: str

    async def __call__(self, host: Any, agent: Any, r: int) -> None:
        now = host.model.clock.start + timedelta(minutes=r * host.model.clock.minutes_per_round)
        chain = agent_memory(agent)
        record = MemoryRecord(text=self.text, kind="observation", created=now, meta={"intervention": True})
        left = await chain.remember(host.context(agent, r, now, feed=False), [record])
        if any(r.text == self.text for r in left):  # every tier passed it on: none keeps observations
            log.warning("branch.memory_not_kept", agent=agent.id, tiers=chain.slots)


def resume_options(manifest: dict[str, Any], rounds_completed: int) -> dict[str, Any]:
    """What ``resume`` passes to the runner for a branch stopped before its first round was
    done: the branch simulation again, so the interventions are applied (once: the round's
    rows and state were rolled back to the checkpoint before it)."""
    branch = manifest.get("branch") or {}
    if not branch or rounds_completed > int(branch.get("at", 0)):
        return {}
    return {"simulation_class": BranchSimulation, "simulation_options": {
        "at": int(branch["at"]), "interventions": [Intervention.from_dict(c) for c in branch.get("changes", [])],
        "parent_slots": branch.get("parent_slots", manifest.get("slot_table", []))}}
