"""The oracle's rules for any purpose no design-specific module answers.

A careful reader with nothing to go on does the least: among labels it picks a "do nothing"
label when there is one (skip, no, ignore, wait...), else the first; for JSON it gives the
smallest value of the schema's shape; for text it restates the question's first content line.
Design modules (:mod:`.park`, :mod:`.recagent`...) replace these for the purposes their
pathways depend on.
"""

from __future__ import annotations

from typing import Any

from .prompt_view import PromptView

#: labels that mean "take no action", in the order preferred
NO_ACTION = ("skip", "no", "no operation", "do not follow", "do nothing", "ignore", "none", "no comment", "wait", "nothing",
             "false", "leave")


def pick_label(view: PromptView) -> str | None:
    if not view.labels:
        return None
    lowered = {label.lower(): label for label in view.labels}
    for word in NO_ACTION:
        if word in lowered:
            return lowered[word]
    return view.labels[0]


def empty_of(schema: dict[str, Any]) -> Any:
    """The smallest value of ``schema``'s shape (required properties filled, arrays at minItems)."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = schema.get("required", list(props))
        return {key: empty_of(props.get(key, {})) for key in required}
    if kind == "array":
        return [empty_of(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    return ""


def restate(view: PromptView) -> str:
    lines = [line.strip() for line in view.last.splitlines() if line.strip()]
    return lines[0] if lines else "Nothing to say."


def any_purpose(view: PromptView) -> Any:
    if view.labels:
        return pick_label(view)
    if view.answer_prefixes:
        # the shortest opening is the "nothing" answer (``no comment`` beside ``Comment content:``)
        return min(view.answer_prefixes, key=len)
    if view.json_schema is not None:
        return empty_of(view.json_schema)
    return restate(view)


RULES = {"*": any_purpose}
