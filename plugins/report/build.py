"""``townsquare report RUN``: one self-contained HTML page about a finished (or stopped) run.

What a reader wants first leads (:data:`SECTIONS` is the page's order): "At a glance" (how the
run ended, key numbers, actions by kind and over time, the main metrics over rounds, the
groundedness line, the command to watch the run live), then the follower distribution at the
end (Zhou et al. fig. 6), actions accepted and refused, the town, recommender and study
sections where the run has them, distinct-1/2 of posts and comments (Table 1), persona
similarity of engaged vs browsed-only posts (Table 1 / ΔBS), groundedness, reflections and
plans, LLM calls, tokens and cost, run health; the run's metadata and slot table come last. A
run without comments or LLM calls still renders: those sections say so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from townsquare.api import UsageError
from townsquare.lib.cache_share import cache_line
from townsquare.lib.llm_calls import llm_by_purpose, llm_totals
from townsquare.lib.memory_export import memory_rows

from . import figures, html, similarity, tables
from .activity import gini
from .html import Number, Raw
from .text_metrics import distinct_percent, tokenize
from .headline_section import headline_section
from .health_section import health_section
from .memory_section import memory_section
from .personagym_section import personagym_section
from .recsys_section import recsys_section
from .sample_section import sample_section
from .some_section import some_section
from .studies_section import studies_section
from .town_section import town_section
from .zhou_section import zhou_section

log = structlog.get_logger("townsquare.plugins.report")

#: Past this many rounds, time plots show simulated days instead of rounds.
MAX_ROUND_POINTS = 96


def build_report(run_path: str | Path, out: str | Path | None = None, *, with_similarity: bool = True,
                 plugin_options: Sequence[str] = (), plugins: Any = None) -> tuple[Path, list[str]]:
    """Write the report; returns its path and notes about sections that could not be computed.
    ``plugins`` (a plugin set, as tests and notebooks hold one) rebuilds the run's embedder;
    without it the plugins are loaded from the manifest's ``plugin_options`` plus
    ``plugin_options``."""
    run = tables.open_run(run_path)
    try:
        page, notes = render(run, with_similarity=with_similarity, plugin_options=plugin_options, plugins=plugins)
    finally:
        run.close()
    target = Path(out) if out else run.path / "report.html"
    if not target.parent.is_dir():
        raise UsageError(f"--out {target}: folder {target.parent} does not exist")
    target.write_text(page, encoding="utf-8")
    log.info("report.written", path=str(target), notes=len(notes))
    return target, notes


@dataclass
class Report:
    """What the sections read: the run and what :func:`render` computed once for the page."""

    run: tables.Run
    agents: list[tables.AgentRow]
    rounds: list[tuple[int, str]]
    axis: "TimeAxis"
    posts: list[str]
    comments: list[str]
    diversity: dict[str, dict[str, float | None]]
    followers: dict[str, int]
    llm: dict[str, Any]
    sim: similarity.SimilarityResult | None
    sim_problem: str
    #: the plugin set that rebuilds the run's embedder (sections that embed: zhou)
    plugin_options: Sequence[str] = ()
    plugins: Any = None


#: The page, top to bottom: (anchor, title, builder). A builder takes the :class:`Report` and
#: returns the section's HTML, or None to leave the section out (a run without reflections has
#: no "Reflections and plans"). What happened comes first, how the run was set up last; a new
#: section is one line here.
SECTIONS: list[tuple[str, str, Callable[[Report], str | None]]] = [
    ("headline", "At a glance", lambda r: headline_section(r, summary_section(r))),
    ("followers", "Followers", lambda r: followers_section(r.agents, r.followers)),
    ("actions", "Actions", lambda r: actions_section(r.run.db)),
    ("town", "Town", lambda r: town_section(r.run.db, r.axis, r.run.manifest)),
    ("recsys", "Recommender system", lambda r: recsys_section(r.run.db, r.axis)),
    ("studies", "Information cocoon and conformity", lambda r: studies_section(r.run.db, r.run.path, r.run.manifest)),
    ("sample", "Posts and comments", lambda r: sample_section(r.run.db, r.agents)),
    ("text", "Text diversity", lambda r: text_section(r.posts, r.comments, r.diversity)),
    ("similarity", "Persona similarity", lambda r: similarity_section(r.sim, r.sim_problem)),
    ("groundedness", "Groundedness", lambda r: groundedness_section(r.run.db)),
    ("zhou", "Zhou et al. metrics", lambda r: zhou_section(r)),
    ("some", "SoMe evaluation", lambda r: some_section(r.run.path)),
    ("memory", "Reflections and plans",
     lambda r: memory_section(memory_rows(r.run.path)[1], {a.agent_id: a.persona.name for a in r.agents})),
    ("llm", "LLM calls", lambda r: llm_section(r.run.db, r.llm, r.axis, r.run.manifest)),
    ("personagym", "PersonaGym", lambda r: personagym_section(r.run.path)),
    ("health", "Run health", lambda r: health_section(r.run.db)),
    ("run", "Run", lambda r: run_section(r.run.manifest, r.agents, r.rounds)),
]


def render(run: tables.Run, *, with_similarity: bool = True, plugin_options: Sequence[str] = (),
           plugins: Any = None) -> tuple[str, list[str]]:
    m, db = run.manifest, run.db
    notes: list[str] = []
    agents = tables.agents(db)
    rounds = tables.rounds_played(db)
    clock = (m.get("scenario") or {}).get("clock") or {}
    axis = TimeAxis([r for r, _ in rounds], int(clock.get("minutes_per_round", 60)))

    posts, comments = tables.post_texts(db, comments=False), tables.post_texts(db, comments=True)
    sim: similarity.SimilarityResult | None = None
    sim_problem = "not computed (--no-similarity)"
    if with_similarity:
        try:
            cache, name = similarity.run_embedder(m, str(run.path / "manifest.json"), plugin_options, plugins)
            sim = similarity.compare({a.agent_id: a.persona.text for a in agents}, tables.engagement(db),
                                     tables.posts_by_id(db), tables.own_posts(db), similarity.sync_embed(cache), name)
        except UsageError as exc:
            sim_problem = f"not computed: {exc}"
            notes.append(f"persona similarity {sim_problem}")
    report = Report(run=run, agents=agents, rounds=rounds, axis=axis, posts=posts, comments=comments,
                    diversity={"posts": distinct_percent(posts), "comments": distinct_percent(comments)},
                    followers=tables.follower_counts(db, [a.agent_id for a in agents]), llm=llm_totals(db),
                    sim=sim, sim_problem=sim_problem, plugin_options=plugin_options, plugins=plugins)
    sections = [(anchor, title, body) for anchor, title, build in SECTIONS if (body := build(report)) is not None]
    status = str(m.get("status", "unknown"))
    subtitle = (f'<span class="status-{html.escape(status)}">{html.escape(status)}</span> · seed {html.escape(str(m.get("seed")))} · '
                f'{m.get("rounds_completed", len(rounds))} of {m.get("rounds", "?")} rounds · {len(agents):,} agents · '
                f'{html.escape(str(run.path))}')
    return html.page(f"townsquare report: {m.get('name', run.path.name)}", subtitle, sections), notes


class TimeAxis:
    """Maps rounds to plot buckets: rounds, or simulated days for long runs."""

    def __init__(self, rounds: list[int], minutes_per_round: int):
        self.by_day = len(rounds) > MAX_ROUND_POINTS
        self.per_day = max(1, 1440 // max(1, minutes_per_round))
        self.label = "simulated day" if self.by_day else "round"
        self.buckets = sorted({self.bucket(r) for r in rounds})

    def bucket(self, round: int) -> int:
        return round // self.per_day if self.by_day and round >= 0 else round

    def group(self, values: dict[int, float]) -> dict[int, float]:
        out: dict[int, float] = defaultdict(float)
        for r, v in values.items():
            out[self.bucket(r)] += v
        return dict(out)


# --------------------------------------------------------------------------- sections


def run_section(m: dict[str, Any], agents: list[tables.AgentRow], rounds: list[tuple[int, str]]) -> str:
    populations: dict[str, int] = defaultdict(int)
    for a in agents:
        populations[a.population] += 1
    scenario = m.get("scenario") or {}
    clock = scenario.get("clock") or {}
    facts = [
        ("name", m.get("name")),
        ("status", m.get("status")),
        ("seed", str(m.get("seed"))),
        ("rounds completed", f"{m.get('rounds_completed', len(rounds))} of {m.get('rounds', '?')}"),
        ("simulated time", f"{rounds[0][1]} to {rounds[-1][1]}" if rounds else None),
        ("minutes per round", str(clock.get("minutes_per_round", 60))),
        ("agents", ", ".join(f"{p}: {n:,}" for p, n in populations.items()) or "none"),
        ("scenario file", m.get("source")),
        ("overrides (--set)", " ".join(m.get("overrides") or []) or "none"),
        ("plugin options (-p)", " ".join(m.get("plugin_options") or []) or "none"),
        ("disabled plugins", ", ".join(m.get("disabled_plugins") or []) or "none"),
        ("townsquare", m.get("townsquare_version")),
        ("created", (m.get("environment") or {}).get("created_at")),
    ]
    if m.get("replay_of"):
        facts.append(("replay of", m["replay_of"]))
    slot_rows = m.get("slot_table") or []
    rows = [(r.get("scope"), r.get("slot"), r.get("component"), r.get("plugin")) for r in slot_rows]
    classes = ["ablated" if r.get("component") in ("-", None) else "" for r in slot_rows]
    slots = (html.table(("scope", "slot", "component", "plugin"), rows, classes)
             + html.note("Highlighted: slots left empty (set to 'none', or no enabled plugin fills them).")
             if rows else html.none("no slot table in the manifest"))
    return html.table(None, facts) + "<h3>Slot table: what filled each slot</h3>" + slots


def summary_section(r: Report) -> str:
    """The key numbers (the headline shows them)."""
    totals = {row["kind"]: row["ok"] for row in tables.action_totals(r.run.db)}
    engaged = next((row for row in r.sim.rows if row.action == "engaged"), None) if r.sim else None
    counts = list(r.followers.values())
    rows = [
        ("agents", len(r.agents)),
        ("posts / comments", f"{len(r.posts):,} / {len(r.comments):,}"),
        ("likes / reblogs", f"{totals.get('like', 0):,} / {totals.get('reblog', 0):,}"),
        ("follow edges at the end", sum(counts)),
        ("agents with no follower", f"{sum(1 for c in counts if c == 0):,} of {len(counts):,}"),
        ("distinct-1 / distinct-2 of posts (%)", _pair(r.diversity["posts"])),
        ("distinct-1 / distinct-2 of comments (%)", _pair(r.diversity["comments"])),
        ("ΔBS engaged − browsed only (cosine)", _cos(engaged.delta) if engaged else None),
        ("LLM calls", r.llm["calls"]),
        ("LLM tokens (prompt + completion)", r.llm["prompt_tokens"] + r.llm["completion_tokens"]),
        ("LLM cost", _money(r.llm["cost"])),
        ("LLM answers that failed to parse", tables.llm_status_counts(r.run.db).get("parse_failure", 0)),
    ]
    return html.table(("measure", "value"), rows)


def followers_section(agents: list[tables.AgentRow], followers: dict[str, int]) -> str:
    if not agents:
        return html.none("no agents in this run")
    counts = np.asarray(list(followers.values()), dtype=float)
    stats = [
        ("agents", len(counts)), ("mean", float(counts.mean())), ("median", float(np.median(counts))),
        ("max", int(counts.max())), ("Gini", gini(counts)),
        ("with no follower", f"{int((counts == 0).sum()):,} ({100 * float((counts == 0).mean()):.1f}%)"),
    ]
    names = {a.agent_id: a.name for a in agents}
    top = sorted(followers.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    top_rows = [(i + 1, agent, names.get(agent, "?"), n) for i, (agent, n) in enumerate(top) if n > 0]
    body = html.image(figures.followers([int(c) for c in counts]), "followers per agent")
    body += html.note("Follower counts at the end of the run: the follows table replayed in order "
                      "(a follow adds an edge, an unfollow removes it). Zhou et al. fig. 6.")
    top_html = html.table(("#", "agent", "name", "followers"), top_rows) if top_rows else html.none("no follows in this run")
    return body + f'<div class="cols"><div>{html.table(("measure", "value"), stats)}</div><div>{top_html}</div></div>'


def actions_section(db) -> str:
    """Actions per kind, accepted and refused (the plot over time is in the headline)."""
    totals = tables.action_totals(db)
    if not totals:
        return html.none("no actions in this run")
    body = html.table(("kind", "accepted", "refused by the platform"), [(r["kind"], r["ok"], r["refused"]) for r in totals])
    return body + html.note("Actions over time: the plot at the top of the page.")


def text_section(posts: list[str], comments: list[str], diversity: dict[str, dict[str, float | None]]) -> str:
    rows = []
    for label, texts in (("posts", posts), ("comments", comments)):
        d = diversity[label]
        if texts:
            rows.append((label, len(texts), sum(len(tokenize(t)) for t in texts), _pct(d["distinct-1"]), _pct(d["distinct-2"])))
        else:
            rows.append((label, 0, 0, Raw('<span class="none">none in this run</span>'), None))
    return (html.table(("text", "count", "tokens", "distinct-1 (%)", "distinct-2 (%)"), rows)
            + html.note("distinct-n (Li et al., 2016): distinct n-grams / all tokens over the whole set, as a "
                        "percentage (Zhou et al. Table 1: posts 22.40 / 63.88, comments 3.38 / 19.05). Tokens: "
                        "lowercased words and punctuation marks; n-grams do not cross texts. Comments are posts "
                        "that reply to another."))


def similarity_section(sim: similarity.SimilarityResult | None, problem: str) -> str:
    if sim is None:
        return html.none(f"Persona similarity {problem}")
    if not any(r.agents_acted or r.agents_not for r in sim.rows) and sim.post_mean is None:
        return html.none("no browsed or written posts in this run")
    rows, classes = [], []
    for r in sim.rows:
        label = "engaged (like, reblog or comment)" if r.action == "engaged" else r.action
        not_label = "browsed only" if r.action == "engaged" else f"not {r.action}"
        delta = _cos(r.delta)
        if not r.agents_acted and r.action != "engaged":
            rows.append((label, Raw('<span class="none">none in this run</span>'), None, 0, 0))
        else:
            rows.append((label, _cos(r.acted), delta, r.agents_acted, r.posts_acted))
        rows.append((not_label, _cos(r.not_acted), None, r.agents_not, r.posts_not))
        classes += ["", ""]
    rows.append(("post (own posts)", _cos(sim.post_mean), None, sim.post_agents, sim.posts))
    classes.append("")
    body = html.table(("posts", "mean cosine to persona", "Δ (acted − not)", "agents", "agent–post pairs"), rows, classes)
    body += html.note(
        f"Embedder: {sim.embedder} (the run's own, rebuilt from its manifest). For each agent, the mean cosine between "
        "its persona and the posts in a group; then the mean over agents with at least one post in the group. "
        "'not like' = posts the agent was shown and did not like. Δ is the paper's ΔBS with cosine in place of "
        "BERTScore (Zhou et al. Table 1 and appendix). Agents' own posts are left out of the browsed groups.")
    if any(r.agents_acted for r in sim.rows):
        body += html.image(figures.similarity(sim.rows, sim.per_agent, sim.embedder), "persona similarity by action")
    return body


def groundedness_section(db) -> str:
    """The ``groundedness`` metric at the last round, and who took the decisions."""
    values = tables.last_metrics(db, "groundedness")
    if not values:
        return html.none("no groundedness values in this run (metric disabled?)")
    rows = [
        ("posts measured", int(values.get("posts.count", 0))),
        ("mean cosine of a post with its author's persona", _cos(values.get("posts.own"))),
        ("mean cosine of a post with the other personas", _cos(values.get("posts.others"))),
        ("persona margin of posts (own − others)", _cos(values.get("posts.margin"))),
        ("like decisions (browsed posts, own left out)", int(values.get("likes.decisions", 0))),
        ("like rate", None if "likes.rate" not in values else round(values["likes.rate"], 3)),
        ("like rate per unit of persona–post cosine (slope)", None if "likes.slope" not in values else round(values["likes.slope"], 3)),
        ("AUC of persona–post cosine for liked vs not liked", None if "likes.auc" not in values else round(values["likes.auc"], 3)),
        ("comments measured", int(values.get("comments.count", 0))),
        ("comments that copy their post", None if "comments.copying" not in values else f"{values['comments.copying']:.0%}"),
    ]
    body = html.table(("measure", "value"), rows)
    body += html.note(
        "With the run's embedder. A positive margin: posts are closer to their own author's persona than to the "
        "others'. AUC 0.5: likes do not depend on the persona; 1: a similarity threshold decides them. "
        "Computed at round ends by the groundedness metric (townsquare.plugins.report.groundedness).")
    decided = tables.deciders(db)
    if decided:
        body += html.table(("action", "decided by", "actions"), [(k, by, n) for (k, by), n in sorted(decided.items())])
    return body


def llm_section(db, llm: dict[str, Any], axis: TimeAxis, manifest: dict[str, Any] | None = None) -> str:
    statuses = tables.llm_status_counts(db)
    if not statuses:
        return html.none("no LLM calls in this run")
    totals = [
        ("calls to the provider (ok + cached + error)", llm["calls"]),
        ("prompt tokens", llm["prompt_tokens"]), ("completion tokens", llm["completion_tokens"]),
        ("cost", _money(llm["cost"])),
        ("mean latency (ms)", None if llm["mean_latency_ms"] is None else round(float(llm["mean_latency_ms"]), 1)),
    ]
    status_rows = [(s, n) for s, n in statuses.items()]
    purposes = llm_by_purpose(db)
    purpose_rows = [
        (p["purpose"], p["calls"], p["prompt_tokens"], p["completion_tokens"], _money(p["cost"]),
         None if p["mean_latency_ms"] is None else round(p["mean_latency_ms"], 1),
         ", ".join(f"{s} {n:,}" for s, n in sorted(p["statuses"].items())))
        for p in purposes
    ]
    body = (f'<div class="cols"><div>{html.table(("measure", "value"), totals)}</div>'
            f'<div>{html.table(("status", "rows"), status_rows)}</div></div>')
    body += html.note("Status: ok = answered, cached = answered from the response cache (no cost), error = the "
                      "provider failed after retries, parse_failure = an answer that could not be parsed even after "
                      "one repair request (a safe default was used; not an extra call).")
    body += html.table(("purpose", "calls", "prompt tokens", "completion tokens", "cost", "mean latency (ms)", "statuses"), purpose_rows)
    cacheable = tables.cached_prefix(db)
    if cacheable is not None:
        body += html.note(cache_line(*cacheable, ((manifest or {}).get("scenario") or {}).get("llm")))
    per_round = tables.llm_per_round(db)
    if per_round:
        calls = {p: axis.group({r: c for r, (c, _) in v.items()}) for p, v in per_round.items()}
        tokens = {p: axis.group({r: t for r, (_, t) in v.items()}) for p, v in per_round.items()}
        buckets = sorted(set(axis.buckets) | {b for v in calls.values() for b in v})
        body += html.image(figures.llm_usage(calls, tokens, buckets, axis.label), "LLM calls and tokens over time")
        if any(-1 in v for v in per_round.values()):
            body += html.note(f"{axis.label.capitalize()} −1: calls made while the run was built (before round 0).")
    return body


# --------------------------------------------------------------------------- formatting


def _pct(value: float | None) -> Number | None:
    return None if value is None else Number(f"{value:.2f}")


def _pair(d: dict[str, float | None]) -> str:
    if d["distinct-1"] is None:
        return "none in this run"
    two = "–" if d["distinct-2"] is None else f"{d['distinct-2']:.2f}"
    return Number(f"{d['distinct-1']:.2f} / {two}")


def _cos(value: float | None) -> Number | None:
    return None if value is None else Number(f"{value:.4f}")


def _money(value: float | None) -> str:
    return "not priced" if value is None else f"${value:,.4f}"
