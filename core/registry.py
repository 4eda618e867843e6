"""The components the loaded plugins provide, by slot and name, and where their settings live.

Built by :func:`townsquare.plugin_manager.collect_components`; the scenario resolver asks it
for components (by name, or ``auto``: the highest priority) and for each component's settings.
"""

from __future__ import annotations

from typing import Any

from .errors import ComponentError, PluginError
from .specs import ComponentSpec


class ComponentRegistry:
    """Components by slot and name, with the plugin that provides each, and where each
    component's settings live in a scenario.

    Settings scheme: a plugin whose components share one config model (or that has one
    component with a model) reads ``[plugins.NAME]``. A plugin whose components have
    *different* config models reads one subtable per component, ``[plugins.NAME.COMPONENT]``
    (and ``populations[i].config.NAME.COMPONENT``). A component's own table (``[recommender]``,
    ``[platform]``, ``[llm]``...) is merged over either.
    """

    def __init__(self) -> None:
        self.by_slot: dict[str, dict[str, ComponentSpec]] = {}
        #: plugin -> its one config model (plugins whose components share one)
        self.plugin_config_models: dict[str, type] = {}
        #: plugin -> {component name -> config model} (plugins with per-component settings)
        self.component_config_models: dict[str, dict[str, type]] = {}
        #: plugin -> "disabled" | "failed", for plugins that provide nothing in this run
        self.inactive: dict[str, str] = {}

    def add(self, spec: ComponentSpec) -> None:
        self.add_plugin([spec])

    def add_plugin(self, specs: list[ComponentSpec]) -> None:
        """Add one plugin's records, all or none: a clash raises before anything is added."""
        for i, spec in enumerate(specs):
            other = self.by_slot.get(spec.slot, {}).get(spec.name) or next(
                (s for s in specs[:i] if (s.slot, s.name) == (spec.slot, spec.name)), None)
            if other is not None:
                raise PluginError(
                    f"component {spec.name!r} ({spec.slot}) is registered by both plugin {other.plugin!r} and plugin {spec.plugin!r}"
                )
        for spec in specs:
            self.by_slot.setdefault(spec.slot, {})[spec.name] = spec
        for plugin in {spec.plugin for spec in specs}:
            mine = [s for slot in self.by_slot.values() for s in slot.values() if s.plugin == plugin and s.config_model is not None]
            models = {s.name: s.config_model for s in mine}
            if len({s.config_model for s in mine}) <= 1:
                if mine:
                    self.plugin_config_models[plugin] = mine[0].config_model
                continue
            if len(models) < len(mine):
                clash = next(s.name for s in mine if sum(o.name == s.name for o in mine) > 1)
                for spec in specs:
                    self.by_slot[spec.slot].pop(spec.name, None)
                raise PluginError(f"plugin {plugin!r} has two components named {clash!r} with different config models: "
                                  f"their [plugins.{plugin}.{clash}] settings would clash; rename one")
            self.plugin_config_models.pop(plugin, None)
            self.component_config_models[plugin] = models

    def section_key(self, spec: ComponentSpec) -> str:
        """Where ``spec``'s settings live: ``plugins.NAME`` or ``plugins.NAME.COMPONENT``."""
        if spec.plugin in self.component_config_models:
            return f"plugins.{spec.plugin}.{spec.name}"
        return f"plugins.{spec.plugin}"

    def settings_for(self, spec: ComponentSpec, sections: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """``spec``'s settings out of a ``{plugin: table}`` mapping (``[plugins]`` or a
        population's ``config``), following the scheme in the class docstring."""
        table = sections.get(spec.plugin) or {}
        if spec.plugin in self.component_config_models:
            return dict(table.get(spec.name) or {})
        return dict(table)

    def check_section(self, plugin: str, section: dict[str, Any]) -> str | None:
        """What is wrong with ``[plugins.PLUGIN]`` (None: nothing): a plugin without a config
        model takes no settings; a plugin with per-component settings takes only component
        subtables."""
        if not section:
            return None
        per_component = self.component_config_models.get(plugin)
        if per_component is not None:
            stray = [key for key, value in section.items() if key not in per_component or not isinstance(value, dict)]
            if stray:
                return (f"plugin {plugin!r} has per-component settings: {stray[0]!r} is not one of its components "
                        f"(write [plugins.{plugin}.COMPONENT] with COMPONENT one of: {', '.join(sorted(per_component))})")
            return None
        if plugin not in self.plugin_config_models:
            return f"plugin {plugin!r} takes no configuration"
        return None

    def remove_plugin(self, plugin: str) -> None:
        for slot in self.by_slot.values():
            for name in [n for n, spec in slot.items() if spec.plugin == plugin]:
                del slot[name]
        self.plugin_config_models.pop(plugin, None)
        self.component_config_models.pop(plugin, None)
        self.inactive[plugin] = "failed"

    def names(self, slot: str) -> list[str]:
        return sorted(self.by_slot.get(slot, {}))

    def get(self, slot: str, name: str, where: str = "") -> ComponentSpec:
        spec = self.by_slot.get(slot, {}).get(name)
        if spec is None:
            choices = ", ".join(self.names(slot)) or "none installed"
            prefix = f"{where}: " if where else ""
            raise ComponentError(f"{prefix}unknown {slot} {name!r} (choose from: {choices}){self.inactive_hint(name)}")
        return spec

    def inactive_hint(self, name: str) -> str:
        """Why a component may be missing: its plugin of the same name is disabled or failed,
        or the list of plugins that are."""
        if name in self.inactive:
            return f"; plugin {name!r} is {self.inactive[name]}"
        if self.inactive:
            return f"; disabled or failed plugins: {', '.join(sorted(self.inactive))}"
        return ""

    def auto(self, slot: str) -> ComponentSpec | None:
        """The highest-priority implementer of ``slot`` (ties broken by name), or None."""
        specs = list(self.by_slot.get(slot, {}).values())
        if not specs:
            return None
        return max(specs, key=lambda s: (s.priority, s.name))

    def provider_of(self, name: str) -> ComponentSpec | None:
        """The component called ``name`` in any slot (the first by slot name), or None."""
        return next((slot[name] for _, slot in sorted(self.by_slot.items()) if name in slot), None)
