"""Datasets by name: the one rule that turns ``data:NAME/sub/path`` into a file.

A scenario value or a command option written ``data:NAME`` or ``data:NAME/sub/path`` means
that path inside the installed dataset NAME. Datasets live in the data home: the folder
``$TOWNSQUARE_DATA`` names, else ``datasets/`` in platformdirs' user data directory for
townsquare (``~/.local/share/townsquare/datasets`` on Linux). ``townsquare data fetch NAME``
(the ``data`` plugin) downloads or imports one, verifies it and moves it into place in one
rename, with :data:`MARKER` inside: a dataset counts as installed when its folder holds the
marker, so a half-copied folder never does.

Where the rule applies:

* scenarios: every string value that starts with ``data:`` is resolved when the scenario is
  resolved (:func:`resolve_data_references`, called by the ``data`` plugin's
  ``townsquare_resolve_data_references``, which ``townsquare.scenario.resolve`` asks), so
  every component receives a plain absolute path and needs no code of its own; the manifest
  keeps the ``data:`` form (a run resumes on another machine with the data installed there)
  and records which dataset versions were used (:func:`datasets_in`);
* command options and any other path a plugin reads: :func:`data_path` (``townsquare.api``).

A missing dataset is one line naming the command that gets it (:class:`DatasetMissing`, exit 2).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from townsquare.errors import ScenarioError, UsageError
from townsquare.scenario import DATA_PREFIX as PREFIX

ENV_DATA = "TOWNSQUARE_DATA"
#: written last into a dataset's folder by ``townsquare data fetch``: what was installed, from where
MARKER = ".townsquare-dataset.json"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class DatasetMissing(UsageError):
    """``data:NAME`` references to datasets that are not installed (exit 2): one line naming
    the command that gets them."""

    def __init__(self, names: list[str], reference: str = ""):
        self.names = names
        shown = f"{reference}: " if reference and reference != f"{PREFIX}{names[0]}" else ""
        listed = ", ".join(repr(n) for n in names)
        words = " ".join(names)
        what = f"dataset {listed} is" if len(names) == 1 else f"datasets {listed} are"
        super().__init__(f"{shown}{what} not installed: get {'it' if len(names) == 1 else 'them'} with "
                         f"`townsquare data fetch {words}` (add --from PATH to import a local copy)")


def data_home() -> Path:
    """The folder that holds the installed datasets (``$TOWNSQUARE_DATA``, else the user data dir)."""
    chosen = os.environ.get(ENV_DATA, "").strip()
    if chosen:
        return Path(chosen).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("townsquare", appauthor=False)) / "datasets"


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise UsageError(f"{name!r} is not a dataset name (lower-case letters, digits, '.', '_' and '-')")
    return name


def dataset_folder(name: str) -> Path:
    """Where dataset ``name`` is (or would be) installed."""
    return data_home() / check_name(name)


def installed_dataset(name: str) -> dict[str, Any] | None:
    """The marker of installed dataset ``name`` (what, which version, from where), or None."""
    marker = dataset_folder(name) / MARKER
    try:
        return json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_data_reference(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def split_reference(value: str) -> tuple[str, str]:
    """``"data:NAME/sub/path"`` -> ``("NAME", "sub/path")`` (a sub path never leaves the dataset)."""
    rest = value[len(PREFIX):].strip().strip("/")
    name, _, sub = rest.partition("/")
    if not name:
        raise UsageError(f"{value!r}: name a dataset after {PREFIX!r} (data:NAME or data:NAME/sub/path)")
    check_name(name)
    if any(part == ".." for part in PurePosixPath(sub).parts):
        raise UsageError(f"{value!r}: a path inside a dataset cannot go up with '..'")
    return name, sub


def data_path(value: str | Path, base_dir: str | Path = ".") -> Path:
    """The file or folder a path from a scenario or a command option means.

    ``data:NAME`` is the installed dataset NAME's folder and ``data:NAME/sub/path`` a path in it
    (:class:`DatasetMissing` when NAME is not installed; a one-line error when the sub path is
    not in it); an absolute path is itself; any other path is relative to ``base_dir`` (a
    scenario's folder, or the working directory for a command option)."""
    text = str(value)
    if not is_data_reference(text):
        path = Path(text).expanduser()
        return path if path.is_absolute() else Path(base_dir) / path
    name, sub = split_reference(text)
    if installed_dataset(name) is None:
        raise DatasetMissing([name], text)
    path = dataset_folder(name) / sub if sub else dataset_folder(name)
    if not path.exists():
        raise UsageError(f"{text}: no {sub!r} in dataset {name!r} ({dataset_folder(name)})")
    return path


def _walk(value: Any, key: str, visit) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v, f"{key}.{k}" if key else str(k), visit) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, f"{key}[{i}]", visit) for i, v in enumerate(value)]
    return visit(value, key) if is_data_reference(value) else value


def resolve_data_references(data: dict[str, Any], source: str) -> dict[str, Any]:
    """A copy of scenario ``data`` with every ``data:`` string replaced by its absolute path.
    Datasets that are not installed are one :class:`~townsquare.errors.ScenarioError` naming
    the keys and the one command that gets them all."""
    missing: dict[str, list[str]] = {}

    def visit(value: str, key: str) -> str:
        try:
            return str(data_path(value))
        except DatasetMissing as exc:
            missing.setdefault(exc.names[0], []).append(key)
            return value
        except UsageError as exc:
            raise ScenarioError(source, key, str(exc)) from None

    resolved = _walk(data, "", visit)
    if missing:
        keys = [key for keys in missing.values() for key in keys]
        raise ScenarioError(source, ", ".join(keys), str(DatasetMissing(list(missing))))
    return resolved


def datasets_in(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The installed datasets scenario ``data`` refers to, with what their markers say
    (version, source, how they were verified): for a run's manifest."""
    found: dict[str, dict[str, Any]] = {}

    def visit(value: str, key: str) -> str:
        name, _ = split_reference(value)
        marker = installed_dataset(name) or {}
        found[name] = {k: marker.get(k) for k in ("version", "source", "verified", "fingerprint") if k in marker}
        return value

    _walk(data, "", visit)
    return found
