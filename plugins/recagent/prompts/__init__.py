"""RecAgent's prompts, kept as data (STYLE.md, convention 12).

``memory.toml`` (sensory compression and importance, short-term insights, long-term
reflection) and ``policy.toml`` (the action module's four-part prompts). Our own words that
follow the paper's structure: the same inputs and output formats. A study replaces any of
them with a TOML file of its own (``prompts_file`` in a component's config); every
``{placeholder}`` the code fills must stay in the replacement, or the run stops at build time
with a one-line error naming the file and the prompt.
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from townsquare.api import UsageError

HERE = Path(__file__).resolve().parent
_FIELD = re.compile(r"\{(\w+)\}")


@lru_cache(maxsize=None)
def _builtin(group: str) -> dict[str, str]:
    with open(HERE / f"{group}.toml", "rb") as fh:
        return {k: str(v) for k, v in tomllib.load(fh).items()}


def load_prompts(group: str, required: Mapping[str, frozenset[str]], override_file: str | None = None,
                 base_dir: str = ".") -> dict[str, str]:
    """The ``group`` prompts, ``override_file``'s replacing the built-in ones; each prompt in
    ``required`` must keep the placeholders listed for it."""
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
        missing = sorted(needed - set(_FIELD.findall(prompts.get(name, ""))))
        if missing:
            raise UsageError(f"{where}: prompt {name!r} lacks the placeholder {{{missing[0]}}}")
    return prompts


def fill(template: str, **values: Any) -> str:
    """``template`` with each ``{name}`` in ``values`` replaced in one pass; other braces stay."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)
