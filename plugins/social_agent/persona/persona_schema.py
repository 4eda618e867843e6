"""The rich persona of Zhou et al. §3.1.1 (appendix table 4): keys, validation, rendering.

Not a plugin: the persona sources, the persona components and the social agent's prompts
import it. A rich persona keeps the table-4 keys in :attr:`Persona.fields`:

* basic information: ``name``, ``age``, ``gender``, ``nationality``, ``personality``,
  ``hobbies``;
* advanced attributes: ``detailed historical behaviour information``, ``preferences for
  social media content``, ``knowledge`` (several sentences each).

``Persona.sentences`` keeps the short Personachat statements the persona was enriched from.

The paper retrieves "a single historical behavior, content preference, or knowledge" per
advanced attribute (§1, §3.1.1) but does not say how an attribute is cut into items. Its case
study (appendix H, table 17) retrieves whole sentences of the attribute text, so an item is
one sentence (:func:`advanced_items`); a list value gives one item per element.

Rendering follows the "Retrieved persona information" of table 17 (the basic information,
then one entry per advanced attribute), one ``Label: value`` per line rather than the
paper's comma-separated run: personality and hobbies hold commas themselves.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from townsquare.api import Persona

NAME = "name"
AGE = "age"
GENDER = "gender"
NATIONALITY = "nationality"
PERSONALITY = "personality"
HOBBIES = "hobbies"
HISTORY = "detailed historical behaviour information"
PREFERENCES = "preferences for social media content"
KNOWLEDGE = "knowledge"

BASIC_KEYS: tuple[str, ...] = (NAME, AGE, GENDER, NATIONALITY, PERSONALITY, HOBBIES)
#: the three attributes split into retrievable items (Zhou §3.1.1 "Dynamic Persona Information")
ADVANCED_KEYS: tuple[str, ...] = (HISTORY, PREFERENCES, KNOWLEDGE)
#: every key of appendix table 4, in its order
RICH_KEYS: tuple[str, ...] = BASIC_KEYS + ADVANCED_KEYS

LABELS: dict[str, str] = {
    NAME: "Name",
    AGE: "Age",
    GENDER: "Gender",
    NATIONALITY: "Nationality",
    PERSONALITY: "Personality",
    HOBBIES: "Hobbies",
    HISTORY: "Detailed historical behaviour information",
    PREFERENCES: "Preferences for social media content",
    KNOWLEDGE: "Knowledge",
}

#: JSON schema sent with the enrichment request (LLMRequest.json_schema)
RICH_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **{key: {"type": "string"} for key in RICH_KEYS},
        AGE: {"type": "integer", "minimum": 1, "maximum": 120},
    },
    "required": list(RICH_KEYS),
    "additionalProperties": False,
}

# Sentence ends: ., ! or ? then space and a capital, digit or quote; common abbreviations kept.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|vs)|\be\.g|\bi\.e)\.$")


def split_sentences(text: str) -> list[str]:
    """Cut ``text`` into sentences (one retrievable item each)."""
    text = " ".join(str(text).split())
    if not text:
        return []
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if _ABBREVIATION.search(text[start:match.start()].rstrip()):
            continue
        pieces.append(text[start:match.start()].strip())
        start = match.end()
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def _text(value: Any, key: str, joiner: str) -> str:
    if isinstance(value, str):
        text = " ".join(value.split())
    elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        text = joiner.join(" ".join(v.split()) for v in value if v.strip())
    else:
        raise ValueError(f'"{key}" must be a non-empty string, got {type(value).__name__}')
    if not text:
        raise ValueError(f'"{key}" is empty')
    return text


def validate_rich(value: Any) -> dict[str, Any]:
    """A table-4 persona, checked and normalised; :class:`ValueError` names the first
    problem. Exactly the nine keys; ``age`` an integer (a numeric string is accepted);
    text fields non-empty strings (a list of strings is joined: ", " for personality and
    hobbies, " " for the advanced attributes)."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    missing = [key for key in RICH_KEYS if key not in value]
    if missing:
        raise ValueError(f'missing key "{missing[0]}"')
    extra = sorted(set(value) - set(RICH_KEYS))
    if extra:
        raise ValueError(f'unknown key "{extra[0]}" (expected exactly: {", ".join(RICH_KEYS)})')
    out: dict[str, Any] = {}
    for key in RICH_KEYS:
        raw = value[key]
        if key == AGE:
            if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
                raise ValueError(f'"age" must be an integer, got {type(raw).__name__}')
            try:
                age = int(str(raw).strip()) if not isinstance(raw, float) else int(raw)
            except ValueError:
                raise ValueError(f'"age" must be an integer, got {raw!r}') from None
            if isinstance(raw, float) and raw != age:
                raise ValueError(f'"age" must be an integer, got {raw!r}')
            if not 1 <= age <= 120:
                raise ValueError(f'"age" out of range: {age}')
            out[key] = age
        else:
            out[key] = _text(raw, key, " " if key in ADVANCED_KEYS else ", ")
    return out


