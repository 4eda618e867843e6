"""Where an action happens (Park et al. §4.3 and §5.1): the recursive location choice.

For an action the plan calls for ("open the cafe and brew coffee"), the model picks a sector
among the sectors the agent knows, then an arena among the arenas of that sector it knows, then
an object of that arena: each step one labelled choice over the agent's own spatial memory
(the environment tree it has seen), so an agent never goes where it has never been. A level
with one option takes it without a call. When the model's answer is none of the options even
after the repair request, the agent stays: its current sector and arena when they are among the
options, else the first option (our choice; the paper does not say).

Not a plugin: the town policy (:mod:`..policy.town_agent`) calls :func:`choose_location`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..prompt_files import fill

SEP = ":"


@dataclass(frozen=True)
class Location:
    world: str
    sector: str
    arena: str
    object: str | None

    @property
    def arena_address(self) -> str:
        return SEP.join((self.world, self.sector, self.arena))


def _parts(address: str | None) -> list[str]:
    return [p.strip() for p in address.split(SEP)] if address else []


async def _pick(llm: Any, prompt: str, options: list[str], stay: str | None, purpose: str) -> str:
    default = stay if stay in options else options[0]
    if len(options) == 1:
        return options[0]
    return await llm.choose(prompt, options, purpose=purpose, default=default, max_tokens=24)


async def choose_location(llm: Any, prompts: dict[str, str], known: dict[str, dict[str, dict[str, list[str]]]], *,
                          name: str, activity: str, current: str | None, home: str | None = None,
                          summary: str = "") -> Location | None:
    """Sector, then arena, then object, each among what ``known`` holds (the agent's spatial
    memory ``{world: {sector: {arena: [objects]}}}``). ``current`` and ``home`` are arena
    addresses. None when the agent knows no arena at all."""
    here = _parts(current)
    world = here[0] if here and here[0] in known else next(iter(known), None)
    if world is None:
        return None
    sectors = [s for s, arenas in known[world].items() if arenas]
    if not sectors:
        return None
    home_parts = _parts(home)
    current_text = ", ".join(here[1:3]) if len(here) >= 3 else "an unknown place"
    home_text = ", ".join(home_parts[1:3]) if len(home_parts) >= 3 else "an unknown place"
    values = dict(summary=summary or f"Name: {name}", name=name, activity=activity, current=current_text, home=home_text,
                  world=world)
    stay_sector = here[1] if len(here) >= 3 else None
    sector = await _pick(llm, fill(prompts["sector"], **values, options=", ".join(sectors)), sectors, stay_sector,
                         "town.sector")
    arenas = list(known[world][sector])
    stay_arena = here[2] if len(here) >= 3 and here[1] == sector else None
    arena = await _pick(llm, fill(prompts["arena"], **values, sector=sector, options=", ".join(arenas)), arenas, stay_arena,
                        "town.arena")
    objects = list(known[world][sector][arena])
    obj = None
    if objects:
        obj = await _pick(llm, fill(prompts["object"], **values, sector=sector, arena=arena, options=", ".join(objects)),
                          objects, None, "town.object")
    return Location(world, sector, arena, obj)
