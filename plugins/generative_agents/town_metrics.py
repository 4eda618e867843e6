"""Park et al.'s emergent social behaviour measures (§7.1), as metric ``town_metrics``.

Everything is read from the agents' memories and the town's positions, every round, so the
stored series are the curves.

* **Information diffusion** (§7.1.1), per topic (``[plugins.town_metrics.topics.NAME]``: the
  party, Sam's candidacy...): an agent has **heard** of a topic when its seed (its persona's
  sentences, or the seed records its memory holds) mentions it (``pattern``, a case-insensitive
  regular expression), or when a memory record of a kind in ``heard_kinds`` (conversations, by
  default) does. The paper asks each
  agent and counts a yes only when its memory holds the dialogue that conveyed the information;
  here that evidence alone decides, so an agent who merely saw the host decorate has not heard.
  Keys ``T.heard`` (agents), ``T.share`` (of all agents) and ``T.heard.<agent id>`` (0/1, the
  report's timeline). The paper: the party 1 -> 13 of 25 (4 % -> 52 %), Sam's candidacy
  1 -> 8 (4 % -> 32 %).
* **Relationship formation** (§7.1.2): network density eta = 2|E| / (|V| (|V| - 1)) of the
  undirected graph whose edges join two agents that know each other: A knows B when a record
  of A's memory of a kind in ``know_kinds`` (conversations and reflections) or of its seed
  names B (full name); merely seeing someone is not knowing them, and an edge needs both
  directions (the paper asks both). Key ``density``; the paper: 0.167 -> 0.74.
* **Coordination** (§7.1.3), for a topic with a ``place`` and a window (``start``, ``end``):
  the **guests** are the agents who have heard of it, less its ``hosts`` (default: the agents
  whose seed mentions it) and its ``staff`` (agents who work at the place; none by default).
  ``T.guests`` counts them; ``T.at_place`` is everyone at the place now (during the window),
  ``T.present_guests`` the guests who were at the place during the window, having heard before,
  and ``T.attended_guests`` those of them whose activity there named the event (they came for
  it, rather than happening to dine there). The paper: 5 of the 12 invited came.

The functions below take plain data, so a hand-built log checks the numbers.
"""

from __future__ import annotations

import re
from datetime import datetime
from itertools import combinations
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field, model_validator

from townsquare.api import MetricSpec, RoundView, agent_memory, hookimpl


class TopicConfig(BaseModel):
    """One topic whose spread is measured (``[plugins.town_metrics.topics.NAME]``)."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="regular expression (case-insensitive) that a text about the topic matches")
    about: str | None = Field(None, description="the topic in an interviewer's words (eval park --topic NAME asks "
                              "'Do you know about <about>?'); default: its name")
    hosts: list[str] | None = Field(None, description="agents (names) who start it; default: those whose seed mentions it")
    staff: list[str] = Field(default_factory=list, description="agents (names) who work at the place: never guests")
    place: str | None = Field(None, description="the event's place: text found in the arena address")
    start: datetime | None = Field(None, description="the event's start (simulated time)")
    end: datetime | None = Field(None, description="the event's end (simulated time)")

    @model_validator(mode="after")
    def _check(self) -> "TopicConfig":
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"pattern {self.pattern!r} is not a regular expression: {exc}") from None
        if self.start and self.end and self.end <= self.start:
            raise ValueError(f"end ({self.end}) is not after start ({self.start})")
        return self


def _default_topics() -> dict[str, TopicConfig]:
    return {"party": TopicConfig(pattern="valentine|party", place="Hobbs Cafe")}


class TownMetricsConfig(BaseModel):
    """``[plugins.town_metrics]`` settings."""

    model_config = ConfigDict(extra="forbid")

    topics: dict[str, TopicConfig] = Field(default_factory=_default_topics)
    heard_kinds: list[str] = Field(default_factory=lambda: ["chat"],
                                   description="memory kinds that show an agent heard of a topic (besides its seed)")
    know_kinds: list[str] = Field(default_factory=lambda: ["chat", "reflection"],
                                  description="memory kinds that show acquaintance (besides the seed)")

    @model_validator(mode="after")
    def _names(self) -> "TownMetricsConfig":
        bad = [name for name in self.topics if not re.fullmatch(r"[A-Za-z_][\w-]*", name)]
        if bad:
            raise ValueError(f"topic name {bad[0]!r}: use letters, digits, '_' or '-' (it becomes a metric key)")
        return self


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


def guests(heard: set[str], hosts: set[str], staff: set[str]) -> set[str]:
    """The agents who heard of an event and neither host it nor work at its place."""
    return heard - hosts - staff


class Topic:
    """One topic's pattern, hosts, staff and the attendance seen so far."""

    def __init__(self, name: str, config: TopicConfig):
        self.name, self.config = name, config
        self.pattern = re.compile(config.pattern, re.I)
        self.present: set[str] = set()
        self.attended: set[str] = set()

    def hosts(self, seeds: Mapping[str, list[str]], names: Mapping[str, str]) -> set[str]:
        if self.config.hosts is not None:
            return {a for a, n in names.items() if n in self.config.hosts}
        return {a for a, texts in seeds.items() if knows(texts, self.pattern)}

    def measure(self, now: datetime, seeds: Mapping[str, list[str]], heard_evidence: Mapping[str, list[str]],
                names: Mapping[str, str], positions: Mapping[str, str | None], doing: Mapping[str, str]) -> dict[str, float]:
        cfg, key = self.config, self.name
        heard = {a for a in names if knows(seeds.get(a, []), self.pattern) or knows(heard_evidence.get(a, []), self.pattern)}
        values = {f"{key}.heard": float(len(heard)), f"{key}.share": len(heard) / len(names) if names else 0.0}
        if cfg.place:
            invited = guests(heard, self.hosts(seeds, names), {a for a, n in names.items() if n in cfg.staff})
            here = at_place(positions, cfg.place) if in_window(now, cfg.start, cfg.end) else set()
            self.present |= here & invited
            self.attended |= {a for a in here & invited if self.pattern.search(doing.get(a) or "")}
            values.update({f"{key}.guests": float(len(invited)), f"{key}.at_place": float(len(here)),
                           f"{key}.present_guests": float(len(self.present)),
                           f"{key}.attended_guests": float(len(self.attended))})
        values.update({f"{key}.heard.{a}": float(a in heard) for a in names})
        return values


