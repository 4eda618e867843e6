"""Personas written in the scenario (``inline``) or in a JSON Lines file (``jsonl``).

A JSONL line is ``{"name": ..., "sentences": [...], "fields": {...}}``; ``sentences`` and
``fields`` may be left out, blank lines are skipped. Both sources keep the file's order and
reuse it cyclically when a population is larger (:func:`townsquare.persona.cycle_personas`),
so the same scenario always gives the same agents.

The kernel allows one config model per plugin, so both sources share
:class:`PersonaFilesConfig`: ``inline`` reads ``items``, ``jsonl`` reads ``path``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import LimitsConfig, Persona, PersonaSourceSpec, UsageError, hookimpl, limits_of, name_problem
from townsquare.lib.files import read_json_lines
from townsquare.lib.persona_pool import cycle_personas

log = structlog.get_logger("townsquare.plugins.personas.persona_files")


class PersonaItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    sentences: list[str] = Field(default_factory=list)
    fields: dict[str, Any] = Field(default_factory=dict)


class PersonaFilesConfig(BaseModel):
    """``items`` for ``inline``; ``path`` (relative to the scenario's folder) for ``jsonl``."""

    model_config = ConfigDict(extra="forbid")

    items: list[PersonaItem] | None = None
    path: str | None = None


class ListPersonas:
    """A fixed list of personas, cycled to the requested count."""

    def __init__(self, personas: list[Persona], origin: str):
        self.personas = personas
        self.origin = origin

    def load(self, count: int, rng: Any) -> list[Persona]:
        if count > 0 and not self.personas:
            raise UsageError(f"{self.origin}: no personas")
        return cycle_personas(self.personas, count)

    def get_state(self) -> dict[str, Any]:
        return {}  # the personas come from the config; agents keep their own copies

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def read_jsonl(path: Path, limits: Any = None) -> list[Persona]:
    """Parse a persona file; any problem is a one-line :class:`UsageError` naming the line.
    ``limits``: the scenario's ``[limits]`` (file size, name length)."""
    limits = limits if limits is not None else LimitsConfig()
    rows = read_json_lines(path, "persona file", max_mb=limits.max_persona_file_mb, limit_name="limits.max_persona_file_mb")
    return [_persona(record, where, limits) for where, record in rows]


def _persona(record: Any, where: str, limits: Any) -> Persona:
    if not isinstance(record, dict):
        raise UsageError(f"{where}: expected a JSON object, got {type(record).__name__}")
    name = record.get("name")
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f'{where}: missing "name" (a non-empty string)')
    sentences = record.get("sentences", [])
    if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
        raise UsageError(f'{where}: "sentences" must be a list of strings')
    fields = record.get("fields", {})
    if not isinstance(fields, dict):
        raise UsageError(f'{where}: "fields" must be an object')
    unknown = sorted(set(record) - {"name", "sentences", "fields"})
    if unknown:
        raise UsageError(f'{where}: unknown key "{unknown[0]}" (expected name, sentences, fields)')
    return checked(Persona(name=name, sentences=list(sentences), fields=dict(fields)), where, limits)


def checked(persona: Persona, where: str, limits: Any) -> Persona:
    """``persona`` if its name and size are within ``limits``, else a one-line error."""
    problem = name_problem(persona.name, limits.max_name_length, path_safe=False)
    if problem:
        raise UsageError(f'{where}: "name": {problem}')
    size = len(json.dumps({"sentences": persona.sentences, "fields": persona.fields}, ensure_ascii=False, default=str))
    if size > limits.max_persona_chars:
        raise UsageError(f"{where}: persona {persona.name[:40]!r} is {size} characters long, above limits.max_persona_chars = {limits.max_persona_chars}")
    return persona


def build_inline(config: PersonaFilesConfig | None, ctx: Any) -> ListPersonas:
    if config is None or config.items is None:
        raise UsageError("personas: the inline source needs items = [{name = ..., sentences = [...]}]")
    limits = limits_of(ctx)
    personas = [checked(Persona(name=item.name, sentences=list(item.sentences), fields=dict(item.fields)), f"personas.items[{i}]", limits)
                for i, item in enumerate(config.items)]
    return ListPersonas(personas, "personas.items")



def build_jsonl(config: PersonaFilesConfig | None, ctx: Any) -> ListPersonas:
    if config is None or not config.path:
        raise UsageError("personas: the jsonl source needs path = \"personas.jsonl\"")
    path = Path(config.path)
    if not path.is_absolute():
        path = Path(getattr(ctx, "base_dir", ".") or ".") / path
    personas = read_jsonl(path, limits_of(ctx))
    log.debug("personas.loaded", path=str(path), count=len(personas))
    return ListPersonas(personas, str(path))


@hookimpl
def townsquare_register_persona_sources():
    return [
        PersonaSourceSpec("inline", build_inline, config_model=PersonaFilesConfig, priority=100,
                          description="personas written in the scenario"),
        PersonaSourceSpec("jsonl", build_jsonl, config_model=PersonaFilesConfig,
                          description="one persona per line of a JSON Lines file"),
    ]
