"""Zhou et al.'s evaluation of a run (§4.2, Tables 1-2, appendix G Table 15, fig. 6), per stage.

What is measured, for the **regular agents** (§4.1: the 300 agents that browse and are
evaluated; the initial agents only seed the sandbox):

* per action (like, reblog, comment) and stage, the persona-post similarity of the posts the
  agents acted on and of those they browsed and did not act on, and **ΔBS** = the first minus
  the second (appendix G), with a pluggable :mod:`.pair_similarity` backend; the same for
  **C.score** and **ΔC** with a pluggable :mod:`.zhou_judges` NLI judge; the ``post`` row
  scores the agents' own posts against their personas;
* distinct-1/2 of their posts and comments (:mod:`.text_metrics`, Li et al. per token), and the
  LLM judge's **Info / Cons / Hum** (1-3) on a sample of them (§4.2: 120 posts, 120 comments);
* the **knowledge-adoption rate**: knowledge items adopted / retrieved by the
  ``persona.knowledge`` component (from the newest checkpoint), and per stage the share of
  posts written with adopted knowledge (the post actions' ``detail["knowledge"]``);
* the **fig. 6 distribution**: follower counts of the regular agents only at the end.

Stages (§4.1: "two stages of interaction", one simulated week each): the ``feed_stages`` of the
regular populations, in order (stage 1 = browsing the initial agents' posts, stage 2 = each
other's); a run without feed stages is one stage. An action belongs to the stage its round
is in. Regular populations (:func:`regular_populations`): the ones named with ``populations``;
else those with ``feed_stages``; else, in a run without feed stages, those whose agents
browsed: a population that never browsed (the quickstart's ``initial`` agents, who only seed
the sandbox with posts, ``browse = false``) is the paper's initial agents and is left out; when
no population browsed, all of them.

**Circularity.** Where a like (or reblog, comment) was decided by the persona-post similarity
rule (``social_agent_routed``, ``embedding_baseline``: the browse action's
``detail["decided_by"]`` says ``similarity``), the agents liked the posts closest to their
persona by the run's embedder, so ΔBS measured with that embedder's cosine is positive by
construction, and with BERTScore positive largely because the two similarities agree: it shows
the rule, not that the agents follow their personas. :func:`circularity` counts those browse
sessions per action; :func:`circular_notes` says so in the output and the report.

Choices where the paper is silent: a pair is (agent, post); "not like" = posts the agent was
shown in that stage (browse actions) and did not like; an agent's own posts are never in a
browsed group; means are over pairs (each like decision weighs the same); pairs are sampled
per (stage, group) when there are more than ``pairs`` (seeded), the same sample for the
similarity and the judge.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from townsquare.api import UsageError

from . import tables
from .activity import gini
from .text_metrics import distinct_percent
from .zhou_judges import evaluation_persona

ACTIONS = ("like", "reblog", "comment")


@dataclass(frozen=True)
class Stage:
    name: str
    start: int
    end: int | None  # exclusive; None: to the end

    def holds(self, round: int) -> bool:
        return round >= self.start and (self.end is None or round < self.end)


def regular_populations(manifest: dict[str, Any], chosen: Sequence[str] = (), db: sqlite3.Connection | None = None) -> list[str]:
    """The evaluated populations (module docstring): ``chosen``; else those with feed stages;
    else those whose agents browsed (read from ``db``); else all."""
    populations = (manifest.get("scenario") or {}).get("populations") or []
    names = [p.get("name") for p in populations]
    if chosen:
        unknown = [c for c in chosen if c not in names]
        if unknown:
            raise UsageError(f"--population {unknown[0]!r}: the run has {', '.join(map(str, names))}")
        return list(chosen)
    staged = [p.get("name") for p in populations if p.get("feed_stages")]
    if staged or db is None:
        return staged or names
    browsed = {pop for (pop,) in db.execute(
        "SELECT DISTINCT g.population FROM actions a JOIN agents g ON g.agent_id = a.agent_id WHERE a.kind = 'browse' AND a.ok = 1")}
    return [n for n in names if n in browsed] or names


def stages_of(manifest: dict[str, Any], regular: Sequence[str]) -> list[Stage]:
    """The regular populations' feed stages (the first population's that has any), in order."""
    for population in (manifest.get("scenario") or {}).get("populations") or []:
        if population.get("name") in regular and population.get("feed_stages"):
            spans = sorted((int(s.get("start_round", 0)), s.get("end_round")) for s in population["feed_stages"])
            return [Stage(f"stage {i + 1}", start, None if end is None else int(end)) for i, (start, end) in enumerate(spans)]
    return [Stage("all rounds", 0, None)]


# --------------------------------------------------------------------------- reading the run


@dataclass
class RunData:
    personas: dict[str, str]  # regular agent -> persona text as the judges see it (§4.2)
    posts: dict[str, tuple[str, str, int, str | None]]  # post id -> (author, text, round, reply_to)
    decisions: list[tuple[str, str, str, int]]  # (agent, kind, post id, round): browse = shown
    knowledge_posts: list[tuple[str, int, bool]]  # (agent, round, written with adopted knowledge)
    #: (round, action kind -> who decided it: ``llm`` / ``similarity``) per browse session
    deciders: list[tuple[int, dict[str, str]]] = field(default_factory=list)


def read_run(db: sqlite3.Connection, regular: Sequence[str]) -> RunData:
    personas = {a.agent_id: evaluation_persona(a.persona) for a in tables.agents(db) if a.population in regular}
    posts = {pid: (author, text or "", int(r), reply_to)
             for pid, author, text, r, reply_to in db.execute("SELECT post_id, author_id, text, round, reply_to FROM posts")}
    decisions: list[tuple[str, str, str, int]] = []
    knowledge: list[tuple[str, int, bool]] = []
    deciders: list[tuple[int, dict[str, str]]] = []
    query = ("SELECT agent_id, kind, target_post, post_ids, round, detail FROM actions "
             "WHERE ok = 1 AND kind IN ('browse', 'like', 'reblog', 'comment', 'post') ORDER BY seq")
    for agent, kind, target, post_ids, r, detail in db.execute(query):
        if agent not in personas:
            continue
        if kind == "browse":
            try:
                shown = json.loads(post_ids or "[]")
            except json.JSONDecodeError:
                continue
            decisions += [(agent, "browse", str(p), int(r)) for p in shown]
            try:
                by = (json.loads(detail) if detail else {}).get("decided_by")
            except (json.JSONDecodeError, AttributeError):
                by = None
            if isinstance(by, dict):
                deciders.append((int(r), {str(k): str(v) for k, v in by.items()}))
        elif kind == "post":
            try:
                used = (json.loads(detail) if detail else {}).get("knowledge")
            except (json.JSONDecodeError, AttributeError):
                used = None
            if isinstance(used, list):
                knowledge.append((agent, int(r), bool(used)))
        elif target:
            decisions.append((agent, kind, str(target), int(r)))
    return RunData(personas, posts, decisions, knowledge, deciders)


def groups(data: RunData, stage: Stage) -> dict[str, list[tuple[str, str]]]:
    """(agent, post id) pairs per group in ``stage``: ``like`` / ``not like`` (shown, not
    liked), the same for reblog and comment, and ``post`` (the agent's own top-level posts)."""
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: {k: set() for k in ("browse", *ACTIONS)})
    for agent, kind, post, r in data.decisions:
        if stage.holds(r) and post in data.posts and data.posts[post][0] != agent:
            seen[agent][kind].add(post)
    out: dict[str, list[tuple[str, str]]] = {}
    for action in ACTIONS:
        out[action] = sorted((a, p) for a, s in seen.items() for p in s[action])
        out[f"not {action}"] = sorted((a, p) for a, s in seen.items() for p in s["browse"] - s[action])
    out["post"] = sorted((author, pid) for pid, (author, _, r, reply_to) in data.posts.items()
                         if author in data.personas and reply_to is None and stage.holds(r))
    return out


