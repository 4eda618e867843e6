"""``townsquare branch``: continue a run from round R with something changed.

A branch of run P at round R is a new run directory that

- starts from P's checkpoint after round R - 1 (the state at the start of round R; R = 0
  starts from the freshly built run), so every round before R is P's own;
- copies P's events of rounds before R (and the LLM calls made while P was built), P's agents
  table and P's response cache (``llm_cache.sqlite``): a branch with no intervention asks the
  same questions in the same order and gets P's answers, so rounds R and later equal P's;
- applies its changes at the start of round R, in the order given, through the intervention
  slot (:mod:`townsquare.interventions`): the branch's scenario lists the intervention
  ``branch`` (:class:`BranchChanges`, settings ``[plugins.branch] at, changes``), so the manifest
  records it and ``resume`` builds it again like any component; the manifest's ``branch =
  {parent, at, interventions, changes}`` describes them, and platform writes are rows of the
  ``actions`` table with ``detail.intervention`` set;
- then plays rounds R .. ``rounds`` - 1 as ``resume`` does.

Changes (:class:`BranchChange`): ``--set KEY=VALUE`` and ``-p no:NAME`` change the
scenario (a component that changes keeps no state from P: it starts fresh at R, and a newly
filled slot starts empty: the checkpoint the branch starts from names the parent's slot
table, :meth:`townsquare.world.World.set_state`); ``--persona AGENT=FILE`` replaces an agent's persona;
``--post AUTHOR=TEXT`` posts as an agent or as an outside account (any other id, registered on
the platform); ``--memory AGENT=TEXT`` hands an observation to the agent's memory chain
(:func:`townsquare.memory.agent_memory`, so every memory design receives it its own way);
``--follow A=B`` / ``--unfollow A=B``.

A branch stopped during round R resumes (``townsquare resume``) with its changes applied
again, once (the round's rows and state were rolled back to the checkpoint before it). Branching needs P's checkpoint after round R - 1: ``[engine] keep_checkpoints = 0`` keeps every
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
from typing import Any, Iterable, Literal

import click
import structlog

from pydantic import BaseModel, ConfigDict, Field, model_validator

from townsquare.actions import Action
from townsquare.api import hookimpl
from townsquare.interventions import RunSeams
from townsquare.cli.options import backend_options, backend_overrides, common_options
from townsquare.cli.run_output import RunLines, report_run
from townsquare.errors import UsageError
from townsquare.launch.input_fingerprints import input_changes, input_fingerprints, recorded_inputs
from townsquare.lib.files import read_user_text
from townsquare.lifecycle import RunSummary
from townsquare.memory import MEMORY_TIERS, MemoryRecord, agent_memory
from townsquare.persona import Persona
from townsquare.plugin_manager import canonical_name, make_plugin_manager, parse_plugin_options
from townsquare.launch.run_lock import claim, locked, open_run
from townsquare.launch.runner import environment
from townsquare.rundir import RunDir
from townsquare.launch.runner import play_scenario, recorded_plugin_options, recorded_plugins, redact, redact_override
from townsquare.scenario import resolve
from townsquare.launch.scenario_files import apply_overrides
from townsquare.specs import InterventionSpec
from townsquare.store import ROUND_TABLES, EventStore

log = structlog.get_logger("townsquare.commands.branch")

__all__ = ["BranchChange", "BranchChanges", "branch_run", "copy_sqlite", "parse_interventions"]

CACHE_FILE = "llm_cache.sqlite"
KINDS = ("persona", "post", "memory", "follow", "unfollow")


@dataclass
class BranchChange:
    """One change applied at the start of the branch's first round. ``target`` is the agent
    (the author for a post, the follower for a follow); ``value`` the text, file or followee."""

    kind: str
    target: str
    value: str
    #: a persona file's content, read when the branch is checked
    persona: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["persona"] is None:
            data.pop("persona")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BranchChange":
        return cls(kind=data["kind"], target=data["target"], value=data["value"], persona=data.get("persona"))

    def describe(self) -> str:
        return f"--{self.kind} {self.target}={self.value}"


def parse_interventions(pairs: Iterable[tuple[str, str]]) -> list[BranchChange]:
    """``[("post", "users-0001=hello"), ...]`` -> changes; a malformed one is a UsageError."""
    found = []
    for kind, raw in pairs:
        if kind not in KINDS:
            raise UsageError(f"unknown intervention --{kind} (known: {', '.join(KINDS)})")
        target, sep, value = raw.partition("=")
        if not sep or not target.strip() or not value.strip():
            raise UsageError(f"--{kind} {raw!r}: expected {'AGENT=FILE' if kind == 'persona' else 'AGENT=VALUE'}")
        found.append(BranchChange(kind, target.strip(), value if kind in ("post", "memory") else value.strip()))
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


class BranchChangeEntry(BaseModel):
    """One of ``[plugins.branch] changes`` (:meth:`BranchChange.to_dict`), checked like any setting."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["persona", "post", "memory", "follow", "unfollow"]
    target: str = Field(min_length=1)
    value: str
    persona: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _persona_given(self) -> "BranchChangeEntry":
        if self.kind == "persona" and not (self.persona or {}).get("name"):
            raise ValueError('a persona change needs "persona" = { name = ..., sentences = [...] }')
        return self


