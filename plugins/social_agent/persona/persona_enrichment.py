"""Enrich a short Personachat persona into the rich persona of Zhou et al. §3.1.1.

Not a plugin: the ``personachat`` persona source uses it. :func:`enrich` asks the LLM with
the ``enrich`` prompt of ``prompts/persona.toml`` (our words; the inputs and the JSON output
of the paper's appendix table 4) through :meth:`LLMClient.json`, which checks the answer
with :func:`persona_schema.validate_rich` (exactly the nine keys, ``age`` an integer, the
other values non-empty strings; an answer that repeats the prompt's example is rejected too)
and sends one repair request when it fails. When the repair
fails too, the client records a ``parse_failure`` and :func:`offline_enrichment` builds the
rich fields from the persona's own sentences, so a run never stops on a malformed answer.
A provider error (endpoint down after the retries) is not a parse failure: it propagates and
stops the run before round 0, rather than silently giving a population made-up personas.

:func:`offline_enrichment` is deterministic (seeded by a digest of the sentences): the basic
information comes from the sentences where they state it ("I am 34 years old", "I am a
mother", "I am from Canada") and otherwise from the word lists of
:mod:`.persona_words`; the advanced attributes restate the sentences in the third
person, one item per sentence, and name each interest they mention.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Callable, Sequence

import numpy as np
import structlog

from . import persona_schema as S
from .persona_words import NATIONALITIES, PEOPLE, PERSONALITIES

log = structlog.get_logger("townsquare.plugins.social_agent.persona.persona_enrichment")

PURPOSE = "persona.enrich"


def enrichment_prompt(prompts: dict[str, str], sentences: Sequence[str]) -> str:
    return prompts["enrich"].replace("{sentences}", "\n".join(sentences))


def prompt_example(prompt: str) -> dict[str, Any] | None:
    """The example answer a prompt shows (its last JSON object starting with "name"), if any."""
    start = prompt.rfind('{"name"')
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(prompt[start:])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def answer_validator(prompt: str) -> Callable[[Any], dict[str, Any]]:
    """:func:`persona_schema.validate_rich`, plus: the answer must not copy the prompt's
    example (a small model does that: Gemma 3 270M answered with the example persona)."""
    example = prompt_example(prompt) or {}

    def validate(value: Any) -> dict[str, Any]:
        fields = S.validate_rich(value)
        copied = [key for key in S.ADVANCED_KEYS if example.get(key) and fields[key] == example[key]]
        if copied:
            raise ValueError(f'"{copied[0]}" copies the example: describe the person in the statements')
        return fields

    return validate


async def enrich(llm: Any, sentences: Sequence[str], prompts: dict[str, str], *, max_tokens: int = 1024,
                 temperature: float = 0.7) -> tuple[dict[str, Any], bool]:
    """The rich fields for ``sentences`` and whether the LLM's answer was used (False: the
    offline fallback after a failed repair)."""
    prompt = enrichment_prompt(prompts, sentences)
    value = await llm.json(
        prompt, S.RICH_JSON_SCHEMA, purpose=PURPOSE, default=None,
        validate=answer_validator(prompt), max_tokens=max_tokens, temperature=temperature,
    )
    if value is None:
        return offline_enrichment(sentences), False
    return value, True


# --------------------------------------------------------------------------- offline fallback

_AGE = re.compile(r"\bI(?: am|'m)\s+(\d{1,3})(?:\s+years?\s+old)?\b", re.I)
_FEMALE = re.compile(r"\bI(?: am|'m)\s+(?:an?\s+)?(?:\w+\s+)?(woman|girl|mother|mom|mum|grandmother|wife|lady|housewife|female)\b", re.I)
_MALE = re.compile(r"\bI(?: am|'m)\s+(?:an?\s+)?(?:\w+\s+)?(man|boy|father|dad|grandfather|husband|guy|male)\b", re.I)
_FROM = re.compile(r"\bI(?: am|'m) from\s+([A-Z][\w ]+?)(?:[.,!]|$)")
_INTEREST = re.compile(r"\b(love|like|enjoy|adore|passion|hobby|favorite|favourite|fan of|play|collect|watch|listen|read|spend|volunteer)\w*", re.I)
_GERUND = {"play": "playing", "collect": "collecting", "watch": "watching", "read": "reading", "listen to": "listening to",
           "grow": "growing", "build": "building", "write": "writing", "paint": "painting", "bake": "baking", "cook": "cooking",
           "ride": "riding", "run": "running", "sing": "singing", "knit": "knitting", "draw": "drawing", "volunteer": "volunteering"}
# What an interest sentence is about, first matching shape wins: "Knitting is my passion." ->
# "knitting"; "I love to bake cookies." -> "bake cookies"; "I play chess." -> "playing chess".
_TOPIC_RULES = (
    re.compile(r"^(?:my )?favou?rite \w+ (?:is|are) (?P<t>.+)$", re.I),
    re.compile(r"^(?P<t>.+?) (?:is|are) (?:my|the) (?:passion|hobby|favou?rite(?: \w+)?|love|life)$", re.I),
    re.compile(r"^i spend (?:all |most )?(?:of )?my (?:free |spare )?time (?P<t>.+)$", re.I),
    re.compile(r"^i (?:really |also |just )?(?:love|like|enjoy|adore) (?:to )?(?P<t>.+)$", re.I),
    re.compile(r"^i(?: am|'m) (?:a |an )?(?:big |huge )?fan of (?P<t>.+)$", re.I),
    re.compile(rf"^i (?:also |often )?(?P<v>{'|'.join(sorted(_GERUND, key=len, reverse=True))})(?: at| in)? (?P<t>.+)$", re.I),
)

COUNTRIES = {
    "the united states": "American", "america": "American", "the usa": "American", "canada": "Canadian",
    "england": "British", "the uk": "British", "britain": "British", "scotland": "British", "ireland": "Irish",
    "australia": "Australian", "germany": "German", "france": "French", "spain": "Spanish", "italy": "Italian",
    "brazil": "Brazilian", "mexico": "Mexican", "india": "Indian", "japan": "Japanese", "korea": "Korean",
    "nigeria": "Nigerian", "sweden": "Swedish",
}
_MODALS = {"can", "could", "will", "would", "should", "must", "might", "may", "did", "had", "was", "used"}
_IRREGULAR = {"am": "is", "'m": "is", "have": "has", "'ve": "has", "do": "does", "go": "goes", "was": "was", "were": "was"}


def _third_person_verb(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _MODALS or not low.isalpha():
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(sentence: str, name: str, possessive: str) -> str:
    """``sentence`` (first person) about ``name``: "I love my dog." -> "Ana loves her dog.".
    Only the common Personachat shapes are handled; the rest is left as written."""
    text = sentence.strip()
    match = re.match(r"^I(?:'m|'ve)?\s+(\w+)?", text)
    if match:
        head = text[:match.end()]
        rest = text[match.end():]
        if text.startswith("I'm"):
            body = f"{name} is {head[3:].strip()}"
        elif text.startswith("I've"):
            body = f"{name} has {head[4:].strip()}"
        else:
            verb = match.group(1) or ""
            body = f"{name} {_third_person_verb(verb)}"
            if verb.lower() in ("do", "did") and rest.lstrip().lower().startswith(("not ", "n't")):
                body = f"{name} {verb.lower()}"
        text = body + rest
    else:
        text = text[0].upper() + text[1:]
    text = re.sub(r"\bmy\b", possessive, text)
    text = re.sub(r"\bMy\b", possessive.capitalize(), text)
    text = re.sub(r"\bmyself\b", "themselves" if possessive == "their" else ("herself" if possessive == "her" else "himself"), text)
    text = re.sub(r"\bi(?:'m| am)\b", f"{name} is", text)
    text = re.sub(r"\bi (\w+)", lambda m: f"{name} {_third_person_verb(m.group(1))}", text)
    text = re.sub(r"\b(?:me|i)\b", name, text)
    return text if text.endswith((".", "!", "?")) else text + "."


def topic_of(sentence: str, possessive: str) -> str | None:
    """What an interest sentence is about (see ``_TOPIC_RULES``), or None."""
    text = sentence.strip().rstrip(".!?").strip()
    for rule in _TOPIC_RULES:
        match = rule.match(text)
        if match:
            topic = match.group("t")
            verb = match.groupdict().get("v")
            if verb:
                topic = f"{_GERUND[verb.lower()]} {text[match.start('v') + len(verb):].strip()}"
            topic = re.sub(r"\bmy\b", possessive, topic, flags=re.I)
            return topic[0].lower() + topic[1:] if topic[:2] != topic[:2].upper() else topic
    return None


def offline_enrichment(sentences: Sequence[str]) -> dict[str, Any]:
    """Table-4 fields from the sentences alone, deterministic. See the module docstring."""
    sentences = [" ".join(s.split()) for s in sentences if s and s.strip()]
    digest = hashlib.blake2b("\n".join(sentences).encode("utf-8"), digest_size=8).digest()
    rng = np.random.default_rng(int.from_bytes(digest, "little"))
    joined = " ".join(sentences)

    found = _AGE.search(joined)
    age = int(found.group(1)) if found and 13 <= int(found.group(1)) <= 110 else int(rng.integers(18, 71))
    if _FEMALE.search(joined):
        gender = "Female"
    elif _MALE.search(joined):
        gender = "Male"
    else:
        gender = "Female" if rng.random() < 0.5 else "Male"
    place = _FROM.search(joined)
    nationality = COUNTRIES.get(place.group(1).strip().lower()) if place else None
    nationality = nationality or NATIONALITIES[int(rng.integers(len(NATIONALITIES)))]
    female, male, surnames, _ = PEOPLE[nationality]
    names = female if gender == "Female" else male
    first = names[int(rng.integers(len(names)))]
    name = f"{first} {surnames[int(rng.integers(len(surnames)))]}"
    possessive = "her" if gender == "Female" else "his"
    traits = rng.choice(len(PERSONALITIES), size=2, replace=False)

    topics = list(dict.fromkeys(t for t in (topic_of(s, possessive) for s in sentences if _INTEREST.search(s)) if t))
    history = [third_person(s, first, possessive) for s in sentences] or [f"{first} has not said much about {possessive} past."]
    liked = ("{n} likes posts about {t}.", "{n} shares updates about {t} with friends online.", "{n} follows accounts that talk about {t}.")
    known = ("{n} knows a good deal about {t} from personal experience.", "{n} has practical knowledge of {t}.")
    preferences = [liked[i % len(liked)].format(n=first, t=t) for i, t in enumerate(topics)]
    knowledge = [known[i % len(known)].format(n=first, t=t) for i, t in enumerate(topics)]
    if not topics:  # nothing the sentences call an interest: say so rather than invent one
        preferences = [f"{first} likes posts about everyday life and personal stories."]
        knowledge = [f"{first} knows {possessive} own daily life and surroundings well."]
    hobbies = ", ".join(t[0].upper() + t[1:] for t in topics) or "Not stated"
    return S.validate_rich({
        S.NAME: name,
        S.AGE: age,
        S.GENDER: gender,
        S.NATIONALITY: nationality,
        S.PERSONALITY: ", ".join(PERSONALITIES[i] for i in traits),
        S.HOBBIES: hobbies,
        S.HISTORY: " ".join(history),
        S.PREFERENCES: " ".join(preferences),
        S.KNOWLEDGE: " ".join(knowledge),
    })