def circularity(data: RunData, stages: Sequence[Stage]) -> dict[str, dict[str, int]]:
    """Per action: the regular agents' browse sessions whose decision of that action was made
    by the similarity rule, and all their browse sessions (over the stages)."""
    sessions = [by for r, by in data.deciders if any(s.holds(r) for s in stages)]
    return {action: {"by_similarity": sum(1 for by in sessions if by.get(action) == "similarity"), "sessions": len(sessions)}
            for action in ACTIONS}


def circular_notes(circular: dict[str, dict[str, int]], similarity_name: str) -> list[str]:
    """One warning per action some of whose decisions the similarity rule made."""
    notes = []
    by_cosine = similarity_name.startswith("cosine")
    for action, counts in circular.items():
        if counts["by_similarity"]:
            why = ("positive by construction: the rule chose the posts with the highest persona-post cosine, which is "
                   "what ΔBS measures here" if by_cosine else
                   "positive largely by construction: the rule chose by the embedder's persona-post cosine, which "
                   "BERTScore agrees with")
            notes.append(f"CIRCULAR: {action} was decided by the persona-post similarity rule in {counts['by_similarity']} of "
                         f"{counts['sessions']} browse sessions (detail.decided_by = similarity); ΔBS for {action} is {why}. "
                         "It shows the rule, not that the agents follow their personas.")
    return notes