class BranchChangesConfig(BaseModel):
    """``[plugins.branch]``: written by ``townsquare branch`` into the branch's scenario."""

    model_config = ConfigDict(extra="forbid")

    at: int = Field(ge=0, description="the round at whose start the changes are applied")
    changes: list[BranchChangeEntry] = Field(default_factory=list, description="the changes (BranchChange.to_dict), in order")


class BranchChanges:
    """A branch's changes as an intervention (:mod:`townsquare.interventions`): applied at the
    start of round ``at``, in order, through the engine's seams."""

    def __init__(self, config: BranchChangesConfig, ctx: Any = None):
        self.at = config.at
        self.changes = [BranchChange.from_dict(c.model_dump()) for c in config.changes]

    def acts_at(self, round: int) -> bool:
        return round == self.at

    async def intervene(self, seams: RunSeams, round: int) -> None:
        for change in self.changes:
            await apply_change(seams, change, round)


async def apply_change(seams: RunSeams, change: BranchChange, r: int) -> None:
    log.info("branch.intervention", round=r, kind=change.kind, target=change.target)
    if change.kind == "persona":
        await seams.set_persona(change.target, Persona.from_dict(change.persona or {}), r)
        return
    if change.kind == "memory":
        await seams.on_agent(change.target, RememberObservation(change.value), r)
        return
    if change.kind == "post":
        if change.target not in seams.agents:
            await seams.platform.register_account(change.target, change.target, "an account outside the simulation")
        action = Action(agent_id=change.target, kind="post", text=change.value, detail={"intervention": "post"})
    else:
        action = Action(agent_id=change.target, kind=change.kind, target_agent=change.value, detail={"intervention": change.kind})
    result = await seams.apply(action, r)
    if not result.ok:
        log.warning("branch.intervention_refused", kind=change.kind, target=change.target, error=result.error)


@dataclass
class RememberObservation:
    """A branch's ``--memory``: an observation the agent's memory chain takes in, where the
    agent is held (:meth:`townsquare.interventions.RunSeams.on_agent`)."""

    text: str

    async def __call__(self, host: Any, agent: Any, r: int) -> None:
        now = host.model.clock.start + timedelta(minutes=r * host.model.clock.minutes_per_round)
        chain = agent_memory(agent)
        record = MemoryRecord(text=self.text, kind="observation", created=now, meta={"intervention": True})
        left = await chain.remember(host.context(agent, r, now, feed=False), [record])
        if any(r.text == self.text for r in left):  # every tier passed it on: none keeps observations
            log.warning("branch.memory_not_kept", agent=agent.id, tiers=chain.slots)


