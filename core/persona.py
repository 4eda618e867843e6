"""Personas: who an agent is.

A :class:`Persona` keeps a display name, free-form ``fields`` (age, occupation, hobbies,
knowledge... whatever the source provides; paper designs read the keys they need) and
``sentences``: short first-person statements in the Personachat style. Persona sources are
registered through ``townsquare_register_persona_sources``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


@dataclass
class Persona:
    name: str
    sentences: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The persona as one paragraph: its sentences, then its fields (a text field that is
        already one of the sentences is not repeated)."""
        parts = list(self.sentences)
        parts += [f"{key}: {value}" for key, value in self.fields.items()
                  if value not in ("", None) and not (isinstance(value, str) and value in self.sentences)]
        return " ".join(str(p) for p in parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Persona":
        return cls(
            name=str(data["name"]),
            sentences=list(data.get("sentences", [])),
            fields=dict(data.get("fields", {})),
        )


class PersonaSource(Protocol):
    """Yields personas for a population. ``load(count, rng)`` returns exactly ``count``; it may
    be a coroutine function (a source that enriches personas with the LLM, say)."""

    def load(self, count: int, rng: Any) -> list[Persona]: ...


def name_problem(name: str, max_length: int = 200, *, path_safe: bool = True) -> str | None:
    """Why ``name`` cannot name a population (it ends up in agent ids and file names) or, with
    ``path_safe=False``, a persona (a display name: "AC/DC fan" is fine), or None.
    ``max_length`` is the scenario's ``limits.max_name_length``."""
    if not name.strip():
        return "name is empty"
    if len(name) > max_length:
        return f"name is {len(name)} characters long, above limits.max_name_length = {max_length}"
    if path_safe and (any(ch in name for ch in "/\\") or name.strip() in (".", "..")):
        return f"name {name[:40]!r} looks like a path (no / or \\ allowed)"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return f"name {name[:40]!r} contains control characters"
    return None
