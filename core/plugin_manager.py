"""Finding, blocking and loading plugins; collecting their components.

Built-in behaviour is itself plugins (pytest's ``default_plugins``): the modules in
:data:`DEFAULT_PLUGINS`. Third-party plugins register through the entry-point group
``townsquare``. Every plugin has one canonical name: the entry-point name, or for a module
the last part of its dotted path. The same name works in ``-p no:NAME``,
``TOWNSQUARE_DISABLE_PLUGINS``, the manifest and ``townsquare plugins``.

Blocking happens before import: a disabled plugin's module is never imported. A plugin that
fails to import or register is reported with its name and skipped; ``strict=True``
(``--strict-plugins``) makes that fatal.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Iterable

import pluggy
import structlog

from . import hookspecs
from .errors import ComponentError, PluginError
from .markers import PROJECT_NAME
from .specs import REGISTRATION_HOOKS, ComponentSpec

log = structlog.get_logger("townsquare.plugins")

ENTRY_POINT_GROUP = "townsquare"
ENV_DISABLE = "TOWNSQUARE_DISABLE_PLUGINS"
ENV_NO_AUTOLOAD = "TOWNSQUARE_DISABLE_PLUGIN_AUTOLOAD"

DEFAULT_PLUGINS: tuple[str, ...] = (
    # platforms and feeds
    "townsquare.platforms.in_memory",
    "townsquare.platforms.mastodon",
    "townsquare.recommenders.chronological",
    "townsquare.recommenders.random_feed",
    "townsquare.recommenders.mastodon_digest",
    # personas, embeddings, the no-LLM baseline, metrics
    "townsquare.plugins.persona_files",
    "townsquare.plugins.hash_embedder",
    "townsquare.plugins.embedding_baseline",
    "townsquare.plugins.activity_metrics",
    "townsquare.plugins.groundedness",
    # LLM layer: providers, embedders, the middleware chain and its commands
    "townsquare.plugins.llm_openai",
    "townsquare.plugins.llm_langchain",
    "townsquare.plugins.llm_local",
    "townsquare.plugins.embedder_minilm",
    "townsquare.plugins.embedder_openai",
    "townsquare.plugins.llm_cache",
    "townsquare.plugins.llm_budget",
    "townsquare.plugins.llm_retry",
    "townsquare.plugins.llm_concurrency",
    "townsquare.plugins.llm_commands",
    # Zhou et al.'s social-media agent
    "townsquare.plugins.social_agent.personachat_personas",
    "townsquare.plugins.social_agent.synthetic_personas",
    "townsquare.plugins.social_agent.persona_dynamic",
    "townsquare.plugins.social_agent.full_persona",
    "townsquare.plugins.social_agent.knowledge_boundary",
    "townsquare.plugins.social_agent.unbounded_knowledge",
    "townsquare.plugins.social_agent.no_knowledge",
    "townsquare.plugins.social_agent.hotpotqa_knowledge",
    "townsquare.plugins.social_agent.social_policy",
    "townsquare.plugins.social_agent.combined_policy",
    "townsquare.plugins.social_agent.activity_plan",
    "townsquare.plugins.social_agent.action_memory",
    "townsquare.plugins.social_agent.follow_reflection",
    # reports
    "townsquare.plugins.run_report",
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
    status: str = "loaded"  # loaded | disabled | failed
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

    @property
    def hook(self):
        return self.pm.hook

    def versions(self) -> dict[str, str]:
        return {name: info.version for name, info in self.infos.items() if info.status == "loaded"}


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
) -> Plugins:
    """Load the built-in plugins, entry-point plugins (unless autoload is off) and ``enable``d
    ones, except those in ``disable`` or ``$TOWNSQUARE_DISABLE_PLUGINS``.

    ``enable`` entries are entry-point names (loaded even when autoload is off) or dotted
    module paths. ``extra_plugins`` are ``(name, object)`` pairs registered as they are (the
    testing kit's inline plugins).
    """
    enable = list(enable)
    env_disabled = [n.strip() for n in os.environ.get(ENV_DISABLE, "").split(",") if n.strip()]
    blocked = set(disable) | (set(env_disabled) - set(enable))
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
        try:
            plugin = importer()
            pm.register(plugin, name=name)
        except Exception as exc:  # a broken plugin must not take the others down
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
        info = PluginInfo(name=name, source="inline", module=getattr(obj, "__name__", repr(obj)), version="")
        infos[name] = info
        if name in blocked:
            info.status = "disabled"
            continue
        pm.register(obj, name=name)
        info.hooks = sorted(impl.name for impl in pm.get_hookcallers(obj) or ())

    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {pm.get_name(exc.plugin)!r}: {exc}") from exc

    for name in blocked - set(infos):
        # A disabled name nobody provides is most often a typo: say so, but do not fail.
        log.warning("plugin.unknown_disabled", plugin=name)

    registry = collect_components(pm, infos, strict)
    return Plugins(pm=pm, infos=infos, registry=registry, enabled=tuple(enable), disabled=tuple(sorted(blocked)))


def _fail(info: PluginInfo, exc: BaseException, strict: bool) -> None:
    info.status = "failed"
    info.error = f"{type(exc).__name__}: {exc}"
    if strict:
        raise PluginError(f"plugin {info.name!r} failed to load: {info.error}") from exc
    log.warning("plugin.failed", plugin=info.name, error=info.error)


def _own_version() -> str:
    from . import __version__

    return __version__


def _dist_version(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.version if dist is not None else "unknown"


class ComponentRegistry:
    """Components by slot and name, with the plugin that provides each."""

    def __init__(self) -> None:
        self.by_slot: dict[str, dict[str, ComponentSpec]] = {}
        self.plugin_config_models: dict[str, type] = {}

    def add(self, spec: ComponentSpec) -> None:
        slot = self.by_slot.setdefault(spec.slot, {})
        other = slot.get(spec.name)
        if other is not None:
            raise PluginError(
                f"component {spec.name!r} ({spec.slot}) is registered by both plugin {other.plugin!r} and plugin {spec.plugin!r}"
            )
        slot[spec.name] = spec
        if spec.config_model is not None:
            known = self.plugin_config_models.get(spec.plugin)
            if known is not None and known is not spec.config_model:
                raise PluginError(f"plugin {spec.plugin!r} registers components with different config models; use one")
            self.plugin_config_models[spec.plugin] = spec.config_model

    def names(self, slot: str) -> list[str]:
        return sorted(self.by_slot.get(slot, {}))

    def get(self, slot: str, name: str, where: str = "") -> ComponentSpec:
        spec = self.by_slot.get(slot, {}).get(name)
        if spec is None:
            choices = ", ".join(self.names(slot)) or "none installed"
            prefix = f"{where}: " if where else ""
            raise ComponentError(f"{prefix}unknown {slot} {name!r} (choose from: {choices})")
        return spec

    def auto(self, slot: str) -> ComponentSpec | None:
        """The highest-priority implementer of ``slot`` (ties broken by name), or None."""
        specs = list(self.by_slot.get(slot, {}).values())
        if not specs:
            return None
        return max(specs, key=lambda s: (s.priority, s.name))


def collect_components(pm: pluggy.PluginManager, infos: dict[str, PluginInfo], strict: bool) -> ComponentRegistry:
    registry = ComponentRegistry()
    for hook_name, spec_type in REGISTRATION_HOOKS.items():
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            info = infos.get(impl.plugin_name)
            if info is None or info.status != "loaded":
                continue
            try:
                records = impl.function() or []
                for record in records:
                    if not isinstance(record, spec_type):
                        raise PluginError(f"{hook_name} returned {type(record).__name__}, expected {spec_type.__name__}")
                    record.plugin = impl.plugin_name
            except Exception as exc:
                _fail(info, exc, strict)
                pm.unregister(name=impl.plugin_name)
                continue
            for record in records:
                registry.add(record)
                info.components.append({"slot": record.slot, "name": record.name, "priority": record.priority})
    return registry
