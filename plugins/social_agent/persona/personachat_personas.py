"""Persona sources ``personachat`` and ``personachat_offline``: Personachat personas,
enriched into the rich persona of Zhou et al. §3.1.1.

Zhou et al. start from Personachat's short personas (Zhang et al., 2018) and enrich each with
ChatGPT into the table-4 schema (appendix A). Two file formats are read, chosen by extension:

* ``.csv``: the Synthetic-Persona-Chat format (Jandaghi et al., 2023): columns
  ``user 1 personas`` and ``user 2 personas`` hold one persona each, its sentences on
  separate lines (a third column holds the conversation and is ignored). ``column`` picks
  ``user 1``, ``user 2`` or ``both`` (row by row, user 1 first);
* ``.json``: a list of ``{"sentences": [...]}`` objects (``persona_id`` and other keys are
  ignored), as in ``personas_unique_from_SPC_valid_test.json``.

Repeated personas (the same sentences in several conversations) are read once. The
population takes the first ``count`` in file order, or a random sample when ``shuffle`` is
set (drawn from the engine's generator for the population, so a seed fixes it); a population
larger than the file reuses it cyclically (``#k`` suffixes).

``personachat`` enriches through the run's LLM (:mod:`.persona_enrichment`; the calls are
attributed to ``persona:POPULATION:K`` and recorded with round -1). With ``enrich = false``
it calls no LLM and uses the deterministic offline enrichment instead. ``personachat_offline``
always does that: it never needs an LLM, so choosing it never makes the run pick one.
"""

from __future__ import annotations

import asyncio
import csv
import io
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import Persona, PersonaSourceSpec, UsageError, hookimpl, limits_of
from townsquare.lib.files import parse_json_list, read_user_text
from townsquare.lib.persona_pool import cycle_personas

from . import persona_schema as S
from .persona_enrichment import enrich, offline_enrichment
from ..prompts import load_prompts

log = structlog.get_logger("townsquare.plugins.social_agent.persona.personachat_personas")

COLUMNS = {"user 1": ("user 1 personas",), "user 2": ("user 2 personas",), "both": ("user 1 personas", "user 2 personas")}


