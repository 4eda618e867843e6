"""Reading the original Smallville seed files (Park et al.'s ``base_*`` folders).

A base folder has ``personas/<Name>/bootstrap_memory/scratch.json`` (the persona seed: name,
age, ``innate``, ``learned``, ``currently``, ``lifestyle``, ``daily_plan_req``,
``living_area``...) and ``spatial_memory.json`` (the world -> sector -> arena -> objects tree
that agent knows) for each agent, and ``reverie/meta.json`` whose ``persona_names`` gives their
order. :func:`read_base` reads it; :func:`persona_from_scratch` makes a
:class:`townsquare.api.Persona`; the town is the union of the agents' trees (the seed files hold
no separate map in text form).

A persona's ``sentences`` are its seed in the order the planner's summary reads them: traits,
background, current situation, lifestyle, daily plan requirement. The memory stream (or the town
policy, for a memory that does not seed itself) writes them into the agent's memory on its first
step (the paper seeds each memory with the persona's description). The same texts are kept as
named ``fields`` (``innate``, ``learned``, ``currently``, ``lifestyle``, ``daily_plan_req``), which
Park's summary description shows under their own headings as the reference code's "identity
stable set" does; numeric parameters (``age``, ``recency_decay``) are fields too, never memories.

:func:`housemates_sentence` is the one seed sentence this project adds (a choice, the
``housemates`` setting of the ``smallville`` persona source): the agents whose ``living_area``
lies in the same sector live together, and the paper's seed descriptions name the people an
agent lives with ("John Lin is living with his wife, Mei Lin, ... and son, Eddy Lin"), which the
scratch files only sometimes do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from townsquare.api import Persona, UsageError

from . import world as w

#: scratch.json fields a persona needs
REQUIRED_FIELDS = ("name", "innate", "learned", "currently", "lifestyle")
#: the seed's text fields, in the order they become persona sentences
SEED_TEXT = ("learned", "currently", "lifestyle", "daily_plan_req")


@dataclass
class Base:
    folder: Path
    scratches: list[dict[str, Any]] = field(default_factory=list)
    spatial: dict[str, w.Tree] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [s["name"] for s in self.scratches]

    def town(self) -> w.Tree:
        tree: w.Tree = {}
        for known in self.spatial.values():
            w.merge(tree, known)
        return tree

    def homes(self) -> dict[str, str]:
        return {s["name"]: str(s["living_area"]) for s in self.scratches if s.get("living_area")}


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not valid JSON: {exc}") from None


def read_base(folder: str | Path) -> Base:
    """Read a base folder; a missing or malformed file is a :class:`UsageError` naming it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder (a Smallville base: `townsquare data fetch smallville-3` installs one, data:smallville-3)")
    people = folder / "personas"
    if not people.is_dir():
        raise UsageError(f"{folder}: no personas/ folder (expected a Smallville base such as base_the_ville_n25)")
    meta_path = folder / "reverie" / "meta.json"
    names = sorted(p.name for p in people.iterdir() if p.is_dir())
    if meta_path.is_file():
        listed = _json(meta_path).get("persona_names") if isinstance(_json(meta_path), dict) else None
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            raise UsageError(f"{meta_path}: persona_names must be a list of names")
        names = [n.strip() for n in listed]
    base = Base(folder)
    for name in names:
        seed = people / name / "bootstrap_memory"
        scratch = _json(seed / "scratch.json")
        if not isinstance(scratch, dict):
            raise UsageError(f"{seed / 'scratch.json'}: expected an object")
        missing = [f for f in REQUIRED_FIELDS if not isinstance(scratch.get(f), str) or not scratch[f].strip()]
        if missing:
            raise UsageError(f"{seed / 'scratch.json'}: field {missing[0]!r} is missing or empty")
        try:
            base.spatial[scratch["name"]] = w.read_tree(_json(seed / "spatial_memory.json"), str(seed / "spatial_memory.json"))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        base.scratches.append(scratch)
    if not base.scratches:
        raise UsageError(f"{folder}: no personas")
    return base


def persona_from_scratch(scratch: dict[str, Any], intention: str | None = None) -> Persona:
    """A persona from one ``scratch.json``; ``intention`` (a scenario's seeded plan) is added
    to ``currently``."""
    name = scratch["name"].strip()
    currently = " ".join(str(scratch.get("currently") or "").replace("*", "").split())
    if intention:
        currently = f"{currently} {intention}".strip()
    age = scratch.get("age")
    innate = " ".join(str(scratch["innate"]).split()).rstrip(".")
    traits = f"{name}{f' is {age} years old and' if age else ' is'} {innate}."
    texts = {k: " ".join(str(scratch.get(k) or "").split()) for k in SEED_TEXT}
    texts["currently"] = currently
    sentences = [traits] + [texts[k] for k in SEED_TEXT if texts.get(k)]
    decay = scratch.get("recency_decay")
    fields = {"first_name": scratch.get("first_name") or name.split()[0], "age": age, "innate": innate,
              "living_area": scratch.get("living_area"), **texts,
              "recency_decay": float(decay) if isinstance(decay, (int, float)) and not isinstance(decay, bool) else None}
    return Persona(name=name, sentences=sentences, fields={k: v for k, v in fields.items() if v not in (None, "")})


def sector_of(address: str) -> str:
    """``the Ville:Lin family's house`` for ``the Ville:Lin family's house:common room``."""
    return w.join(*w.split(address)[:2]) if len(w.split(address)) >= 2 else address


def housemates_sentence(name: str, living_area: str | None, homes: dict[str, str]) -> str | None:
    """``Eddy Lin lives in Lin family's house with John Lin and Mei Lin.``: the other agents whose
    home (``living_area``) is in the same sector; None when the agent lives alone."""
    if not living_area:
        return None
    sector = sector_of(living_area)
    others = [other for other, home in homes.items() if other != name and home and sector_of(home) == sector]
    if not others:
        return None
    together = others[0] if len(others) == 1 else f"{', '.join(others[:-1])} and {others[-1]}"
    return f"{name} lives in {w.split(sector)[-1]} with {together}."
