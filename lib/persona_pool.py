"""Filling a population from a shorter list of personas (the persona sources' shared helper)."""

from __future__ import annotations

from typing import Iterable

from townsquare.persona import Persona


def cycle_personas(personas: Iterable[Persona], count: int) -> list[Persona]:
    """Take ``count`` personas, reusing the list in order when it is shorter.

    Reused personas get a ``#k`` suffix so every account name stays unique.
    """
    pool = list(personas)
    if not pool:
        return []
    out = []
    for i in range(count):
        base = pool[i % len(pool)]
        lap = i // len(pool)
        name = base.name if lap == 0 else f"{base.name} #{lap + 1}"
        out.append(Persona(name=name, sentences=list(base.sentences), fields=dict(base.fields)))
    return out
