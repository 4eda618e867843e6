"""Persona source ``smallville``: the agents of a Smallville base folder (Park et al.'s
``base_the_ville_n25``, ``base_the_ville_isabella_maria_klaus``, or a user's own copy in the
same layout; see :mod:`.seed_files`).

``personas = { name = "smallville", path = "<base folder>" }``; ``currently`` replaces an
agent's ``currently`` text and ``intentions`` adds a seeded intention to it
(``{ "Isabella Rodriguez" = "..." }``: the Valentine's Day party of Park §7.1 is one);
``names`` keeps those agents, in that order; ``housemates`` (default true, our choice) adds to
each persona one seed sentence naming the other agents of the base who live in the same house
(:func:`.seed_files.housemates_sentence`). A population's ``count`` must not exceed the agents
kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, Persona, PersonaSourceSpec, UsageError, hookimpl

from .seed_files import housemates_sentence, persona_from_scratch, read_base


class SmallvillePersonasConfig(BaseModel):
    """Settings of the ``smallville`` persona source (``path`` relative to the scenario)."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="a Smallville base folder (personas/<Name>/bootstrap_memory/scratch.json)")
    names: list[str] | None = Field(None, description="keep these agents, in this order (default: all, meta.json order)")
    currently: dict[str, str] = Field(default_factory=dict, description="agent name -> its 'currently' text, replacing the seed's")
    intentions: dict[str, str] = Field(default_factory=dict, description="agent name -> intention added to its 'currently'")
    housemates: bool = Field(True, description="add a seed sentence naming the agents who live in the same house (our choice)")


class SmallvillePersonas:
    def __init__(self, personas: list[Persona]):
        self.personas = personas

    def load(self, count: int, rng: Any) -> list[Persona]:
        if count > len(self.personas):
            raise UsageError(f"personas 'smallville': count {count} is more than the {len(self.personas)} agents of the base")
        return self.personas[:count]

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def load_personas(config: SmallvillePersonasConfig, base_dir: str = ".") -> list[Persona]:
    folder = Path(config.path) if Path(config.path).is_absolute() else Path(base_dir) / config.path
    base = read_base(folder)
    by_name = {s["name"]: s for s in base.scratches}
    names = config.names or base.names
    for name in [*names, *config.intentions, *config.currently]:
        if name not in by_name:
            raise UsageError(f"personas 'smallville': no agent {name!r} in {folder} (agents: {', '.join(base.names)})")
    personas = [persona_from_scratch({**by_name[n], **({"currently": config.currently[n]} if n in config.currently else {})},
                                     config.intentions.get(n)) for n in names]
    if config.housemates:
        homes = base.homes()
        for persona in personas:
            sentence = housemates_sentence(persona.name, homes.get(persona.name), homes)
            if sentence:
                persona.sentences.append(sentence)
    return personas


def build_smallville_personas(config: SmallvillePersonasConfig | None, ctx: BuildContext) -> SmallvillePersonas:
    if config is None:
        raise UsageError("personas 'smallville' needs a path (a Smallville base folder)")
    return SmallvillePersonas(load_personas(config, ctx.base_dir))


@hookimpl
def townsquare_register_persona_sources():
    return [PersonaSourceSpec("smallville", build_smallville_personas, config_model=SmallvillePersonasConfig,
                              description="Park et al.'s Smallville agents from a base folder's scratch.json seeds")]
