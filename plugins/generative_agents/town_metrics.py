"""Park et al.'s emergent social behaviour measures (§7.1), as metric ``town_metrics`` (issue 13).

* **Information diffusion** (§7.1.1): the share of agents who know of the event (the party).
  The paper asks each agent and checks the answer against its memory stream; here the memory
  evidence alone decides: an agent knows when one of its memory records mentions the event
  (``topic``, a regular expression, default ``valentine|party``). Measured every round, so the
  stored series is the diffusion curve (paper: 4 % -> 52 % over two days).
* **Relationship formation** (§7.1.2): network density eta = 2|E| / (|V| (|V| - 1)) of the
  undirected graph whose edges join two agents that know each other: the paper asks both and
  wants a yes from both; here A knows B when a record of A's memory of a kind in
  ``know_kinds`` (conversations and reflections by default) or of its seed names B (full
  name): merely seeing someone is not knowing them. An edge needs both directions
  (paper: 0.167 -> 0.74).
* **Coordination** (§7.1.3): who is in the event's place (``place``, matched in the arena
  address, default ``Hobbs Cafe``) during its window (``start`` to ``end``, simulated time):
  ``at_place`` now, ``attended`` so far, and ``attended_informed`` (those of them who knew of the
  event; the paper: 5 of the 12 invited came).

Stored keys (``town_metrics.KEY``): ``knows_topic``, ``density``, ``at_place``, ``attended``,
``attended_informed``, ``informed``, and ``knows.<agent id>`` (0/1) for the report's timeline.
The functions below take plain data, so a hand-built log checks the numbers.
"""

from __future__ import annotations

import re
from datetime import datetime
from itertools import combinations
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import MetricSpec, RoundView, agent_memory, hookimpl


class TownMetricsConfig(BaseModel):
    """``[plugins.town_metrics]`` settings."""

    model_config = ConfigDict(extra="forbid")

    topic: str = Field("valentine|party", description="regular expression (case-insensitive) naming the event")
    place: str = Field("Hobbs Cafe", description="the event's place: text found in the arena address")
    start: datetime | None = Field(None, description="the event's start (simulated time); none: no coordination count")
    end: datetime | None = Field(None, description="the event's end (simulated time)")
    know_kinds: list[str] = Field(default_factory=lambda: ["chat", "reflection"],
                                  description="memory kinds that show acquaintance (besides the seed records)")


def knows(texts: Iterable[str], topic: re.Pattern[str]) -> bool:
    return any(topic.search(t) for t in texts)


def diffusion_share(evidence: Mapping[str, Iterable[str]], topic: re.Pattern[str]) -> float:
    """Share of agents (keys of ``evidence``: agent -> its memory texts) who know of the topic."""
    if not evidence:
        return 0.0
    return sum(knows(texts, topic) for texts in evidence.values()) / len(evidence)


def acquaintances(evidence: Mapping[str, Iterable[str]], names: Mapping[str, str]) -> dict[str, set[str]]:
    """Agent -> the agents whose full name appears in one of its memory texts."""
    patterns = {a: re.compile(rf"\b{re.escape(n)}\b", re.I) for a, n in names.items()}
    out: dict[str, set[str]] = {}
    for agent, texts in evidence.items():
        texts = list(texts)
        out[agent] = {b for b, p in patterns.items() if b != agent and any(p.search(t) for t in texts)}
    return out


def density(known: Mapping[str, set[str]]) -> float:
    """eta = 2|E| / (|V|(|V|-1)), an edge when both agents know each other (Park §7.1.2)."""
    agents = list(known)
    if len(agents) < 2:
        return 0.0
    edges = sum(1 for a, b in combinations(agents, 2) if b in known[a] and a in known[b])
    return 2 * edges / (len(agents) * (len(agents) - 1))


def at_place(positions: Mapping[str, str | None], place: str) -> set[str]:
    needle = place.lower()
    return {a for a, where in positions.items() if where and needle in where.lower()}


def in_window(now: datetime, start: datetime | None, end: datetime | None) -> bool:
    return start is not None and now >= start and (end is None or now < end)


class TownMetrics:
    def __init__(self, config: TownMetricsConfig | None = None):
        self.config = config or TownMetricsConfig()
        self.topic = re.compile(self.config.topic, re.I)
        self.attended: set[str] = set()

    async def measure(self, view: RoundView) -> dict[str, float]:
        cfg = self.config
        records = {a.id: agent_memory(a).since(None) for a in view.agents}
        evidence = {a: [r.text for r in rs] for a, rs in records.items()}
        informed = {a for a, texts in evidence.items() if knows(texts, self.topic)}
        kinds = set(cfg.know_kinds)
        social = {a: [r.text for r in rs if r.kind in kinds or r.meta.get("seed")] for a, rs in records.items()}
        known = acquaintances(social, {a.id: a.persona.name for a in view.agents})
        where = getattr(view.platform, "where", None)
        positions = {a.id: where(a.id) for a in view.agents} if where is not None else {}
        here = at_place(positions, cfg.place)
        if in_window(datetime.fromisoformat(view.now), cfg.start, cfg.end):
            self.attended |= here
            present = len(here)
        else:
            present = 0
        values = {
            "knows_topic": len(informed) / len(evidence) if evidence else 0.0,
            "informed": float(len(informed)),
            "density": density(known),
            "at_place": float(present),
            "attended": float(len(self.attended)),
            "attended_informed": float(len(self.attended & informed)),
        }
        values.update({f"knows.{a}": float(a in informed) for a in evidence})
        return values

    def get_state(self) -> dict[str, Any]:
        return {"attended": sorted(self.attended)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.attended = set(state.get("attended", []))


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("town_metrics", lambda config, ctx: TownMetrics(config), config_model=TownMetricsConfig,
                       description="Park et al. §7.1: party knowledge share, relationship density, attendance")]
