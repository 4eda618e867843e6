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
again, once (:func:`townsquare.branch_simulation.resume_options`). Branching needs P's checkpoint after round R - 1: ``[engine] keep_checkpoints = 0`` keeps every
one (the default keeps the newest 3). A persona edit reaches components that read
``agent.persona`` when they act; state a component derived from the old persona and saved in
its checkpoint (a persona embedding, say) is kept as it was.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterable

import click
import structlog

from townsquare.api import hookimpl
from townsquare.branch_simulation import BranchSimulation, Intervention, parse_interventions, read_persona_file
from townsquare.cli.options import backend_options, backend_overrides, common_options
from townsquare.cli.run_output import RunLines, report_run
from townsquare.errors import UsageError
from townsquare.lifecycle import RunSummary
from townsquare.memory import MEMORY_TIERS
from townsquare.plugin_manager import canonical_name, make_plugin_manager, parse_plugin_options
from townsquare.rundir import RunDir, environment
from townsquare.runner import play_scenario, recorded_plugin_options, recorded_plugins, redact, redact_override
from townsquare.scenario import apply_overrides, resolve
from townsquare.store import ROUND_TABLES, EventStore

log = structlog.get_logger("townsquare.commands.branch")

__all__ = ["BranchSimulation", "Intervention", "branch_run", "copy_sqlite", "parse_interventions"]

CACHE_FILE = "llm_cache.sqlite"


def branch_run(parent_path: str | Path, at: int, out: str | Path | None = None, *, overrides: Iterable[str] = (),
               plugin_options: Iterable[str] = (), interventions: Iterable[Intervention] = (), progress: Any = None,
               on_ready: Any = None, label: str | None = None) -> tuple[RunDir, RunSummary]:
    """Branch ``parent_path`` at round ``at`` into ``out`` (default ``runs/<name>-branch-r<at>``)."""
    overrides, plugin_options, interventions = list(overrides), list(plugin_options), list(interventions)
    parent = RunDir.open(parent_path)
    manifest = parent.read_manifest()
    scenario, plugins, combined_options, plugin_changes = _branch_scenario(parent, manifest, overrides, plugin_options)
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
                                             *(f"-p {o}" for o in plugin_changes), *(i.describe() for i in interventions)],
                           "changes": [i.to_dict() for i in interventions]},
            })
            _copy_events(parent, run_dir, at)
            if state is not None:
                run_dir.write_checkpoint(at - 1, state, keep=0)
            _copy_cache(parent, run_dir)
        options = {"at": at, "interventions": interventions, "parent_slots": manifest.get("slot_table", [])}
        return run_dir, play_scenario(scenario, plugins, run_dir, on_ready, progress, options, resume=True, simulation_class=BranchSimulation)


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
                                           interventions=changes, progress=progress.update, on_ready=progress.announce, label=label)
            report_run(path.path, summary)
            click.echo(str(path.path))
