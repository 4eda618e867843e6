"""Starting and resuming runs: the glue between a scenario, the plugins and a run directory.

The CLI and the Python API (tests, benchmarks, notebooks) both go through here.
"""

from __future__ import annotations

import asyncio
import platform as _platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

import structlog

from townsquare import __version__
from townsquare.engine import Progress, Simulation, run_collector
from townsquare.errors import RunStopped, UsageError
from .run_lock import claim, locked, open_run
from .input_fingerprints import check_inputs, input_fingerprints, recorded_inputs
from townsquare.lifecycle import RunSummary
from townsquare.plugin_manager import COMMAND_LINE_PLUGINS, Plugins, canonical_name, make_plugin_manager, parse_plugin_options
from townsquare.rundir import RunDir
from townsquare.scenario import ResolvedScenario, resolve
from townsquare.launch.scenario_files import apply_overrides, load_scenario
from townsquare.secrets import is_secret_key
from townsquare.llm_modes import provider_capabilities
from townsquare.turns import TurnsBackend
from townsquare.world import World
from .settings_kinds import check_resume_overrides

log = structlog.get_logger("townsquare.launch.runner")

def redact(value: Any) -> Any:
    """A copy of scenario data with secret values (``api_key = "..."`` written inline, against
    the documentation) replaced by ``***``. References to secrets (``api_key_env``,
    ``api_key_file``, ``tokens``) are kept: ``resume`` needs them."""
    if isinstance(value, dict):
        return {k: ("***" if is_secret_key(k) and isinstance(v, str) else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redact_override(override: str) -> str:
    """``--set llm.api_key=sk-...`` as ``llm.api_key=***`` for the manifest."""
    key = override.split("=", 1)[0]
    return key + "=***" if is_secret_key(key.rsplit(".", 1)[-1]) else override


def new_manifest(scenario: ResolvedScenario, plugins: Plugins, overrides: list[str], plugin_options: list[str]) -> dict[str, Any]:
    return {
        "townsquare_version": __version__,
        "name": scenario.model.name,
        "source": scenario.source,
        "base_dir": scenario.base_dir,
        "overrides": [redact_override(o) for o in overrides],
        # the -p options given, or, for a plugin set made in Python, the plugins it enabled
        "plugin_options": plugin_options or [name for name in plugins.enabled if name],
        "seed": scenario.model.seed,
        "rounds": scenario.model.rounds,
        "slot_table": scenario.slot_table(),
        "plugins": plugins.versions(),
        "disabled_plugins": list(plugins.disabled),
        "scenario": redact(scenario.data),
        "datasets": scenario.datasets,
        "inputs": recorded_inputs(input_fingerprints(scenario, plugins)),
        "environment": environment(),
        "status": "running",
        "rounds_completed": 0,
    }


def environment() -> dict[str, str]:
    """Where a run was made, for its manifest: the Python version, the platform, the time."""
    return {
        "python": _platform.python_version(),
        "platform": _platform.platform(),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def listed(options: str | Iterable[str]) -> list[str]:
    """``--set`` lines or ``-p`` options as a list: one given as a string is one (``"no:x"``), not its letters."""
    return [options] if isinstance(options, str) else list(options)


def start_run(
    scenario_path: str | Path | Mapping[str, Any],
    *,
    overrides: Iterable[str] = (),
    seed: int | None = None,
    out: str | Path | None = None,
    plugin_options: Iterable[str] = (),
    plugins: Plugins | None = None,
    progress: Progress | None = None,
    on_ready: Any = None,
    **simulation_options: Any,
) -> tuple[RunDir, RunSummary]:
    """Run a scenario file (or its content as a dict: :func:`~townsquare.launch.scenario_files.load_scenario`)
    into a new run directory. ``on_ready(scenario, run_dir)`` is called
    once every input is read and checked (the CLI prints the slot table then).

    The scenario is validated before the directory is made; files the components read (persona,
    knowledge, prompts and key files) are read while the run is built, and a problem found there
    removes the directory again (:func:`townsquare.launch.run_lock.claim`), so a bad input never leaves one behind."""
    overrides, plugin_options = listed(overrides), listed(plugin_options)
    if plugins is None:
        enable, disable = parse_plugin_options(plugin_options)
        plugins = make_plugin_manager(enable=enable, disable=disable)
    scenario = load_scenario(scenario_path, overrides, plugins, seed=seed)
    with claim(out, scenario.model.name) as run_dir:
        run_dir.write_manifest(new_manifest(scenario, plugins, overrides, plugin_options))
        return run_dir, play_scenario(scenario, plugins, run_dir, on_ready, progress, simulation_options)


def play_scenario(scenario: ResolvedScenario, plugins: Plugins, run_dir: RunDir, on_ready: Any, progress: Progress | None,
                  simulation_options: dict[str, Any], resume: bool = False, on_built: Any = None) -> RunSummary:
    """Build and run the simulation; the run counts as started once it is built."""

    def built(world: World) -> None:
        described = answer_modes(world)
        if described and run_dir.manifest_path.is_file():
            run_dir.update_manifest(**described)
        run_dir.started = True
        if on_built is not None:
            on_built()
        if on_ready is not None:
            on_ready(scenario, run_dir)

    if scenario.model.engine.backend != "local":
        simulation_options = {"backend": engine_backend(plugins, scenario.model.engine.backend), **simulation_options}
    simulation = Simulation(scenario, plugins, run_dir, progress=progress, on_built=built, **simulation_options)
    try:
        with run_collector():
            return asyncio.run(simulation.run(resume=resume))
    except RunStopped as exc:
        # stopped while building (persona enrichment met an outage or a budget): say so in the
        # manifest, as a stop during a round does
        run_dir.update_manifest(status="stopped", stop_reason=exc.reason)
        raise


def load_plugins(plugin_options: Iterable[str] = (), disable: Iterable[str] = ()) -> Plugins:
    """The plugin set ``-p`` options (``plugin_options``) ask for, less ``disable``."""
    enable, disabled = parse_plugin_options(plugin_options)
    return make_plugin_manager(enable=enable, disable=[*disabled, *disable])


def answer_modes(world: World) -> dict[str, Any]:
    """How structured answers are held to their format, for the run's manifest (written once the
    world is built; the CLI prints it at start, the run's end adds the counts): the provider's
    capabilities and the mode per kind (``llm``), and the slot table where each component that
    declares its answers (an ``answers`` mapping of purpose -> AnswerFormat) says the mode each
    of its purposes runs in (``slot_table``). Empty without an LLM."""
    llm = getattr(world.services, "llm", None)
    if llm is None:
        return {}
    modes = llm.modes
    declared: dict[tuple[str, str], str] = {}
    for agent in world.agents:
        for slot, component in agent.components.items():
            answers = getattr(component, "answers", None)
            if answers and (agent.population, slot) not in declared:
                declared[(agent.population, slot)] = ", ".join(
                    f"{purpose}: {modes.get(answer.kind, 'prompt')}" for purpose, answer in answers.items())
    rows = [{**row, "answers": declared[(row["scope"], row["slot"])]} if (row["scope"], row["slot"]) in declared else row
            for row in world.scenario.slot_table()]
    return {"slot_table": rows, "llm": {
        "provider": world.provider.name, "model": world.provider.model,
        "capabilities": {kind: list(m) for kind, m in provider_capabilities(world.provider).items()}, "modes": modes}}


def engine_backend(plugins: Plugins, name: str) -> TurnsBackend:
    """The backend a plugin offers for ``[engine] backend = NAME`` (``townsquare_engine_backend``)."""
    backend = plugins.hook.townsquare_engine_backend(name=name)
    if backend is None:
        raise UsageError(f"[engine] backend = {name!r}: no loaded plugin offers it (the built-in 'scaleout' offers 'ray';"
                         " is it disabled with -p no:scaleout?)")
    return backend


def load_run(path: str | Path, plugins: Plugins | None = None, extra_plugin_options: Iterable[str] = (),
             overrides: Iterable[str] = (), continuing: bool = False) -> tuple[RunDir, ResolvedScenario, Plugins]:
    """Re-resolve a run's scenario from its manifest, with the plugin set it ran with
    (:func:`run_plugins`) and ``overrides`` applied on top (:func:`resume_run` records them in
    the manifest). ``continuing``: the command goes on with the run (resume, replay), so the
    ``-p`` options given now may not add a plugin either."""
    run_dir = open_run(path)
    manifest = run_dir.read_manifest()
    overrides = list(overrides)
    if overrides:
        manifest["scenario"] = apply_overrides(manifest["scenario"], overrides, str(run_dir.manifest_path))
    if plugins is None:
        plugins = run_plugins(manifest, str(run_dir.manifest_path), extra_plugin_options, continuing=continuing)
    missing = sorted(recorded_plugins(manifest) - set(plugins.versions()))
    if missing:
        raise UsageError(f"{run_dir.manifest_path}: the run used plugins that are not loaded now: {', '.join(missing)}")
    scenario = resolve(manifest["scenario"], str(run_dir.manifest_path), manifest.get("base_dir", "."), plugins)
    return run_dir, scenario, plugins


def recorded_plugins(manifest: dict[str, Any]) -> set[str]:
    """The plugins a run had loaded, by their current names."""
    return set(manifest.get("plugins", {}))


def recorded_plugin_options(manifest: dict[str, Any]) -> list[str]:
    """The ``-p`` options that rebuild a run's plugin set: those it was started with, then
    ``no:NAME`` for every plugin it ran without (``-p no:``, ``$TOWNSQUARE_DISABLE_PLUGINS``)."""
    options = list(manifest.get("plugin_options", []))
    disabled = [f"no:{name}" for name in manifest.get("disabled_plugins", [])]
    return options + [option for option in disabled if option not in options]


def run_plugins(manifest: dict[str, Any], where: str, given: Iterable[str] = (), *, continuing: bool = False) -> Plugins:
    """Exactly the plugin set a run recorded: the plugins it loaded, those it disabled kept
    disabled, any plugin installed since left out (a warning names it).

    ``given``: ``-p`` options given now (default: the command line's,
    :data:`~townsquare.plugin_manager.COMMAND_LINE_PLUGINS`). One the run recorded changes
    nothing; one that disables a plugin the run used, or enables one it disabled, is an error
    naming both; one that adds a plugin is an error when ``continuing`` (a run goes on with the
    plugins it started with: ``townsquare branch -p ...`` changes them) and added otherwise (an
    evaluation's judge, say)."""
    given = list(given) or list(COMMAND_LINE_PLUGINS.get())
    recorded = recorded_plugin_options(manifest)
    enable, disable = parse_plugin_options(recorded)
    used = recorded_plugins(manifest) if "plugins" in manifest else None
    run_disabled = set(disable)
    added: list[str] = []
    for option in given:
        if option in recorded or option.strip() in recorded:
            continue
        now_enable, now_disable = parse_plugin_options([option])
        for name in now_disable:
            if used is None or name in used:
                raise UsageError(f"{where}: -p no:{name} given now, but the run used plugin {name!r}; "
                                 f"a run is reopened with its own plugins ({_recorded_text(recorded)})")
        for name in now_enable:
            short = canonical_name(name)
            if short in run_disabled or name in run_disabled:
                raise UsageError(f"{where}: -p {name} given now, but the run was made with -p no:{short}; "
                                 f"a run is reopened with its own plugins ({_recorded_text(recorded)}); "
                                 "townsquare branch -p ... makes a run that differs")
            if used is not None and (short in used or name in used):
                added.append(name)  # the run had it (a run started from Python records no -p)
                continue
            if continuing:
                raise UsageError(f"{where}: -p {name} given now, but the run did not use it; a run goes on with "
                                 f"its own plugins ({_recorded_text(recorded)}); townsquare branch -p ... makes a run that differs")
            added.append(name)
    plugins = make_plugin_manager(enable=[*enable, *added], disable=disable, only=used)
    left_out = sorted(name for name, info in plugins.infos.items() if info.status == "not in run")
    if left_out:
        log.warning("run.plugins_left_out", run=where, plugins=", ".join(left_out),
                    reason="installed now, not loaded when the run was made")
    return plugins


def _recorded_text(recorded: list[str]) -> str:
    return "recorded: " + " ".join(f"-p {option}" for option in recorded) if recorded else "recorded: no -p options"


def resume_run(path: str | Path, *, overrides: Iterable[str] = (), plugins: Plugins | None = None, progress: Progress | None = None,
               on_ready: Any = None, accept_changed_inputs: bool = False, **simulation_options: Any) -> tuple[RunDir, RunSummary]:
    """Continue a run from its newest checkpoint (after a crash, a kill or a budget stop), as it
    was recorded. ``overrides`` may change settings that steer the machinery (a raised budget, a
    new endpoint) and extend ``rounds``; one that changes what agents do is refused
    (:mod:`townsquare.launch.settings_kinds`), and so is an input file changed since it was recorded,
    unless ``accept_changed_inputs`` (:mod:`townsquare.launch.input_fingerprints`). The manifest keeps
    each resume's changes with the round they took effect from. The run directory is locked
    first and left untouched until every input has been checked."""
    overrides = listed(overrides)
    run_dir = open_run(path)
    run_dir.read_manifest()  # a broken manifest is reported before anything is locked
    with locked(run_dir):
        run_dir, scenario, plugins = load_run(path, plugins, overrides=overrides, continuing=True)
        recorded = run_dir.read_manifest()
        done = int(recorded.get("rounds_completed", 0))
        check_resume_overrides(recorded["scenario"], overrides, done, scenario, plugins.registry, str(run_dir.path))
        changed_inputs = check_inputs(recorded, scenario, plugins, done, accept=accept_changed_inputs)

        def mark_running() -> None:
            manifest = run_dir.read_manifest()
            if overrides or changed_inputs:
                manifest["scenario"] = redact(scenario.data)
                manifest["overrides"] = manifest.get("overrides", []) + [redact_override(o) for o in overrides]
                manifest["resumes"] = [*manifest.get("resumes", []), {"from_round": done, "set": [redact_override(o) for o in overrides],
                                                                     "inputs_changed": [c["key"] for c in changed_inputs]}]
            if changed_inputs:
                manifest["input_changes"] = [*manifest.get("input_changes", []), *changed_inputs]
                manifest["inputs"] = recorded_inputs(input_fingerprints(scenario, plugins))
            run_dir.write_manifest({**manifest, "status": "running"})

        return run_dir, play_scenario(scenario, plugins, run_dir, on_ready, progress, simulation_options, resume=True, on_built=mark_running)


def rerun(path: str | Path, out: str | Path, *, plugins: Plugins | None = None, progress: Progress | None = None,
          on_ready: Any = None, **simulation_options: Any) -> tuple[RunDir, RunSummary]:
    """Run a finished run's scenario again, from its manifest, into a new directory ``out``
    (``townsquare replay`` passes a provider that answers from the old run's cache). The old
    run is locked too, so it cannot be resumed while it is read."""
    with locked(open_run(path)):
        source_dir, scenario, plugins = load_run(path, plugins, continuing=True)
        manifest = source_dir.read_manifest()
        check_inputs(manifest, scenario, plugins, int(manifest.get("rounds_completed", 0)), accept=None)
        with claim(out, scenario.model.name) as run_dir:
            run_dir.write_manifest({**manifest, "replay_of": str(source_dir.path), "status": "running", "rounds_completed": 0})
            return run_dir, play_scenario(scenario, plugins, run_dir, on_ready, progress, simulation_options)
