"""The action prompts (``prompts/actions.toml``) and their declared answers, checked and filled.

Not a plugin: the policies, the planner and the reflector load their prompts through
:func:`action_prompts` and the answers those prompts ask for through :func:`action_answers`
(``[answers.NAME]`` tables of the same file: a label set, answer openings or a JSON schema per
purpose). A study's ``prompts_file`` may replace any template or answer, but each template
must keep the placeholders the code fills and each answer its kind, or the run stops at build
time with a one-line error naming the file and the prompt.

Templates are filled with :func:`fill`, which replaces only ``{name}`` placeholders it is given
(one pass: a post that contains ``{persona}`` stays as written, and literal braces such as a
JSON example need no escaping).
"""

from __future__ import annotations

from townsquare.lib import prompt_files
from townsquare.api import AnswerFormat, UsageError
from townsquare.lib.prompt_files import fill_prompt as fill

from ..prompts import HERE

#: prompt name -> placeholders the code fills in it (each must appear in the template)
REQUIRED: dict[str, frozenset[str]] = {
    "like": frozenset({"post", "persona"}),
    "forward": frozenset({"post", "persona"}),
    "comment_persona": frozenset({"name", "persona"}),
    "comment": frozenset({"post"}),
    "topics": frozenset({"topic_count", "persona"}),
    "post_persona": frozenset({"name", "persona"}),
    "post_with_knowledge": frozenset({"topic", "knowledge"}),
    "post_without_knowledge": frozenset({"topic"}),
    "post_shorten": frozenset(),
    "post_regenerate": frozenset(),
    "plan": frozenset({"activity", "persona"}),
    "follow": frozenset({"persona", "history", "candidates"}),
    "history_item": frozenset({"k", "uid", "summary", "action"}),
    "summary": frozenset({"post"}),
    "combined": frozenset({"post", "persona", "fields"}),
}


#: purpose -> the kind of answer the code reads (``labels``: the first label acts, the default passes)
ANSWER_KINDS: dict[str, str] = {
    "like": "labels", "reblog": "labels", "comment": "prefixes", "follow": "labels",
    "topics": "json", "plan": "json", "decide": "json",
}


def action_prompts(prompts_file: str | None, base_dir: str = ".") -> dict[str, str]:
    """The action prompts with ``prompts_file``'s replacing the built-in ones, each checked
    for the placeholders :data:`REQUIRED` lists."""
    return prompt_files.load_prompts(HERE, "actions", prompts_file, base_dir, required=REQUIRED)


def action_answers(prompts_file: str | None, base_dir: str = ".") -> dict[str, AnswerFormat]:
    """The answers the action prompts ask for, by purpose, with ``prompts_file``'s replacing
    the built-in ones; each of the kind :data:`ANSWER_KINDS` says, with a default."""
    answers = prompt_files.load_answers(HERE, "actions", prompts_file, base_dir)
    where = prompts_file or "prompts/actions.toml"
    for purpose, kind in ANSWER_KINDS.items():
        answer = answers.get(purpose)
        if answer is None or answer.kind != kind:
            raise UsageError(f"{where}: [answers.{purpose}] must declare {kind}")
        if kind != "json" and answer.default is None:
            raise UsageError(f"{where}: [answers.{purpose}] needs a default")
    return answers


__all__ = ["ANSWER_KINDS", "REQUIRED", "action_answers", "action_prompts", "fill"]
