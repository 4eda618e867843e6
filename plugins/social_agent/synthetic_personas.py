"""Persona source ``synthetic``: complete rich personas with no LLM, for scale runs.

Zhou et al. enrich Personachat personas with ChatGPT (§3.1.1, appendix A); a run of 10,000
agents cannot wait for 10,000 enrichment calls, and a test cannot make any. This source
writes table-4 personas itself from word lists of its own: a name that fits the nationality,
an age, a gender, two personality traits, an occupation and two or three hobby themes (word
lists in :mod:`.persona_words`). The three advanced attributes are several sentences each,
every sentence about one hobby or the occupation (so dynamic retrieval has something to choose
between), and ``sentences`` holds short first-person statements in the Personachat style.

Everything is drawn from the ``rng`` the engine passes to ``load`` (seeded from the
scenario's seed and the population's index), so a seed gives the same people every time.
Names are unique within a population: a name already taken gets a middle initial (and, should
ten initials all be taken, a ``#k`` suffix, as when a fixed list is cycled).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from townsquare import hookimpl
from townsquare.persona import Persona
from townsquare.specs import PersonaSourceSpec

from . import persona_schema as S
from .persona_words import NATIONALITIES, OCCUPATIONS, PEOPLE, PERSONALITIES, THEMES


class SyntheticConfig(BaseModel):
    """``personas = {name = "synthetic", ...}`` settings."""

    model_config = ConfigDict(extra="forbid")

    min_age: int = Field(18, ge=13, le=100)
    max_age: int = Field(75, ge=13, le=100)
    min_hobbies: int = Field(2, ge=1, le=len(THEMES))
    max_hobbies: int = Field(3, ge=1, le=len(THEMES))
    #: share of personas with gender "Non-binary" (they/their)
    nonbinary_share: float = Field(0.05, ge=0.0, le=1.0)

    @field_validator("max_age", "max_hobbies")
    @classmethod
    def _not_below_min(cls, value: int, info: ValidationInfo) -> int:
        low = info.data.get(info.field_name.replace("max_", "min_"))
        if low is not None and value < low:
            raise ValueError(f"{info.field_name} {value} is below {info.field_name.replace('max_', 'min_')} {low}")
        return value


_PRONOUNS = {"Female": ("she", "her"), "Male": ("he", "his"), "Non-binary": ("they", "their")}


def _pick(rng: np.random.Generator, options: tuple[Any, ...]) -> Any:
    return options[int(rng.integers(len(options)))]


def synthetic_persona(rng: np.random.Generator, config: SyntheticConfig | None = None) -> Persona:
    """One complete table-4 persona drawn from ``rng``."""
    cfg = config or SyntheticConfig()
    nationality = _pick(rng, NATIONALITIES)
    female, male, surnames, cities = PEOPLE[nationality]
    draw = rng.random()
    gender = "Non-binary" if draw < cfg.nonbinary_share else ("Female" if draw < (1 + cfg.nonbinary_share) / 2 else "Male")
    first = _pick(rng, female if gender == "Female" else male if gender == "Male" else female + male)
    name = f"{first} {_pick(rng, surnames)}"
    age = int(rng.integers(min(cfg.min_age, cfg.max_age), max(cfg.min_age, cfg.max_age) + 1))
    city = _pick(rng, cities)
    traits = rng.choice(len(PERSONALITIES), size=2, replace=False)
    n_hobbies = int(rng.integers(min(cfg.min_hobbies, cfg.max_hobbies), max(cfg.min_hobbies, cfg.max_hobbies) + 1))
    themes = [THEMES[i] for i in rng.choice(len(THEMES), size=n_hobbies, replace=False)]
    occupation, job_history, job_knowledge = OCCUPATIONS[int(rng.integers(len(OCCUPATIONS)))]
    pron, pos = _PRONOUNS[gender]

    def fill(template: str) -> str:
        # years of a habit: at least 1, at most the years since age 12
        years = int(rng.integers(1, max(2, min(age - 12, 30) + 1)))
        return template.format(name=first, pos=pos, pron=pron, city=city, years=years)

    def sentences(pick: Any) -> list[str]:
        # one sentence per hobby, sometimes two
        out = []
        for theme in themes:
            options = pick(theme)
            order = rng.permutation(len(options))
            out += [fill(options[i]) for i in order[: 1 + int(rng.random() < 0.4)]]
        return out

    history = [fill(job_history), *sentences(lambda t: t.history)]
    preferences = sentences(lambda t: t.preferences)
    knowledge = [fill(job_knowledge), *sentences(lambda t: t.knowledge)]
    fields = {
        S.NAME: name,
        S.AGE: age,
        S.GENDER: gender,
        S.NATIONALITY: nationality,
        S.PERSONALITY: ", ".join(PERSONALITIES[i] for i in traits),
        S.HOBBIES: ", ".join(t.hobby for t in themes),
        S.HISTORY: " ".join(history),
        S.PREFERENCES: " ".join(preferences),
        S.KNOWLEDGE: " ".join(knowledge),
    }
    article = "an" if occupation[0] in "aeio" else "a"  # "a university student"
    statements = [f"I am {article} {occupation}.", f"I live in {city}.", *(t.statement for t in themes)]
    return Persona(name=name, sentences=statements, fields=fields)


class SyntheticPersonas:
    """Draws ``count`` personas from the engine's generator for the population."""

    def __init__(self, config: SyntheticConfig | None = None):
        self.config = config or SyntheticConfig()

    def load(self, count: int, rng: Any) -> list[Persona]:
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        seen: set[str] = set()
        out = []
        for _ in range(count):
            persona = synthetic_persona(rng, self.config)
            first, _, last = persona.name.partition(" ")
            for _ in range(10):  # a taken name gets a middle initial
                if persona.name not in seen:
                    break
                persona.name = f"{first} {chr(65 + int(rng.integers(26)))}. {last}"
            k = 2
            base = persona.name
            while persona.name in seen:
                persona.name, k = f"{base} #{k}", k + 1
            persona.fields[S.NAME] = base
            seen.add(persona.name)
            out.append(persona)
        return out

    def get_state(self) -> dict[str, Any]:
        return {}  # agents keep their personas; the source holds nothing between runs

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def build_synthetic(config: SyntheticConfig | None, ctx: Any) -> SyntheticPersonas:
    return SyntheticPersonas(config)


@hookimpl
def townsquare_register_persona_sources():
    return [
        PersonaSourceSpec("synthetic", build_synthetic, config_model=SyntheticConfig,
                          description="rich table-4 personas generated offline from word lists (no LLM)"),
    ]
