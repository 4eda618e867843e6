"""Two kinds of settings, and which of them ``resume`` may change.

Settings that change what agents do (the seed, the rounds already played, personas, data, the
recommender, the model, every plugin setting unless declared otherwise) are part of a run's
record: a resumed run goes on with them as recorded, and ``townsquare branch RUN --at R --set
KEY=VALUE`` changes one from round R on, in a new run. Settings that only steer the machinery
(budgets, concurrency, endpoints, keys, timeouts, progress) may change at any resume. Each
settings model declares its machinery fields once, on the model, in the class variable
``machinery_settings`` (:func:`townsquare.specs.machinery_fields`); a field it does not name
changes behaviour, so a third party's setting is protected unless its plugin says otherwise.
``rounds`` may only grow: played rounds stay played.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from townsquare.errors import UsageError
from townsquare.scenario import ResolvedScenario, ScenarioModel
from townsquare.launch.scenario_files import apply_overrides
from townsquare.specs import machinery_fields

#: scenario tables that name a component and hold its settings (``name`` chooses the component)
COMPONENT_TABLES = ("platform", "recommender", "embedder", "llm", "knowledge")


def leaves(value: Any, path: tuple = ()) -> dict[tuple, Any]:
    """Scenario data as ``{key path: value}`` of its leaves (an empty table or list is a leaf)."""
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in leaves(item, (*path, key)).items()}
    if isinstance(value, list) and value:
        return {k: v for i, item in enumerate(value) for k, v in leaves(item, (*path, i)).items()}
    return {path: value}


def changed_keys(old: dict[str, Any], new: dict[str, Any]) -> list[tuple]:
    """The leaf keys whose value differs between two versions of scenario data (or that only one has)."""
    before, after = leaves(old), leaves(new)
    return [key for key in {**before, **after} if before.get(key, _MISSING) != after.get(key, _MISSING)]


_MISSING = object()


def key_text(path: tuple) -> str:
    """``("populations", 0, "count")`` as ``--set`` writes it: ``populations.0.count``."""
    return ".".join(str(part) for part in path)


def steers_machinery(path: tuple, scenario: ResolvedScenario, registry: Any) -> bool:
    """Whether scenario key ``path`` only steers the machinery, as its settings model declares."""
    head, rest = path[0], path[1:]
    if head in COMPONENT_TABLES:
        choice = getattr(scenario, head, None)
        return choice is not None and bool(rest) and rest[0] != "name" and _declared(choice.spec.config_model, rest)
    if head == "plugins" and len(rest) >= 2:
        return _section_declares(registry, rest[0], rest[1:])
    if head == "populations" and len(rest) >= 4 and rest[1] == "config":
        return _section_declares(registry, rest[2], rest[3:])
    return _declared(ScenarioModel, path)


def _section_declares(registry: Any, plugin: Any, rest: tuple) -> bool:
    """``[plugins.PLUGIN]`` (or a population's ``config.PLUGIN``): the plugin's one settings model,
    or, for per-component settings, the model of the component ``rest[0]`` names."""
    model = registry.plugin_config_models.get(plugin)
    if model is not None:
        return _declared(model, rest)
    per_component = registry.component_config_models.get(plugin, {})
    return len(rest) >= 2 and _declared(per_component.get(rest[0]), rest[1:])


def _declared(model: Any, path: tuple) -> bool:
    if model is None or not path:
        return False
    if path[0] in machinery_fields(model):
        return True
    nested = getattr(getattr(model, "model_fields", {}).get(path[0]), "annotation", None)
    return isinstance(nested, type) and issubclass(nested, BaseModel) and _declared(nested, path[1:])


def check_resume_overrides(recorded: dict[str, Any], overrides: list[str], done: int, scenario: ResolvedScenario,
                           registry: Any, run: str) -> None:
    """Refuse, in one line naming the key, an override that changes what agents do (or shortens
    the run) of a run that has played ``done`` rounds; machinery settings pass."""
    data = recorded
    for override in overrides:
        changed = apply_overrides(data, [override], "--set")
        for path in changed_keys(data, changed):
            key, old = key_text(path), leaves(data).get(path, _MISSING)
            if path == ("rounds",):
                if scenario.model.rounds < done:
                    raise UsageError(f"--set rounds={scenario.model.rounds}: the run has already played {done} rounds; "
                                     f"give at least {done} (a run is not shortened; townsquare branch --at starts one from an earlier round)")
            elif not steers_machinery(path, scenario, registry):
                was = "its default" if old is _MISSING else f"{key} = {old!r}"
                raise UsageError(f"--set {override}: {key} changes what agents do, and the run was recorded with {was} "
                                 f"({done} rounds played); resume goes on as recorded: townsquare branch {run} --at ROUND "
                                 f"--set {key}=... changes it from that round on, in a new run")
        data = changed