def texts_by(data: RunData, stage: Stage, comments: bool) -> list[tuple[str, str, str]]:
    """(agent, text, replied-to text) of the regular agents' posts or comments in ``stage``."""
    out = []
    for pid, (author, text, r, reply_to) in sorted(data.posts.items(), key=lambda kv: (kv[1][2], kv[0])):
        if author in data.personas and text and stage.holds(r) and (reply_to is not None) == comments:
            out.append((author, text, data.posts.get(reply_to, ("", "", 0, None))[1] if reply_to else ""))
    return out


def sample(items: list[Any], limit: int, rng: np.random.Generator) -> list[Any]:
    """At most ``limit`` of ``items`` (all when ``limit`` is 0), in their order."""
    if not limit or len(items) <= limit:
        return list(items)
    return [items[i] for i in sorted(rng.choice(len(items), size=limit, replace=False))]


# --------------------------------------------------------------------------- results


@dataclass
class ActionRow:
    """One action of Table 15 in one stage: the acted-on and the not-acted-on groups."""

    stage: str
    action: str  # like | reblog | comment | post
    pairs_acted: int
    pairs_not: int
    bs_acted: float | None = None
    bs_not: float | None = None
    c_acted: float | None = None
    c_not: float | None = None
    judged_acted: int = 0
    judged_not: int = 0

    @property
    def delta_bs(self) -> float | None:
        return None if self.bs_acted is None or self.bs_not is None else self.bs_acted - self.bs_not

    @property
    def delta_c(self) -> float | None:
        return None if self.c_acted is None or self.c_not is None else self.c_acted - self.c_not


@dataclass
class TextRow:
    """Posts or comments of one stage: diversity and the judge's grades."""

    stage: str
    kind: str  # post | comment
    count: int
    distinct_1: float | None
    distinct_2: float | None
    judged: int = 0
    informativeness: float | None = None
    consistency: float | None = None
    humanness: float | None = None


@dataclass
class ZhouResult:
    backends: dict[str, str | None]
    regular: list[str]
    stages: list[Stage]
    actions: list[ActionRow]
    texts: list[TextRow]
    knowledge: dict[str, Any]
    followers: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    #: action -> browse sessions decided by the similarity rule, of all (:func:`circularity`)
    circular: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the judges' ``llm_calls`` rows written, by status
    llm_calls: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for row, data in zip(self.actions, out["actions"]):
            data["delta_bs"], data["delta_c"] = row.delta_bs, row.delta_c
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ZhouResult":
        actions = [ActionRow(**{k: v for k, v in row.items() if k not in ("delta_bs", "delta_c")}) for row in data["actions"]]
        return cls(dict(data["backends"]), list(data["regular"]), [Stage(**s) for s in data["stages"]], actions,
                   [TextRow(**row) for row in data["texts"]], dict(data["knowledge"]), dict(data["followers"]),
                   list(data.get("notes", [])), dict(data.get("circular", {})), dict(data.get("llm_calls", {})))


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def measure(db: sqlite3.Connection, manifest: dict[str, Any], similarity: Any, *, checkpoint: dict[str, Any] | None = None,
            populations: Sequence[str] = (), pairs: int = 0, seed: int = 0) -> tuple[ZhouResult, dict[str, Any]]:
    """Everything that needs no judge; returns the result and the sampled work for the judges
    (``{"nli": {(stage, group): [(persona, post text)]}, "texts": {(stage, kind): [...]}}``)."""
    regular = regular_populations(manifest, populations, db)
    stages = stages_of(manifest, regular)
    data = read_run(db, regular)
    rng = np.random.default_rng(seed)
    work: dict[str, Any] = {"nli": {}, "texts": {}}
    rows: list[ActionRow] = []
    texts: list[TextRow] = []
    for stage in stages:
        chosen = {key: sample(value, pairs, rng) for key, value in groups(data, stage).items()}
        for action in (*ACTIONS, "post"):
            acted = [(data.personas[a], data.posts[p][1]) for a, p in chosen[action]]
            other = [] if action == "post" else [(data.personas[a], data.posts[p][1]) for a, p in chosen[f"not {action}"]]
            row = ActionRow(stage.name, action, len(acted), len(other),
                            bs_acted=_mean(similarity.score(acted)) if acted else None,
                            bs_not=_mean(similarity.score(other)) if other else None)
            rows.append(row)
            work["nli"][(stage.name, action)] = acted
            work["nli"][(stage.name, f"not {action}")] = other
        for kind, comments in (("post", False), ("comment", True)):
            written = texts_by(data, stage, comments)
            diversity = distinct_percent([t for _, t, _ in written])
            texts.append(TextRow(stage.name, kind, len(written), diversity["distinct-1"], diversity["distinct-2"]))
            work["texts"][(stage.name, kind)] = [(kind, data.personas[a], t, c) for a, t, c in written]
    result = ZhouResult(
        backends={"similarity": similarity.name, "nli": None, "judge": None,
                  "distinct": "Li et al. (2016): distinct n-grams / all tokens, per set of texts"},
        regular=regular, stages=stages, actions=rows, texts=texts,
        knowledge=knowledge_adoption(data, stages, checkpoint, manifest, regular),
        followers=regular_followers(db, list(data.personas)), circular=circularity(data, stages))
    result.notes += circular_notes(result.circular, similarity.name)
    everyone = {p.get("name") for p in (manifest.get("scenario") or {}).get("populations") or []}
    result.followers["all_agents"] = set(regular) >= everyone
    return result, work


