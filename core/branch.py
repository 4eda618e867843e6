"""``townsquare branch``: continue a run from round R with something changed.

A branch of run P at round R is a new run directory that

- starts from P's checkpoint after round R - 1 (the state at the start of round R; R = 0
  starts from the freshly built run), so every round before R is P's own;
- copies P's events of rounds before R (and the LLM calls made while P was built), P's agents
  table and P's response cache (``llm_cache.sqlite``): a branch with no intervention asks the
  same questions in the same order and gets P's answers, so rounds R and later equal P's;
- applies its interventions just before round R plays, in the order given, and records them
  in its manifest (``branch = {parent, at, interventions}``) and, for platform writes, in the
  ``actions`` table with ``detail.intervention`` set;
- then plays rounds R .. ``rounds`` - 1 as ``resume`` does.

Interventions (:class:`Intervention`): ``--set KEY=VALUE`` and ``-p no:NAME`` change the
scenario (a component that changes keeps no state from P: it starts fresh at R, and a newly
filled slot starts empty); ``--persona AGENT=FILE`` replaces an agent's persona;
``--post AUTHOR=TEXT`` posts as an agent or as an outside account (any other id, registered on
the platform); ``--memory AGENT=TEXT`` hands an observation to the agent's memory chain
(:func:`townsquare.memory.agent_memory`, so every memory design receives it its own way);
``--follow A=B`` / ``--unfollow A=B``.

A branch stopped during round R resumes (``townsquare resume``) with its interventions applied
again, once (:func:`resume_options`). Branching needs P's checkpoint after round R - 1: ``[engine] keep_checkpoints = 0`` keeps every
one (the default keeps the newest 3). A persona edit reaches components that read
``agent.persona`` when they act; state a component derived from the old persona and saved in
its checkpoint (a persona embedding, say) is kept as it was.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterable

import structlog

from .actions import Action
from .components import StepContext
from .engine import Simulation
from .errors import UsageError
from .files import read_user_text
from .lifecycle import RunSummary
from .memory import MEMORY_TIERS, MemoryRecord, agent_memory
from .persona import Persona
from .plugin_manager import make_plugin_manager, parse_plugin_options
from .rundir import RunDir, environment
from .runner import _play, redact, redact_override
from .scenario import apply_overrides, resolve
from .store import ROUND_TABLES, EventStore

log = structlog.get_logger("townsquare.branch")

KINDS = ("persona", "post", "memory", "follow", "unfollow")
CACHE_FILE = "llm_cache.sqlite"


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

    def set_state(self, state: dict[str, Any]) -> None:
        fresh = self.get_state(self.at - 1)
        merged = dict(state)
        recommender_slot = self.scenario.recommender.slot
        if self._changed("run", recommender_slot):
            merged["recommender"] = fresh["recommender"]
        merged["metrics"] = {name: state.get("metrics", {}).get(name, fresh["metrics"][name]) for name in fresh["metrics"]}
        agents = {}
        for agent in self.agents:
            saved = state["agents"][agent.id]
            components = {}
            for slot, value in fresh["agents"][agent.id]["components"].items():
                keep = slot in saved["components"] and not self._changed(agent.population, slot)
                components[slot] = saved["components"][slot] if keep else value
            agents[agent.id] = {**saved, "components": components}
        merged["agents"] = agents
        super().set_state(merged)

    async def play_round(self, r: int) -> None:
        if r == self.at and not self._intervened:
            self._intervened = True
            for intervention in self.interventions:
                await self._apply(intervention, r)
        await super().play_round(r)

    async def _apply(self, change: Intervention, r: int) -> None:
        now_iso = self.now(r)
        now = self.model.clock.start + timedelta(minutes=r * self.model.clock.minutes_per_round)
        agents = {a.id: a for a in self.agents}
        log.info("branch.intervention", round=r, kind=change.kind, target=change.target)
        if change.kind == "persona":
            agent = agents[change.target]
            agent.persona = Persona.from_dict(change.persona or {})
            await self.platform.register_account(agent.id, agent.persona.name, " ".join(agent.persona.sentences[:2]))
            self.store.db.execute("UPDATE agents SET name = ?, persona = ? WHERE agent_id = ?",
                                  (agent.persona.name, json.dumps(agent.persona.to_dict(), ensure_ascii=False), agent.id))
            return
        if change.kind == "memory":
            agent = agents[change.target]
            ctx = StepContext(agent=agent, round=r, now=now, minutes_per_round=self.model.clock.minutes_per_round,
                              services=self.services, llm=self.services.llm.for_agent(agent.id) if self.services.llm else None,
                              start=self.model.clock.start)
            chain = agent_memory(agent)
            record = MemoryRecord(text=change.value, kind="observation", created=now, meta={"intervention": True})
            left = await chain.remember(ctx, [record])
            if any(r.text == change.value for r in left):  # every tier passed it on: none keeps observations
                log.warning("branch.memory_not_kept", agent=agent.id, tiers=chain.slots)
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


def branch_run(parent_path: str | Path, at: int, out: str | Path | None = None, *, overrides: Iterable[str] = (),
               plugin_options: Iterable[str] = (), interventions: Iterable[Intervention] = (), progress: Any = None,
               on_ready: Any = None, label: str | None = None) -> tuple[RunDir, RunSummary]:
    """Branch ``parent_path`` at round ``at`` into ``out`` (default ``runs/<name>-branch-r<at>``)."""
    overrides, plugin_options, interventions = list(overrides), list(plugin_options), list(interventions)
    parent = RunDir.open(parent_path)
    manifest = parent.read_manifest()
    scenario, plugins, combined_options = _branch_scenario(parent, manifest, overrides, plugin_options)
    rounds = scenario.model.rounds
    if not 0 <= at < rounds:
        raise UsageError(f"--at {at}: the run has rounds 0..{rounds - 1}")
    agents = _parent_agents(parent)
    _check_interventions(interventions, agents, scenario)
    name = f"{manifest.get('name', 'run')}-{label or 'branch'}-r{at}"
    with RunDir.claim(out, name) as run_dir:
        with parent.lock():  # held while the parent's files are copied, not while the branch plays
            state = None
            if at > 0:
                state = parent.checkpoint_at(at - 1)
                if state is None:
                    kept = [r + 1 for r, _ in parent.checkpoints()]
                    raise UsageError(f"--at {at}: {parent.path} keeps no checkpoint after round {at - 1} (branchable rounds: "
                                     f"{', '.join(map(str, [0, *kept]))}); run with --set engine.keep_checkpoints=0 to keep all")
            run_dir.write_manifest({
                **manifest, "name": name, "scenario": redact(scenario.data),
                "overrides": manifest.get("overrides", []) + [redact_override(o) for o in overrides],
                "plugin_options": combined_options, "plugins": plugins.versions(), "disabled_plugins": list(plugins.disabled),
                "slot_table": scenario.slot_table(), "environment": environment(), "status": "running",
                "rounds_completed": at, "stop_reason": None,
                "branch": {"parent": str(parent.path.resolve()), "at": at, "parent_slots": manifest.get("slot_table", []),
                           "interventions": [*(f"--set {redact_override(o)}" for o in overrides),
                                             *(f"-p {o}" for o in plugin_options), *(i.describe() for i in interventions)],
                           "changes": [i.to_dict() for i in interventions]},
            })
            _copy_events(parent, run_dir, at)
            if state is not None:
                run_dir.write_checkpoint(at - 1, state, keep=0)
            _copy_cache(parent, run_dir)
        options = {"at": at, "interventions": interventions, "parent_slots": manifest.get("slot_table", [])}
        return run_dir, _play(scenario, plugins, run_dir, on_ready, progress, options, resume=True, simulation_class=BranchSimulation)


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


def _branch_scenario(parent: RunDir, manifest: dict[str, Any], overrides: list[str], plugin_options: list[str]):
    data = apply_overrides(manifest["scenario"], overrides, "--set") if overrides else manifest["scenario"]
    combined = [*manifest.get("plugin_options", []), *plugin_options]
    enable, disable = parse_plugin_options(combined)
    plugins = make_plugin_manager(enable=enable, disable=disable)
    missing = sorted(set(manifest.get("plugins", {})) - set(plugins.versions()) - set(disable))
    if missing:
        raise UsageError(f"{parent.manifest_path}: the run used plugins that are not loaded now: {', '.join(missing)}")
    scenario = resolve(data, str(parent.manifest_path), manifest.get("base_dir", "."), plugins)
    return scenario, plugins, combined


def _parent_agents(parent: RunDir) -> dict[str, tuple[str, str]]:
    """agent id -> (persona name, population)."""
    if not parent.events_path.is_file():
        raise UsageError(f"{parent.path}: no events.sqlite (the run never started): nothing to branch")
    db = sqlite3.connect(f"file:{parent.events_path}?mode=ro", uri=True)
    try:
        return {row[0]: (row[1], row[2]) for row in db.execute("SELECT agent_id, name, population FROM agents")}
    finally:
        db.close()


def _check_interventions(interventions: list[Intervention], agent_ids: dict[str, tuple[str, str]], scenario: Any) -> None:
    """Every agent named exists (and has a memory for ``--memory``); persona files are read
    now, before anything is written."""
    filled = {(row["scope"], row["slot"]) for row in scenario.slot_table() if row["component"] != "-"}
    for change in interventions:
        needs_agent = [change.target] if change.kind != "post" else []
        if change.kind in ("follow", "unfollow"):
            needs_agent.append(change.value)
        for agent_id in needs_agent:
            if agent_id not in agent_ids:
                sample = ", ".join(sorted(agent_ids)[:5])
                raise UsageError(f"{change.describe()}: no agent {agent_id!r} in the run (agents: {sample}...)")
        if change.kind == "persona":
            change.persona = read_persona_file(change.value, current_name=agent_ids[change.target][0])
        if change.kind == "memory" and not any((agent_ids[change.target][1], slot) in filled for slot in MEMORY_TIERS):
            raise UsageError(f"{change.describe()}: agent {change.target}'s population fills no memory slot "
                             f"({', '.join(MEMORY_TIERS)}): there is nothing to remember with")


def _copy_events(parent: RunDir, run_dir: RunDir, at: int) -> None:
    """The parent's rows of rounds before ``at`` (round -1: calls made while building)."""
    store = EventStore(run_dir.events_path)
    try:
        db = store.db
        db.execute("ATTACH DATABASE ? AS parent", (str(parent.events_path),))
        with store.transaction():
            db.execute("INSERT INTO agents SELECT * FROM parent.agents ORDER BY rowid")
            for table in ROUND_TABLES:
                columns = ", ".join(row[1] for row in db.execute(f"PRAGMA main.table_info({table})"))
                db.execute(f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM parent.{table} WHERE round < ? ORDER BY rowid", (at,))
        db.execute("DETACH DATABASE parent")
    finally:
        store.close()


def _copy_cache(parent: RunDir, run_dir: RunDir) -> None:
    if (parent.path / CACHE_FILE).is_file():
        copy_sqlite(parent.path / CACHE_FILE, run_dir.path / CACHE_FILE)


def copy_sqlite(source: Path, target: Path) -> None:
    """A consistent copy of an SQLite file (its WAL included) that another process may be writing."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