class PersonachatConfig(BaseModel):
    """``personas = {name = "personachat", path = "...", ...}`` settings (both sources)."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(None, description="a Synthetic-Persona-Chat .csv or a .json list; relative to the scenario's folder")
    column: Literal["user 1", "user 2", "both"] = Field("both", description="which CSV column's personas to use")
    shuffle: bool = Field(False, description="sample personas at random instead of taking them in file order")
    #: enrich through the LLM; default true for personachat; personachat_offline accepts only false
    enrich: bool | None = None
    prompts_file: str | None = Field(None, description="a TOML file whose keys replace the built-in persona prompts")
    max_tokens: int = Field(1024, gt=0)
    temperature: float = Field(0.7, ge=0.0, le=2.0)


@lru_cache(maxsize=8)
def read_personachat(path: str, column: str = "both", max_mb: float | None = None) -> tuple[tuple[str, ...], ...]:
    """The distinct persona sentence sets of a Personachat file, in file order (``max_mb``: the
    scenario's ``limits.max_persona_file_mb``)."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".csv", ".json"):
        raise UsageError(f"{path}: expected a .csv (Synthetic-Persona-Chat) or .json (list of {{\"sentences\": [...]}}) file")
    text = read_user_text(file, "Personachat file", max_mb=max_mb, limit_name="limits.max_persona_file_mb")
    sets = _from_csv(text, path, column) if suffix == ".csv" else _from_json(text, path)
    unique = tuple(dict.fromkeys(s for s in sets if s))
    if not unique:
        raise UsageError(f"{path}: no personas")
    return unique


def _sentences(cell: str) -> tuple[str, ...]:
    return tuple(" ".join(line.split()) for line in cell.splitlines() if line.strip())


def _from_csv(text: str, path: str, column: str) -> list[tuple[str, ...]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    wanted = COLUMNS[column]
    missing = [c for c in wanted if c not in header]
    if missing:
        raise UsageError(f"{path}: no column {missing[0]!r} (columns: {', '.join(header) or 'none'})")
    sets = []
    try:
        for row in reader:
            sets += [_sentences(row[c] or "") for c in wanted]
    except csv.Error as exc:
        raise UsageError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
    return sets


def _from_json(text: str, path: str) -> list[tuple[str, ...]]:
    data = parse_json_list(text, path, "persona objects")
    sets = []
    for i, record in enumerate(data):
        sentences = record.get("sentences") if isinstance(record, dict) else None
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise UsageError(f'{path}: item {i}: expected {{"sentences": [strings]}}')
        sets.append(tuple(" ".join(s.split()) for s in sentences if s.strip()))
    return sets


class PersonachatPersonas:
    """Loads Personachat personas and enriches them (LLM or offline)."""

    def __init__(self, config: PersonachatConfig, path: Path, llm: Any, population: str, base_dir: str, max_mb: float | None = None):
        self.config = config
        self.path = path
        self.max_mb = max_mb
        self.llm = llm  # None: offline enrichment
        self.population = population
        self.prompts = load_prompts("persona", config.prompts_file, base_dir) if llm is not None else {}
        self.fallbacks = 0

    def _pick(self, count: int, rng: Any) -> list[tuple[str, ...]]:
        pool = read_personachat(str(self.path), self.config.column, self.max_mb)
        n = min(count, len(pool))
        if self.config.shuffle:
            rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
            return [pool[i] for i in rng.choice(len(pool), size=n, replace=False)]
        return list(pool[:n])

    async def load(self, count: int, rng: Any) -> list[Persona]:
        if count <= 0:
            return []
        chosen = self._pick(count, rng)
        if self.llm is None:
            rich = [offline_enrichment(sentences) for sentences in chosen]
        else:
            results = await asyncio.gather(*(
                enrich(self.llm.for_agent(f"persona:{self.population}:{k}"), sentences, self.prompts,
                       max_tokens=self.config.max_tokens, temperature=self.config.temperature)
                for k, sentences in enumerate(chosen)
            ))
            rich = [fields for fields, _ in results]
            self.fallbacks = sum(1 for _, ok in results if not ok)
            if self.fallbacks:
                log.warning("personas.enrichment_fallback", population=self.population, fallbacks=self.fallbacks, of=len(chosen))
        personas = [Persona(name=fields[S.NAME], sentences=list(sentences), fields=fields) for fields, sentences in zip(rich, chosen)]
        log.info("personas.enriched", population=self.population, count=len(personas), llm=self.llm is not None,
                 fallbacks=self.fallbacks, path=str(self.path))
        return cycle_personas(personas, count)

    def get_state(self) -> dict[str, Any]:
        return {"fallbacks": self.fallbacks}

    def set_state(self, state: dict[str, Any]) -> None:
        self.fallbacks = int(state.get("fallbacks", 0))


def _resolve(config: PersonachatConfig | None, ctx: Any, source: str) -> tuple[PersonachatConfig, Path]:
    if config is None or not config.path:
        raise UsageError(f'personas: the {source} source needs path = "…" (a Synthetic-Persona-Chat .csv or a .json list)')
    path = Path(config.path)
    if not path.is_absolute():
        path = Path(getattr(ctx, "base_dir", ".") or ".") / path
    read_personachat(str(path), config.column, limits_of(ctx).max_persona_file_mb)  # fail at build time, naming the file
    return config, path



def build_personachat(config: PersonachatConfig | None, ctx: Any) -> PersonachatPersonas:
    config, path = _resolve(config, ctx, "personachat")
    llm = None
    if config.enrich is not False:
        services = getattr(ctx, "services", None)
        llm = getattr(services, "llm", None)
        if llm is None:
            raise UsageError("personas: source 'personachat' enriches personas with the LLM (enrich = true) but the run has "
                             "no LLM: add an [llm] table, set enrich = false, or use personachat_offline")
    return PersonachatPersonas(config, path, llm, getattr(ctx, "population", None) or "personas", getattr(ctx, "base_dir", "."),
                               limits_of(ctx).max_persona_file_mb)


def build_personachat_offline(config: PersonachatConfig | None, ctx: Any) -> PersonachatPersonas:
    config, path = _resolve(config, ctx, "personachat_offline")
    if config.enrich:
        raise UsageError("personas: source 'personachat_offline' never calls the LLM (enrich = true): use 'personachat'")
    return PersonachatPersonas(config, path, None, getattr(ctx, "population", None) or "personas", getattr(ctx, "base_dir", "."),
                               limits_of(ctx).max_persona_file_mb)


@hookimpl
def townsquare_register_persona_sources():
    return [
        PersonaSourceSpec("personachat", build_personachat, config_model=PersonachatConfig, needs_llm=True,
                          description="Personachat personas enriched into Zhou et al.'s rich persona by the LLM"),
        PersonaSourceSpec("personachat_offline", build_personachat_offline, config_model=PersonachatConfig,
                          description="Personachat personas enriched offline from their own sentences (no LLM)"),
    ]