def branch_run(parent_path: str | Path, at: int, out: str | Path | None = None, *, overrides: Iterable[str] = (),
               plugin_options: Iterable[str] = (), interventions: Iterable[BranchChange] = (), progress: Any = None,
               on_ready: Any = None, label: str | None = None, live: Any = None) -> tuple[RunDir, RunSummary]:
    """Branch ``parent_path`` at round ``at`` into ``out`` (default ``runs/<name>-branch-r<at>``);
    ``progress``, ``on_ready`` and ``live`` as :func:`townsquare.launch.runner.start_run` takes them."""
    overrides, plugin_options, interventions = list(overrides), list(plugin_options), list(interventions)
    parent = open_run(parent_path)
    manifest = parent.read_manifest()
    scenario, plugins, combined_options, plugin_changes = _branch_scenario(parent, manifest, overrides, plugin_options)
    data = scenario.data
    rounds = scenario.model.rounds
    if not 0 <= at < rounds:
        raise UsageError(f"--at {at}: the run has rounds 0..{rounds - 1}")
    agents = _parent_agents(parent)
    _check_interventions(interventions, agents, scenario)
    # the changes are the intervention 'branch' of the branch's scenario (a parent's own branch changes are not)
    listed = [name for name in data.get("interventions", []) if name != "branch"]
    settings = {k: v for k, v in data.get("plugins", {}).items() if k != "branch"}
    if interventions:
        listed, settings = [*listed, "branch"], {**settings, "branch": {"at": at, "changes": [i.to_dict() for i in interventions]}}
    if listed != data.get("interventions", []) or settings != data.get("plugins", {}):
        data = {**data, "interventions": listed, "plugins": settings}
        scenario = resolve(data, str(parent.manifest_path), manifest.get("base_dir", "."), plugins)
    name = f"{manifest.get('name', 'run')}-{label or 'branch'}-r{at}"
    with claim(out, name) as run_dir:
        with locked(parent):  # held while the parent's files are copied, not while the branch plays
            state = None
            if at > 0:
                state = parent.checkpoint_at(at - 1)
                if state is None:
                    kept = [r + 1 for r, _ in parent.checkpoints()]
                    raise UsageError(f"--at {at}: {parent.path} keeps no checkpoint after round {at - 1} (branchable rounds: "
                                     f"{', '.join(map(str, [0, *kept]))}); run with --set engine.keep_checkpoints=0 to keep all")
            inputs = input_fingerprints(scenario, plugins)  # what the branch reads from round ``at`` on
            run_dir.write_manifest({
                **manifest, "name": name, "scenario": redact(scenario.data), "inputs": recorded_inputs(inputs),
                "input_changes": [*manifest.get("input_changes", []), *input_changes(manifest.get("inputs") or {}, inputs, at)],
                "overrides": manifest.get("overrides", []) + [redact_override(o) for o in overrides],
                "plugin_options": combined_options, "plugins": plugins.versions(), "disabled_plugins": list(plugins.disabled),
                "slot_table": scenario.slot_table(), "environment": environment(), "status": "running",
                "rounds_completed": at, "stop_reason": None,
                "branch": {"parent": str(parent.path.resolve()), "at": at, "parent_slots": manifest.get("slot_table", []),
                           "interventions": [*(f"--set {redact_override(o)}" for o in overrides),
                                             *(f"-p {o}" for o in plugin_changes), *(i.describe() for i in interventions)],
                           "changes": [i.to_dict() for i in interventions]},
            })
            _copy_events(parent, run_dir, at)
            if state is not None:  # naming the parent's components: those the branch changed start fresh
                run_dir.write_checkpoint(at - 1, {**state, "slot_table": manifest.get("slot_table", [])}, keep=0)
            _copy_cache(parent, run_dir)
        return run_dir, play_scenario(scenario, plugins, run_dir, on_ready, progress, {"live": live} if live else {}, resume=True)


def _branch_scenario(parent: RunDir, manifest: dict[str, Any], overrides: list[str], plugin_options: list[str]):
    """The branch's scenario and plugins: the parent's recorded plugin set (disabled ones
    included), changed by the ``-p`` options given now; returns the options that differ too."""
    data = apply_overrides(manifest["scenario"], overrides, "--set") if overrides else manifest["scenario"]
    recorded = recorded_plugin_options(manifest)
    used = recorded_plugins(manifest) if "plugins" in manifest else None

    def changes_something(option: str) -> bool:
        name = canonical_name(option.strip().removeprefix("no:"))
        if used is None:
            return True
        return name in used if option.strip().startswith("no:") else name not in used

    changes = [option for option in plugin_options if option not in recorded and changes_something(option)]
    combined = merge_plugin_options(recorded, changes)
    enable, disable = parse_plugin_options(combined)
    plugins = make_plugin_manager(enable=enable, disable=disable, only=used)
    missing = sorted((used or set()) - set(plugins.versions()) - set(disable))
    if missing:
        raise UsageError(f"{parent.manifest_path}: the run used plugins that are not loaded now: {', '.join(missing)}")
    scenario = resolve(data, str(parent.manifest_path), manifest.get("base_dir", "."), plugins)
    return scenario, plugins, combined, changes


