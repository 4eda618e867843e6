"""JSON schemas as a backend enforces them, and label sets as schemas.

A design declares a schema once, next to its prompt (:class:`townsquare.api.AnswerFormat`);
each backend enforces a dialect of it:

* llama.cpp grammars (the ``local`` provider) take patterns, string lengths and array sizes, but
  ignore ``minimum``/``maximum``;
* OpenAI's strict structured outputs want every property required and no other allowed, and
  servers differ in which constraint keywords they accept (the portable subset: types, enums,
  ``required``, ``additionalProperties``).

:func:`strict_schema` makes those dialects from one declaration; an integer with a small range
becomes the enum of its values, which every dialect enforces. Whatever a dialect drops, the
caller's validator still checks (the answer is repaired, then falls back, as in prompt mode).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Sequence

#: an integer range at most this wide is written out as its values
ENUM_RANGE = 200

#: keywords that not every strict-schema server accepts (left out with ``portable=True``)
CONSTRAINT_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
                       "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems")

#: the property a label answer is wrapped in when a backend constrains only JSON
LABEL_KEY = "answer"


def strict_schema(schema: Any, *, all_required: bool = True, portable: bool = False) -> Any:
    """A copy of ``schema`` in which every object allows no property it does not declare and
    requires all of them (``all_required``; else only where the schema names none), an integer
    with ``minimum`` and ``maximum`` at most :data:`ENUM_RANGE` apart is the enum of its values,
    and (``portable``) the constraint keywords some servers reject are left out."""
    if isinstance(schema, list):
        return [strict_schema(item, all_required=all_required, portable=portable) for item in schema]
    if not isinstance(schema, dict):
        return schema
    node = {key: (value if key == "enum" else strict_schema(value, all_required=all_required, portable=portable))
            for key, value in schema.items()}
    if node.get("type") == "integer" and "enum" not in node:
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int) and isinstance(high, int) and 0 <= high - low <= ENUM_RANGE:
            node = {key: value for key, value in node.items() if key not in ("minimum", "maximum")}
            node["enum"] = list(range(low, high + 1))
    properties = node.get("properties")
    if isinstance(properties, dict) and properties:
        node["properties"] = properties
        if all_required or "required" not in node:
            node["required"] = list(properties)
        node["additionalProperties"] = False
        node.setdefault("type", "object")
    if portable:
        for key in CONSTRAINT_KEYWORDS:
            node.pop(key, None)
    return node


def label_schema(labels: Sequence[str]) -> dict[str, Any]:
    """A label set as a JSON schema: ``{"answer": one of the labels}``."""
    return {"type": "object", "properties": {LABEL_KEY: {"type": "string", "enum": list(labels)}},
            "required": [LABEL_KEY], "additionalProperties": False}


def unwrap_label(text: str, labels: Sequence[str]) -> str | None:
    """The label in a ``{"answer": ...}`` object (None when ``text`` is not one). The object as
    servers write it (:func:`_label_objects`) is looked up; any other text is parsed."""
    label = _label_objects(tuple(labels)).get(text) if isinstance(text, str) else None
    if label is not None:
        return label
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    answer = value.get(LABEL_KEY) if isinstance(value, dict) else None
    return answer if isinstance(answer, str) and answer in labels else None


@functools.lru_cache(maxsize=256)
def _label_objects(labels: tuple[str, ...]) -> dict[str, str]:
    """Each label's ``{"answer": ...}`` object in the spellings JSON encoders write (compact or
    spaced, non-ASCII escaped or not): what :func:`unwrap_label` would parse it to, without parsing."""
    found: dict[str, str] = {}
    for label in labels:
        for ascii_only in (True, False):
            for separators in ((",", ":"), (", ", ": ")):
                found.setdefault(json.dumps({LABEL_KEY: label}, ensure_ascii=ascii_only, separators=separators), label)
    return found


@functools.lru_cache(maxsize=256)
def schema_name(purpose: str) -> str:
    """A schema name servers accept (``[A-Za-z0-9_-]{1,64}``) from a purpose."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", purpose).strip("_")[:64] or "answer"
