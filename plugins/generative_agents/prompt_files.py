"""The generative agents' prompts, kept as data (STYLE.md, convention 12).

Each ``prompts/<group>.toml`` maps a prompt name to a template with ``{placeholders}``; the
prompts are our own words following the structure of Park et al.'s (the same inputs, the same
output format). A study swaps any of them with a TOML file of its own (a component's
``prompts_file``): its keys replace the built-in ones, and each must keep the placeholders the
code fills, or the run stops at build time with a one-line error naming the file and prompt.

:func:`fill` replaces only the ``{name}`` placeholders it is given, in one pass: a memory that
contains ``{summary}`` stays as written and literal braces need no escaping.
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from townsquare.api import UsageError

HERE = Path(__file__).resolve().parent / "prompts"
_FIELD = re.compile(r"\{(\w+)\}")


def fill(template: str, **values: Any) -> str:
    """``template`` with each ``{name}`` in ``values`` replaced; other braces are left alone."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


@lru_cache(maxsize=None)
def _builtin(group: str) -> dict[str, str]:
    with open(HERE / f"{group}.toml", "rb") as fh:
        return {k: str(v) for k, v in tomllib.load(fh).items()}


def load_prompts(group: str, required: Mapping[str, frozenset[str]], override_file: str | None = None,
                 base_dir: str = ".") -> dict[str, str]:
    """The ``group`` prompts with ``override_file``'s replacing them, each checked for the
    placeholders ``required`` lists."""
    prompts = dict(_builtin(group))
    where = f"prompts/{group}.toml"
    if override_file:
        path = Path(override_file) if Path(override_file).is_absolute() else Path(base_dir) / override_file
        where = str(path)
        try:
            with open(path, "rb") as fh:
                custom = tomllib.load(fh)
        except OSError as exc:
            raise UsageError(f"{path}: cannot read prompts file ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{path}: invalid TOML ({exc})") from None
        unknown = sorted(set(custom) - set(prompts))
        if unknown:
            raise UsageError(f"{path}: unknown prompt {unknown[0]!r} (known: {', '.join(sorted(prompts))})")
        prompts.update({k: str(v) for k, v in custom.items()})
    for name, needed in required.items():
        if name not in prompts:  # pragma: no cover - the built-in files have every prompt
            raise UsageError(f"prompts/{group}.toml: missing prompt {name!r}")
        missing = sorted(needed - set(_FIELD.findall(prompts[name])))
        if missing:
            raise UsageError(f"{where}: prompt {name!r} lacks the placeholder {{{missing[0]}}}")
    return prompts
