"""The social agent's prompts, kept as data (STYLE.md, convention 12).

Each file here (``persona.toml``, ``actions.toml``) maps a prompt name to a template with
``{placeholders}``. Prompts are our own words following the structure of Zhou et al.'s
appendix tables 4-13: the same inputs and the same output formats. A study swaps any of them
with a TOML file of its own (``prompts_file`` in a component's config): its keys replace the
built-in ones of the same name.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from townsquare.api import UsageError

HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=None)
def _builtin(group: str) -> dict[str, str]:
    with open(HERE / f"{group}.toml", "rb") as fh:
        return dict(tomllib.load(fh))


def load_prompts(group: str, override_file: str | Path | None = None, base_dir: str = ".") -> dict[str, str]:
    """The ``group`` prompts, with those in ``override_file`` (if given) replacing them."""
    prompts = dict(_builtin(group))
    if override_file:
        path = Path(override_file) if Path(override_file).is_absolute() else Path(base_dir) / override_file
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
    return prompts
