"""The social agent's prompts, kept as data (STYLE.md, convention 12).

Each file here (``persona.toml``, ``actions.toml``) maps a prompt name to a template with
``{placeholders}``. Prompts are our own words following the structure of Zhou et al.'s
appendix tables 4-13: the same inputs and the same output formats. A study swaps any of them
with a TOML file of its own (``prompts_file`` in a component's config): its keys replace the
built-in ones of the same name.
"""

from __future__ import annotations

from pathlib import Path

from townsquare.lib import prompt_files

HERE = Path(__file__).resolve().parent


def load_prompts(group: str, override_file: str | Path | None = None, base_dir: str = ".") -> dict[str, str]:
    """The ``group`` prompts, with those in ``override_file`` (if given) replacing them."""
    return prompt_files.load_prompts(HERE, group, override_file, base_dir)