class TownMetrics:
    def __init__(self, config: TownMetricsConfig | None = None):
        self.config = config or TownMetricsConfig()
        self.topics = [Topic(name, topic) for name, topic in self.config.topics.items()]

    async def measure(self, view: RoundView) -> dict[str, float]:
        cfg = self.config
        records = {a.id: agent_memory(a).since(None) for a in view.agents}
        names = {a.id: a.persona.name for a in view.agents}
        # the seed: the persona's sentences and the seed records its memory holds
        seeds = {a.id: [str(s) for s in a.persona.sentences] + [r.text for r in records[a.id] if r.meta.get("seed")]
                 for a in view.agents}
        heard_kinds, know_kinds = set(cfg.heard_kinds), set(cfg.know_kinds)
        heard = {a: [r.text for r in rs if r.kind in heard_kinds] for a, rs in records.items()}
        social = {a: seeds[a] + [r.text for r in rs if r.kind in know_kinds] for a, rs in records.items()}
        platform = view.platform
        where = getattr(platform, "where", None)
        positions = {a: where(a) for a in names} if where is not None else {}
        doing_of = getattr(platform, "doing", None)
        doing = {a: doing_of(a) for a in names} if doing_of is not None else {}
        now = datetime.fromisoformat(view.now)
        values = {"density": density(acquaintances(social, names))}
        spatial = getattr(platform, "spatial_memory", None)
        if spatial is not None and names:
            values["sectors_known"] = sum(len({s for world in spatial(a).values() for s, arenas in world.items() if arenas})
                                          for a in names) / len(names)
        for topic in self.topics:
            values.update(topic.measure(now, seeds, heard, names, positions, doing))
        return values

    def get_state(self) -> dict[str, Any]:
        return {"topics": {t.name: {"present": sorted(t.present), "attended": sorted(t.attended)} for t in self.topics}}

    def set_state(self, state: dict[str, Any]) -> None:
        saved = state.get("topics", {})
        for topic in self.topics:
            topic.present = set(saved.get(topic.name, {}).get("present", []))
            topic.attended = set(saved.get(topic.name, {}).get("attended", []))


@hookimpl
def townsquare_register_metrics():
    return [MetricSpec("town_metrics", lambda config, ctx: TownMetrics(config), config_model=TownMetricsConfig,
                       description="Park et al. §7.1: who heard of each topic, relationship density, invited guests at the event")]
