"""The action prompts (``prompts/actions.toml``), checked and filled.

Not a plugin: the policies, the planner and the reflector load their prompts through
:func:`action_prompts`. A study's ``prompts_file`` may replace any template, but each template
must keep the placeholders the code fills, or the run stops at build time with a one-line
error naming the file and the prompt.

Templates are filled with :func:`fill`, which replaces only ``{name}`` placeholders it is given
(one pass: a post that contains ``{persona}`` stays as written, and literal braces such as a
JSON example need no escaping).
"""

from __future__ import annotations

from townsquare import api
from townsquare.api import fill_prompt as fill

from ..prompts import HERE

#: prompt name -> placeholders the code fills in it (each must appear in the template)
REQUIRED: dict[str, frozenset[str]] = {
    "like": frozenset({"post", "persona"}),
    "forward": frozenset({"post", "persona"}),
    "comment": frozenset({"post", "persona"}),
    "topics": frozenset({"topic_count", "persona"}),
    "topics_repair": frozenset(),
    "post_with_knowledge": frozenset({"topic", "persona", "knowledge"}),
    "post_without_knowledge": frozenset({"topic", "persona"}),
    "post_shorten": frozenset(),
    "post_regenerate": frozenset(),
    "plan": frozenset({"activity", "persona"}),
    "plan_repair": frozenset(),
    "follow": frozenset({"persona", "history", "candidates"}),
    "history_item": frozenset({"k", "uid", "summary", "action"}),
    "summary": frozenset({"post"}),
    "combined": frozenset({"post", "persona", "fields"}),
}


def action_prompts(prompts_file: str | None, base_dir: str = ".") -> dict[str, str]:
    """The action prompts with ``prompts_file``'s replacing the built-in ones, each checked
    for the placeholders :data:`REQUIRED` lists."""
    return api.load_prompts(HERE, "actions", prompts_file, base_dir, required=REQUIRED)


__all__ = ["REQUIRED", "action_prompts", "fill"]
