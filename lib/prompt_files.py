"""Prompts kept as data (STYLE.md, convention 12): the loader every design's prompts use.

A design keeps its templates in TOML files, ``<folder>/<group>.toml``, each mapping a prompt
name to a template with ``{placeholders}``. A study swaps any of them with a TOML file of its
own (a component's ``prompts_file`` setting): its keys replace the built-in ones of the same
name; an unknown key, an unreadable file, invalid TOML, or a replacement that drops a
placeholder the code fills is a one-line error naming the file and the prompt.

The same file declares the answer of each prompt whose answer has structure, in
``[answers.NAME]`` tables after the prompts (:class:`townsquare.llm_answers.AnswerFormat`: a
label set, a JSON schema or answer openings); :func:`load_answers` reads them, and a study's
file may replace them along with the prompt.
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from townsquare.errors import UsageError
from townsquare.llm_answers import AnswerFormat

_FIELD = re.compile(r"\{(\w+)\}")

#: the table of a prompts file that declares answers, not a prompt
ANSWERS = "answers"


@lru_cache(maxsize=None)
def _file(folder: str, group: str) -> dict[str, Any]:
    with open(Path(folder) / f"{group}.toml", "rb") as fh:
        return tomllib.load(fh)


def _builtin(folder: str, group: str) -> dict[str, str]:
    return {key: str(value) for key, value in _file(folder, group).items() if key != ANSWERS}


def _read_override(override_file: str | Path, base_dir: str) -> tuple[Path, dict[str, Any]]:
    path = Path(override_file) if Path(override_file).is_absolute() else Path(base_dir) / override_file
    try:
        with open(path, "rb") as fh:
            return path, tomllib.load(fh)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read prompts file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML ({exc})") from None


def load_answers(folder: str | Path, group: str, override_file: str | Path | None = None,
                 base_dir: str = ".") -> dict[str, AnswerFormat]:
    """The answers declared in ``<folder>/<group>.toml`` (``[answers.NAME]``), those of
    ``override_file`` replacing them; the name is the purpose. A declaration that is not one
    of a label set, a schema or openings is a one-line error naming the file."""
    tables = [(f"prompts/{group}.toml", _file(str(Path(folder).resolve()), group).get(ANSWERS, {}))]
    if override_file:
        path, custom = _read_override(override_file, base_dir)
        tables.append((str(path), custom.get(ANSWERS, {})))
    answers: dict[str, AnswerFormat] = {}
    for position, (where, table) in enumerate(tables):
        if not isinstance(table, dict):
            raise UsageError(f"{where}: [{ANSWERS}] must be a table of [{ANSWERS}.NAME] tables")
        for name, entry in table.items():
            if position > 0 and name not in answers:
                raise UsageError(f"{where}: unknown answer {name!r} (known: {', '.join(sorted(answers))})")
            try:
                answers[name] = AnswerFormat.from_table(name, entry if isinstance(entry, dict) else {"labels": entry})
            except ValueError as exc:
                raise UsageError(f"{where}: {exc}") from None
    return answers


def load_prompts(folder: str | Path, group: str, override_file: str | Path | None = None, base_dir: str = ".",
                 required: Mapping[str, frozenset[str]] | None = None) -> dict[str, str]:
    """The templates of ``<folder>/<group>.toml``, those in ``override_file`` (relative to
    ``base_dir``, the scenario's folder) replacing them; each prompt in ``required`` must keep
    the placeholders listed for it."""
    prompts = dict(_builtin(str(Path(folder).resolve()), group))
    where = f"prompts/{group}.toml"
    if override_file:
        path, custom = _read_override(override_file, base_dir)
        where = str(path)
        custom.pop(ANSWERS, None)
        unknown = sorted(set(custom) - set(prompts))
        if unknown:
            raise UsageError(f"{path}: unknown prompt {unknown[0]!r} (known: {', '.join(sorted(prompts))})")
        prompts.update({key: str(value) for key, value in custom.items()})
    for name, needed in (required or {}).items():
        missing = sorted(needed - set(_FIELD.findall(prompts.get(name, ""))))
        if missing:
            raise UsageError(f"{where}: prompt {name!r} lacks the placeholder {{{missing[0]}}}")
    return prompts


def fill_prompt(template: str, **values: Any) -> str:
    """``template`` with each ``{name}`` in ``values`` replaced, in one pass (a memory that
    contains ``{persona}`` stays as written; other braces are left alone)."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)
