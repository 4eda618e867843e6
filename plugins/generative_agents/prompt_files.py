"""The generative agents' prompts, kept as data (STYLE.md, convention 12).

Each ``prompts/<group>.toml`` maps a prompt name to a template with ``{placeholders}``. The words are
ours; the structure (inputs and output format) follows Park et al. and their appendix. A study
swaps any template with a TOML file of its own (``prompts_file`` in a component's settings);
each replacement must keep the placeholders the code fills, or the run stops at build time with
one line naming the file and the prompt.
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


@lru_cache(maxsize=None)
def _builtin(group: str) -> dict[str, str]:
    with open(HERE / f"{group}.toml", "rb") as fh:
        return {key: str(value) for key, value in tomllib.load(fh).items()}


def _read_override(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read prompts file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML ({exc})") from None


def load_prompts(group: str, required: Mapping[str, frozenset[str]], override_file: str | None = None,
                 base_dir: str = ".") -> dict[str, str]:
    """The ``group`` templates (``prompts/<group>.toml``), those in ``override_file`` replacing
    them, each checked for the placeholders ``required`` names."""
    prompts = dict(_builtin(group))
    where = f"prompts/{group}.toml"
    if override_file:
        path = Path(override_file) if Path(override_file).is_absolute() else Path(base_dir) / override_file
        custom = _read_override(path)
        unknown = sorted(set(custom) - set(prompts))
        if unknown:
            raise UsageError(f"{path}: unknown prompt {unknown[0]!r} (known: {', '.join(sorted(prompts))})")
        prompts.update({key: str(value) for key, value in custom.items()})
        where = str(path)
    for name, needed in required.items():
        missing = sorted(needed - set(_FIELD.findall(prompts[name])))
        if missing:
            raise UsageError(f"{where}: prompt {name!r} lacks the placeholder {{{missing[0]}}}")
    return prompts


def prompts_for(group: str, required: Mapping[str, frozenset[str]], config: Any, ctx: Any) -> dict[str, str]:
    """:func:`load_prompts` with a component's ``prompts_file`` setting, relative to the
    scenario's folder (what every factory here does)."""
    return load_prompts(group, required, config.prompts_file, getattr(ctx, "base_dir", ".") or ".")


def fill(template: str, **values: Any) -> str:
    """``template`` with each ``{name}`` in ``values`` replaced, in one pass (a memory that
    contains ``{persona}`` stays as written; other braces are left alone)."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)