def knowledge_adoption(data: RunData, stages: Sequence[Stage], checkpoint: dict[str, Any] | None,
                       manifest: dict[str, Any], regular: Sequence[str]) -> dict[str, Any]:
    """Items adopted / retrieved by the regular agents' ``persona.knowledge`` components (the
    newest checkpoint's counters), and per stage the share of posts written with knowledge."""
    components = sorted({str(r.get("component")) for r in manifest.get("slot_table") or []
                         if r.get("slot") == "persona.knowledge" and r.get("scope") in regular})
    totals = {"queries": 0, "retrieved": 0, "adopted": 0}
    for agent, state in ((checkpoint or {}).get("agents") or {}).items():
        counters = ((state or {}).get("components") or {}).get("persona.knowledge") or {}
        if agent in data.personas:
            for key in totals:
                totals[key] += int(counters.get(key, 0) or 0)
    per_stage = {}
    for stage in stages:
        flags = [used for _, r, used in data.knowledge_posts if stage.holds(r)]
        per_stage[stage.name] = {"posts": len(flags), "with_knowledge": sum(flags),
                                 "share": (sum(flags) / len(flags)) if flags else None}
    return {"components": components, **totals,
            "rate": totals["adopted"] / totals["retrieved"] if totals["retrieved"] else None,
            "checkpoint": checkpoint is not None, "stages": per_stage}


def regular_followers(db: sqlite3.Connection, agents: list[str]) -> dict[str, Any]:
    """Fig. 6: the regular agents' follower counts at the end (follows from anyone)."""
    counts = tables.follower_counts(db, agents)
    values = [counts[a] for a in agents]
    return {"agents": len(values), "counts": values, "with_none": sum(1 for v in values if v == 0),
            "max": max(values) if values else 0, "mean": float(np.mean(values)) if values else 0.0, "gini": gini(values)}


async def judge(result: ZhouResult, work: dict[str, Any], nli: Any = None, quality: Any = None, *, texts: int = 60,
                seed: int = 0) -> ZhouResult:
    """Fill in C.score (with ``nli``) and Info / Cons / Hum (with ``quality``, on at most
    ``texts`` posts and ``texts`` comments per stage, sampled with ``seed``)."""
    from .zhou_judges import c_score, mean_grades

    if nli is not None:
        for row in result.actions:
            for side, group in (("acted", row.action), ("not", f"not {row.action}")):
                pairs = work["nli"].get((row.stage, group)) or []
                if pairs:
                    labels = await nli.labels(pairs)
                    setattr(row, f"c_{side}", c_score(labels))
                    setattr(row, f"judged_{side}", sum(1 for label in labels if label is not None))
        result.backends["nli"] = nli.name
        if nli.failures:
            result.notes.append(f"{nli.failures} NLI judgements unreadable after a repair request: left out of C.score")
    if quality is not None:
        rng = np.random.default_rng(seed)
        for row in result.texts:
            items = sample(work["texts"].get((row.stage, row.kind)) or [], texts, rng)
            if not items:
                continue
            grades = await quality.grades(items)
            means = mean_grades(grades)
            row.judged = sum(1 for g in grades if g is not None)
            row.informativeness, row.consistency, row.humanness = means["informativeness"], means["consistency"], means["humanness"]
        result.backends["judge"] = quality.name
        if quality.failures:
            result.notes.append(f"{quality.failures} quality grades unreadable after a repair request: left out of the means")
    return result