def is_rich(persona: Persona) -> bool:
    """True when the persona has every table-4 key."""
    return all(persona.fields.get(key) not in (None, "", []) for key in RICH_KEYS)


def display_name(persona: Persona) -> str:
    return str(persona.fields.get(NAME) or persona.name)


def advanced_items(persona: Persona, key: str) -> list[str]:
    """The retrievable items of one advanced attribute: one per sentence (a list value: one
    per element). A persona without the attribute has none."""
    if key not in ADVANCED_KEYS:
        raise ValueError(f"{key!r} is not an advanced attribute (one of: {', '.join(ADVANCED_KEYS)})")
    value = persona.fields.get(key)
    if value is None:
        return []
    if isinstance(value, list):
        return [" ".join(str(v).split()) for v in value if str(v).strip()]
    return split_sentences(str(value))


def basic_info(persona: Persona) -> str:
    """The basic information, one ``Label: value`` per line (the name always; the other
    basic keys when the persona has them)."""
    lines = [f"{LABELS[NAME]}: {display_name(persona)}"]
    for key in BASIC_KEYS[1:]:
        value = persona.fields.get(key)
        if value not in (None, "", []):
            lines.append(f"{LABELS[key]}: {_flat(value)}")
    return "\n".join(lines)


def render(persona: Persona, advanced: Mapping[str, list[str]]) -> str:
    """Basic information plus the given items of each advanced attribute. A persona with no
    advanced attribute at all (a plain Personachat persona) shows its sentences instead, so
    a prompt never gets a bare name."""
    lines = [basic_info(persona)]
    for key in ADVANCED_KEYS:
        items = advanced.get(key) or []
        if items:
            lines.append(f"{LABELS[key]}: {' '.join(items)}")
    if not any(advanced.get(key) for key in ADVANCED_KEYS) and persona.sentences:
        lines.append(f"About: {' '.join(persona.sentences)}")
    return "\n".join(lines)


def full_info(persona: Persona) -> str:
    """All the persona information (Zhou appendix G, "w/o PD"): basic information and each
    advanced attribute in full."""
    return render(persona, {key: advanced_items(persona, key) for key in ADVANCED_KEYS})


def knowledge_text(persona: Persona) -> str:
    """The persona's "knowledge" attribute, the text the knowledge boundary compares with
    (Zhou §3.1.1). A persona without one is compared with its sentences (our choice: the
    paper's personas are always enriched)."""
    value = persona.fields.get(KNOWLEDGE)
    if value not in (None, "", []):
        return _flat(value, " ")
    return " ".join(persona.sentences)


def _flat(value: Any, joiner: str = ", ") -> str:
    if isinstance(value, list):
        return joiner.join(str(v) for v in value)
    return str(value)
