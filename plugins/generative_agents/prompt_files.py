"""The generative agents' prompts, kept as data (STYLE.md, convention 12).

Each ``prompts/<group>.toml`` maps a prompt name to a template with ``{placeholders}``. The words are
ours; the structure (inputs and output format) follows Park et al. and their appendix. A study
swaps any template with a TOML file of its own (``prompts_file`` in a component's settings);
each replacement must keep the placeholders the code fills, or the run stops at build time with
one line naming the file and the prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from townsquare.lib import prompt_files
from townsquare.lib.prompt_files import fill_prompt as fill

HERE = Path(__file__).resolve().parent / "prompts"


def load_prompts(group: str, required: Mapping[str, frozenset[str]], override_file: str | None = None,
                 base_dir: str = ".") -> dict[str, str]:
    """The ``group`` templates (``prompts/<group>.toml``), those in ``override_file`` replacing
    them, each checked for the placeholders ``required`` names."""
    return prompt_files.load_prompts(HERE, group, override_file, base_dir, required=required)


def prompts_for(group: str, required: Mapping[str, frozenset[str]], config: Any, ctx: Any) -> dict[str, str]:
    """:func:`load_prompts` with a component's ``prompts_file`` setting, relative to the
    scenario's folder (what every factory here does)."""
    return load_prompts(group, required, config.prompts_file, getattr(ctx, "base_dir", ".") or ".")


__all__ = ["fill", "load_prompts", "prompts_for"]
