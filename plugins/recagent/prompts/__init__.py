"""RecAgent's prompts, kept as data (STYLE.md, convention 12).

``memory.toml`` (sensory compression and importance, short-term insights, long-term
reflection) and ``policy.toml`` (the action module's four-part prompts). Our own words that
follow the paper's structure: the same inputs and output formats. A study replaces any of
them with a TOML file of its own (``prompts_file`` in a component's config); every
``{placeholder}`` the code fills must stay in the replacement, or the run stops at build time
with a one-line error naming the file and the prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from townsquare import api
from townsquare.lib import prompt_files
from townsquare.lib.prompt_files import fill_prompt as fill

HERE = Path(__file__).resolve().parent


def load_prompts(group: str, required: Mapping[str, frozenset[str]], override_file: str | None = None,
                 base_dir: str = ".") -> dict[str, str]:
    """The ``group`` prompts, ``override_file``'s replacing the built-in ones; each prompt in
    ``required`` must keep the placeholders listed for it."""
    return prompt_files.load_prompts(HERE, group, override_file, base_dir, required=required)


def load_answers(group: str, override_file: str | None = None, base_dir: str = ".") -> dict[str, api.AnswerFormat]:
    """The ``[answers.NAME]`` declarations of the ``group`` prompts (``override_file``'s replacing them)."""
    return prompt_files.load_answers(HERE, group, override_file, base_dir)


__all__ = ["fill", "load_answers", "load_prompts"]
