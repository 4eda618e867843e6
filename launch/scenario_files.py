"""Scenario files and ``--set`` overrides: from a TOML file (or its content as a dict) and the
command line's overrides to the data the kernel resolves (:func:`townsquare.scenario.resolve`).

The command line, the notebook and the commands that reopen a run read scenarios here; the
kernel validates and resolves what they read.
"""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any, Mapping

from townsquare.errors import ScenarioError
from townsquare.scenario import ResolvedScenario, resolve


def read_scenario(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(str(path), "", "no such file") from None
    except OSError as exc:
        raise ScenarioError(str(path), "", f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(str(path), "", f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(str(path), "", f"invalid TOML: {exc}") from None


#: tables whose ``name`` picks a component and whose other keys are that component's settings:
#: ``--set TABLE.name=OTHER`` drops the settings the file gave the old component
NAMED_TABLES = ("recommender",)


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str) -> dict[str, Any]:
    """Apply ``dotted.key=value`` overrides. Values are read as TOML (``5``, ``true``,
    ``"x"``, ``[1, 2]``); anything that is not valid TOML is taken as a string. A number in
    the path indexes a list (``populations.0.count=5``).

    Setting the ``name`` of a table whose other keys are its component's settings
    (:data:`NAMED_TABLES`: ``--set recommender.name=random``) to another component drops the
    keys the file gave the old one; keys set by earlier overrides stay."""
    data = copy.deepcopy(data)
    overridden: set[str] = set()
    for override in overrides:
        key, sep, raw = override.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ScenarioError("--set", override, "expected dotted.key=value")
        value = override_value(raw)
        node: Any = data
        parts = key.split(".")
        if len(parts) == 2 and parts[0] in NAMED_TABLES and parts[1] == "name":
            table = data.get(parts[0])
            if isinstance(table, dict) and table.get("name") != value:
                data[parts[0]] = {k: v for k, v in table.items() if f"{parts[0]}.{k}" in overridden}
        overridden.add(key)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ScenarioError(source, key, f"--set: {'.'.join(parts[:i]) or key} has no item {part}")
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    node = node.setdefault(part, {})
            else:
                raise ScenarioError(source, key, f"--set: {'.'.join(parts[:i])} is not a table")
    return data


def override_value(raw: str) -> Any:
    """An override's value as ``--set`` reads it: TOML (``5``, ``true``, ``"x"``, ``[1, 2]``), or
    the text itself when it is not valid TOML."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def override_lines(values: Mapping[str, Any]) -> list[str]:
    """``{"rounds": 2, "recommender": {"name": "random"}}`` as the ``--set`` overrides that set
    them: ``["rounds=2", 'recommender={ "name" = "random" }']``."""
    return [f"{key}={_toml(value)}" for key, value in values.items()]


def _toml(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return value.isoformat() if hasattr(value, "isoformat") else json.dumps(str(value))


#: the source a scenario given as a dict is named by in errors
DICT_SOURCE = "<scenario dict>"


def load_scenario(path: str | Path | Mapping[str, Any], overrides: list[str], plugins: Any, seed: int | None = None) -> ResolvedScenario:
    """Read, override, validate and resolve a scenario against the loaded plugins. ``path`` may
    be the file's content as a dict (what ``tomllib`` reads), whose relative paths name files
    from the current directory."""
    if isinstance(path, Mapping):
        source, data, base_dir = DICT_SOURCE, dict(path), str(Path.cwd())
    else:
        source, data, base_dir = str(path), read_scenario(path), str(Path(path).resolve().parent)
    data = apply_overrides(data, overrides, source)
    if seed is not None:
        data["seed"] = seed
    return resolve(data, source, base_dir, plugins)
