"""Recipes that make a dataset's file from a published input, reproducing a recorded SHA-256.

Some released data is not published as a data file: PersonaGym's environments and benchmark
personas are Python literals in its code, the small HotpotQA knowledge sample is the head
of the dev file, and RecBole's copy of MovieLens 100K sits inside its wheel. A catalogue file entry names its recipe (``derive``), its ``input`` and the
recipe's options; the result must come out with the entry's SHA-256 like any downloaded file.
"""

from __future__ import annotations

import ast
import json
import zipfile
from pathlib import Path
from typing import Any, Callable

from .checksums import DataError


def python_literal(source: Path, options: dict[str, Any]) -> bytes:
    """The value assigned to ``variable`` in the Python file ``source`` (read with
    ``ast.literal_eval``, never run), as JSON with ``indent`` (1 by default)."""
    name = options["variable"]
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), str(source))
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise DataError(f"{source}: not Python source ({exc})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise DataError(f"{source}: {name} is not a plain literal") from None
            return json.dumps(value, indent=options.get("indent", 1), ensure_ascii=False).encode("utf-8")
    raise DataError(f"{source}: no assignment to {name}")


def json_head(source: Path, options: dict[str, Any]) -> bytes:
    """The first ``count`` records of the JSON list in ``source``, written by ``json.dumps``
    (``ensure_ascii=False``, no indent)."""
    try:
        records = json.loads(source.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{source}: not a JSON file ({exc})") from None
    if not isinstance(records, list):
        raise DataError(f"{source}: not a JSON list")
    return json.dumps(records[: int(options["count"])], ensure_ascii=False).encode("utf-8")


def zip_member(source: Path, options: dict[str, Any]) -> bytes:
    """The bytes of the member ``member`` of the zip archive ``source`` (a wheel is one)."""
    member = options["member"]
    try:
        with zipfile.ZipFile(source) as zipped:
            return zipped.read(member)
    except KeyError:
        raise DataError(f"{source}: has no member {member}") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataError(f"{source}: not a readable zip archive ({exc})") from None


RECIPES: dict[str, Callable[[Path, dict[str, Any]], bytes]] = {"python_literal": python_literal, "json_head": json_head,
                                                              "zip_member": zip_member}


def derive(recipe: str, source: Path, options: dict[str, Any]) -> bytes:
    if recipe not in RECIPES:
        raise DataError(f"unknown recipe {recipe!r} (recipes: {', '.join(RECIPES)})")
    return RECIPES[recipe](source, options)