def merge_plugin_options(base: list[str], changes: list[str]) -> list[str]:
    """``base`` with ``changes`` applied in order: ``-p X`` undoes an earlier ``-p no:X`` and
    ``-p no:X`` an earlier ``-p X`` (by plugin name, so a module path matches its name)."""
    def name(option: str) -> str:
        return canonical_name(option.strip().removeprefix("no:"))

    merged = list(base)
    for change in changes:
        merged = [option for option in merged if name(option) != name(change)] + [change]
    return merged


def _parent_agents(parent: RunDir) -> dict[str, tuple[str, str]]:
    """agent id -> (persona name, population)."""
    if not parent.events_path.is_file():
        raise UsageError(f"{parent.path}: no events.sqlite (the run never started): nothing to branch")
    db = sqlite3.connect(f"file:{parent.events_path}?mode=ro", uri=True)
    try:
        return {row[0]: (row[1], row[2]) for row in db.execute("SELECT agent_id, name, population FROM agents")}
    finally:
        db.close()


def _check_interventions(interventions: list[BranchChange], agent_ids: dict[str, tuple[str, str]], scenario: Any) -> None:
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


@hookimpl
def townsquare_register_interventions():
    return [InterventionSpec("branch", BranchChanges, config_model=BranchChangesConfig,
                             description="a branch's changes (townsquare branch --persona/--post/--memory/--follow/--unfollow)")]


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.command("branch")
    @click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
    @click.option("--at", "at", type=int, required=True, help="First round that plays differently (the branch starts from the checkpoint after AT-1).")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Branch directory (with --recommenders: a folder of branches).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Change a scenario key from round AT on.")
    @click.option("--persona", "personas", multiple=True, metavar="AGENT=FILE", help="Replace an agent's persona (JSON or one sentence a line).")
    @click.option("--post", "posts", multiple=True, metavar="AUTHOR=TEXT", help="Post TEXT as an agent or an outside account.")
    @click.option("--memory", "memories", multiple=True, metavar="AGENT=TEXT", help="Hand an observation to an agent's memory.")
    @click.option("--follow", "follows", multiple=True, metavar="A=B", help="Make agent A follow agent B.")
    @click.option("--unfollow", "unfollows", multiple=True, metavar="A=B", help="Make agent A unfollow agent B.")
    @click.option("--recommenders", default=None, metavar="A,B,...", help="One branch per recommender, from the same state.")
    @click.option("--quiet", is_flag=True, help="No progress bar or progress lines.")
    @backend_options
    @common_options
    def branch(run_dir: str, at: int, out: str | None, overrides, personas, posts, memories, follows, unfollows,
               recommenders: str | None, quiet: bool, plugin_options, backend: str | None, ray_address: str | None, **_: Any) -> None:
        """Continue RUN_DIR from round AT with interventions, into a new run directory."""
        changes = parse_interventions([*(("persona", v) for v in personas), *(("memory", v) for v in memories),
                                       *(("follow", v) for v in follows), *(("unfollow", v) for v in unfollows),
                                       *(("post", v) for v in posts)])
        overrides = [*backend_overrides(backend, ray_address), *overrides]
        variants: list[tuple[str | None, list[str], str | None]] = [(None, list(overrides), out)]
        if recommenders:
            names = [n.strip() for n in recommenders.split(",") if n.strip()]
            variants = [(n, [*overrides, f'recommender={{ name = "{n}" }}'], str(Path(out) / n) if out else None) for n in names]
        for label, sets, target in variants:
            with RunLines(quiet, label or "rounds") as progress:
                path, summary = branch_run(run_dir, at, target, overrides=sets, plugin_options=plugin_options,
                                           interventions=changes, progress=progress.update, on_ready=progress.announce, label=label,
                                           live=progress.live)
            report_run(path.path, summary)
            click.echo(str(path.path))
