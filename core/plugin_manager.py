"""Finding, blocking and loading plugins; collecting their components.

Built-in behaviour is itself plugins (pytest's ``default_plugins``): the modules in
:data:`DEFAULT_PLUGINS`. Third-party plugins register through the entry-point group
``townsquare``. Every plugin has one canonical name: the entry-point name, or for a module
the last part of its dotted path. The same name works in ``-p no:NAME``,
``TOWNSQUARE_DISABLE_PLUGINS``, the manifest and ``townsquare plugins``.

Blocking happens before import: a disabled plugin's module is never imported. A plugin that
fails to import, misspells a hook, whose registration raises, returns the wrong record or
clashes with an earlier plugin's component name is reported with one warning naming it and
skipped as a whole (none of its components is registered, none of its hooks fires); every
other plugin and every command go on. ``strict=True`` (``--strict-plugins``) makes it fatal.
``-p no:NAME`` takes plugin names: a component name there is an error naming its plugin.

Settings: see :class:`townsquare.registry.ComponentRegistry` (``[plugins.NAME]``, or ``[plugins.NAME.COMPONENT]``
for a plugin whose components have different config models).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Iterable

import pluggy
import structlog

from . import hookspecs
from .errors import PluginError
from .markers import PROJECT_NAME
from .registry import ComponentRegistry
from .specs import REGISTRATION_HOOKS, ComponentSpec

log = structlog.get_logger("townsquare.plugins")

ENTRY_POINT_GROUP = "townsquare"
ENV_DISABLE = "TOWNSQUARE_DISABLE_PLUGINS"
ENV_NO_AUTOLOAD = "TOWNSQUARE_DISABLE_PLUGIN_AUTOLOAD"

#: Every ``-p`` option of the command line being run, wherever it stood (``townsquare -p X run``
#: and ``townsquare run ... -p X`` alike), in order; set by the CLI's ``main``, empty when the
#: kernel is used from Python. A command that reopens a run compares them with the recorded set.
COMMAND_LINE_PLUGINS: ContextVar[tuple[str, ...]] = ContextVar("townsquare_command_line_plugins", default=())

DEFAULT_PLUGINS: tuple[str, ...] = (
    # the built-in commands (each adds itself through townsquare_register_commands)
    "townsquare.commands.run",
    "townsquare.commands.resume",
    "townsquare.commands.branch",
    "townsquare.commands.interview",
    "townsquare.commands.compare",
    "townsquare.commands.ablate",
    "townsquare.commands.sweep",
    "townsquare.commands.export",
    "townsquare.commands.plugins",
    # the Ray backend for [engine] backend = "ray"
    "townsquare.scaleout",
    # platforms and feeds
    "townsquare.platforms.in_memory",
    "townsquare.platforms.mastodon",
    "townsquare.recommenders.chronological",
    "townsquare.recommenders.random",
    "townsquare.recommenders.mastodon_digest",
    "townsquare.recommenders.popular_feed",
    "townsquare.recommenders.embedding_feed",
    # personas, embeddings, the no-LLM baseline, metrics
    "townsquare.plugins.personas.persona_files",
    "townsquare.plugins.embedders.hash",
    "townsquare.plugins.baselines.embedding_baseline",
    "townsquare.plugins.report.activity",
    "townsquare.plugins.report.groundedness",
    "townsquare.plugins.report.zhou_command",
    # run-health monitors (metrics that warn while a run goes on)
    "townsquare.plugins.monitors.repetition",
    "townsquare.plugins.monitors.homogenisation",
    "townsquare.plugins.monitors.silent_agents",
    "townsquare.plugins.monitors.persona_drift",
    "townsquare.plugins.monitors.parse_failures",
    # LLM layer: providers, embedders, the middleware chain and its commands
    "townsquare.plugins.llm.openai",
    "townsquare.plugins.llm.langchain",
    "townsquare.plugins.llm.local",
    "townsquare.plugins.embedders.minilm",
    "townsquare.plugins.embedders.openai_embedder",
    "townsquare.plugins.llm.llm_cache",
    "townsquare.plugins.llm.llm_budget",
    "townsquare.plugins.llm.llm_retry",
    "townsquare.plugins.llm.llm_concurrency",
    "townsquare.plugins.llm.llm_commands",
    # Zhou et al.'s social-media agent
    "townsquare.plugins.social_agent.persona.personachat_personas",
    "townsquare.plugins.social_agent.persona.synthetic",
    "townsquare.plugins.social_agent.persona.dynamic_persona",
    "townsquare.plugins.social_agent.persona.full_persona",
    "townsquare.plugins.social_agent.knowledge.knowledge_boundary",
    "townsquare.plugins.social_agent.knowledge.unbounded_knowledge",
    "townsquare.plugins.social_agent.knowledge.no_knowledge",
    "townsquare.plugins.social_agent.knowledge.hotpotqa",
    "townsquare.plugins.social_agent.actions.social_agent",
    "townsquare.plugins.social_agent.actions.social_agent_combined",
    "townsquare.plugins.social_agent.planning.activity_plan",
    "townsquare.plugins.social_agent.memory.action_memory",
    "townsquare.plugins.social_agent.reflection.follow_reflection",
    "townsquare.plugins.social_agent.zhou_answer_priors",
    # Park et al.'s generative agents: memory stream, retrieval, reflection, planning, social policy
    "townsquare.plugins.generative_agents.planning.day_plan",
    "townsquare.plugins.generative_agents.planning.agent_summary",
    "townsquare.plugins.generative_agents.dialogue.conversation_memory",
    "townsquare.plugins.generative_agents.memory.memory_stream",
    "townsquare.plugins.generative_agents.memory.park_retrieval",
    "townsquare.plugins.generative_agents.reflection.park_reflection",
    "townsquare.plugins.generative_agents.policy.generative_agent",
    "townsquare.plugins.generative_agents.park_answer_priors",
    # Smallville in text (Park et al. §5): the town platform, its seed files, the town policy, its metrics
    "townsquare.platforms.town",
    "townsquare.platforms.town.smallville",
    "townsquare.plugins.generative_agents.policy.town_agent",
    "townsquare.plugins.generative_agents.town_metrics",
    "townsquare.plugins.generative_agents.evaluation.evaluate_command",
    # RecAgent (Wang et al.): memory tiers, reflection, profiles, policy; the recsys platform
    "townsquare.platforms.recsys",
    "townsquare.recommenders.item_random",
    "townsquare.recommenders.item_popularity",
    "townsquare.recommenders.item_mf",
    "townsquare.recommenders.item_embedding",
    "townsquare.recommenders.rec_strategy",
    "townsquare.plugins.recagent.memory.sensory_memory",
    "townsquare.plugins.recagent.memory.short_term_memory",
    "townsquare.plugins.recagent.memory.long_term_memory",
    "townsquare.plugins.recagent.memory.recagent_reflection",
    "townsquare.plugins.recagent.recagent_profiles",
    "townsquare.plugins.recagent.recagent_policy",
    "townsquare.plugins.recagent.recagent_answer_priors",
    "townsquare.plugins.recagent.studies.cocoon_entropy",
    "townsquare.plugins.recagent.studies.soc_strategy",
    "townsquare.plugins.recagent.studies.conformity",
    "townsquare.plugins.recagent.studies.eval_commands",
    "townsquare.plugins.some.some_command",
    "townsquare.plugins.pathways.pathways_command",
    "townsquare.plugins.baselines.embedding_items",
    # reports
    "townsquare.plugins.report.run_report",
    # the datasets of the paper set-ups (`townsquare data`)
    "townsquare.plugins.data",
    # runs held against traces of real people: the commands and the dimensions they score
    "townsquare.plugins.validation.validate",
    "townsquare.plugins.validation.calibrate",
    "townsquare.plugins.validation.dimensions.activity_per_user",
    "townsquare.plugins.validation.dimensions.inter_event_times",
    "townsquare.plugins.validation.dimensions.time_of_day",
    "townsquare.plugins.validation.dimensions.rating_distribution",
    "townsquare.plugins.validation.dimensions.popularity_concentration",
    "townsquare.plugins.validation.dimensions.genre_entropy",
    "townsquare.plugins.validation.dimensions.social_degree",
    "townsquare.plugins.validation.dimensions.cascade_shape",
    "townsquare.plugins.validation.dimensions.cascade_growth",
)


def canonical_name(module_path: str) -> str:
    return module_path.rsplit(".", 1)[-1]


class _PluginManager(pluggy.PluginManager):
    """Treats every ``townsquare_*`` function of a plugin as a hook implementation, marked or
    not, so that ``check_pending`` catches a misspelt hook name instead of ignoring it."""

    def parse_hookimpl_opts(self, plugin: Any, name: str):  # type: ignore[override]
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith(f"{PROJECT_NAME}_") and callable(getattr(plugin, name, None)):
            opts = {}
        return opts


@dataclass
class PluginInfo:
    name: str
    source: str  # builtin | entrypoint | module
    module: str
    version: str
    status: str = "loaded"  # loaded | disabled | failed | not in run (a reopened run did not use it)
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Plugins:
    """A loaded plugin set: the pluggy manager, what was loaded or skipped, and the components."""

    pm: pluggy.PluginManager
    infos: dict[str, PluginInfo]
    registry: "ComponentRegistry"
    enabled: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()
    strict: bool = False

    @property
    def hook(self):
        return self.pm.hook

    def versions(self) -> dict[str, str]:
        return {name: info.version for name, info in self.infos.items() if info.status == "loaded"}

    def call_each(self, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call ``hook_name`` plugin by plugin (for hooks run outside a simulation, such as
        ``townsquare_register_commands``): a plugin whose implementation raises is reported and
        skipped like one that fails to import (``strict`` re-raises), the others still run."""
        results = []
        for impl in reversed(getattr(self.pm.hook, hook_name).get_hookimpls()):
            try:
                result = impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
            except Exception as exc:
                info = self.infos[impl.plugin_name]
                _fail(info, exc, self.strict)
                _unregister(self.pm, impl.plugin_name)
                self.registry.remove_plugin(impl.plugin_name)
                info.components = []
                continue
            if result is not None:
                results.append(result)
        return results


def parse_plugin_options(options: Iterable[str]) -> tuple[list[str], list[str]]:
    """Split ``-p`` values into (enable, disable): ``no:NAME`` disables, anything else enables."""
    enable, disable = [], []
    for option in options:
        option = option.strip()
        if option.startswith("no:"):
            disable.append(option[3:])
        elif option:
            enable.append(option)
    return enable, disable


def make_plugin_manager(
    enable: Iterable[str] = (),
    disable: Iterable[str] = (),
    autoload: bool | None = None,
    strict: bool = False,
    extra_plugins: Iterable[tuple[str, Any]] = (),
    only: Iterable[str] | None = None,
) -> Plugins:
    """Load the built-in plugins, entry-point plugins (unless autoload is off) and ``enable``d
    ones, except those in ``disable`` or ``$TOWNSQUARE_DISABLE_PLUGINS``.

    ``only`` (a reopened run's recorded plugins): any other plugin is left out, unimported, with
    the status ``not in run`` (one installed since the run was made, say).

    ``enable`` entries are entry-point names (loaded even when autoload is off) or dotted
    module paths. ``extra_plugins`` are ``(name, object)`` pairs registered as they are (the
    testing kit's inline plugins).
    """
    enable, disable = list(enable), list(disable)
    env_disabled = [n.strip() for n in os.environ.get(ENV_DISABLE, "").split(",") if n.strip()]
    blocked = set(disable) | (set(env_disabled) - set(enable))
    allowed = None if only is None else set(only) | {canonical_name(n) for n in enable} | set(enable)
    if autoload is None:
        autoload = os.environ.get(ENV_NO_AUTOLOAD, "").strip() in ("", "0", "false", "no")

    pm = _PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    infos: dict[str, PluginInfo] = {}

    def load(name: str, source: str, module_path: str, version: str, importer) -> None:
        if name in infos and infos[name].status == "loaded":
            return
        info = PluginInfo(name=name, source=source, module=module_path, version=version)
        infos[name] = info
        if name in blocked:
            info.status = "disabled"
            return
        if allowed is not None and name not in allowed:
            info.status = "not in run"
            return
        try:
            plugin = importer()
            pm.register(plugin, name=name)
        except Exception as exc:  # a broken plugin must not take the others down
            _unregister(pm, name)
            _fail(info, exc, strict)
            return
        info.hooks = sorted(impl.name for impl in pm.get_hookcallers(plugin) or ())

    version = _own_version()
    for module_path in DEFAULT_PLUGINS:
        load(canonical_name(module_path), "builtin", module_path, version, lambda m=module_path: importlib.import_module(m))

    entry_points = {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    for ep_name in sorted(entry_points):
        if autoload or ep_name in enable:
            ep = entry_points[ep_name]
            load(ep_name, "entrypoint", ep.value, _dist_version(ep), ep.load)

    for option in enable:
        if option in infos or option in entry_points:
            continue
        if importlib.util.find_spec(option.split(".")[0]) is None:
            raise PluginError(f"-p {option}: no plugin or module of that name (installed plugins: {', '.join(sorted(infos)) or 'none'})")
        load(canonical_name(option), "module", option, version, lambda m=option: importlib.import_module(m))

    for name, obj in extra_plugins:
        load(name, "inline", getattr(obj, "__name__", type(obj).__name__), "", lambda o=obj: o)

    _reject_unknown_hooks(pm, infos, strict)

    registry = collect_components(pm, infos, strict)
    registry.inactive = {name: info.status for name, info in infos.items() if info.status != "loaded"}
    for name in sorted(blocked - set(infos)):
        component = registry.provider_of(name)
        if component is not None:
            # -p no:COMPONENT would leave the plugin loaded and the component in use: refuse.
            raise PluginError(f"-p no:{name}: {name!r} is a {component.slot} component of plugin {component.plugin!r}, "
                              f"not a plugin; disable the plugin with -p no:{component.plugin}, or choose another "
                              f"{component.slot} in the scenario")
        # A disabled name nobody provides is most often a typo: say so, but do not fail.
        log.warning("plugin.unknown_disabled", plugin=name)
    return Plugins(pm=pm, infos=infos, registry=registry, enabled=tuple(enable), disabled=tuple(sorted(blocked)), strict=strict)


def _reject_unknown_hooks(pm: pluggy.PluginManager, infos: dict[str, PluginInfo], strict: bool) -> None:
    """``check_pending`` per plugin: a plugin with a ``townsquare_*`` function that is no hook
    (a misspelt name) fails alone, instead of taking every other plugin down with it."""
    for hook_name, caller in list(vars(pm.hook).items()):
        if getattr(caller, "spec", True) is not None or not hook_name.startswith(f"{PROJECT_NAME}_"):
            continue
        for impl in caller.get_hookimpls():
            info = infos.get(impl.plugin_name)
            if info is None or info.status != "loaded":
                continue
            error = PluginError(f"{hook_name} is not a townsquare hook (misspelt? see docs/reference.md)")
            _fail(info, error, strict)
            _unregister(pm, impl.plugin_name)


def _unregister(pm: pluggy.PluginManager, name: str) -> None:
    if pm.get_plugin(name) is not None:
        pm.unregister(name=name)


#: (plugin, error) pairs already reported in this process
_reported: set[tuple[str, str]] = set()


def _fail(info: PluginInfo, exc: BaseException, strict: bool) -> None:
    info.status = "failed"
    info.error = f"{type(exc).__name__}: {exc}"
    info.hooks, info.components = [], []
    if strict:
        raise PluginError(f"plugin {info.name!r} failed to load: {info.error}") from exc
    if (info.name, info.error) not in _reported:  # resume/replay load the plugins again: warn once
        _reported.add((info.name, info.error))
        log.warning("plugin.failed", plugin=info.name, error=info.error, skipped="--strict-plugins makes this fatal")


def _own_version() -> str:
    from . import __version__

    return __version__


def _dist_version(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.version if dist is not None else "unknown"


def collect_components(pm: pluggy.PluginManager, infos: dict[str, PluginInfo], strict: bool) -> ComponentRegistry:
    """Ask every loaded plugin for its records, one plugin at a time: a plugin whose
    registration raises, returns the wrong record type or clashes with an earlier plugin is
    reported and skipped (unregistered, so none of its hooks fire); the others go on."""
    registry = ComponentRegistry()
    per_plugin: dict[str, list[tuple[str, Any]]] = {}
    for hook_name in REGISTRATION_HOOKS:
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            per_plugin.setdefault(impl.plugin_name, []).append((hook_name, impl))
    for name, info in infos.items():
        if info.status != "loaded" or name not in per_plugin:
            continue
        try:
            records: list[ComponentSpec] = []
            for hook_name, impl in per_plugin[name]:
                spec_type = REGISTRATION_HOOKS[hook_name]
                for record in impl.function() or []:
                    if not isinstance(record, spec_type):
                        raise PluginError(f"{hook_name} returned {type(record).__name__}, expected {spec_type.__name__}")
                    record.plugin = name
                    records.append(record)
            registry.add_plugin(records)
        except Exception as exc:
            _fail(info, exc, strict)
            _unregister(pm, name)
            continue
        info.components = [{"slot": r.slot, "name": r.name, "priority": r.priority} for r in records]
    return registry
