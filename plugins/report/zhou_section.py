"""The report's section on Zhou et al.'s evaluation (§4.2; Tables 1, 2, 15; fig. 6), per stage.

When ``townsquare eval zhou RUN`` has written ``RUN/zhou_eval.json``, the section shows it
(C.score / ΔC and the judge's Info / Cons / Hum included). Otherwise it computes what needs no
judge (:func:`.zhou_metrics.measure` over every pair, with the run's embedder's cosine) and
says how to get the rest: the report itself never calls an LLM. Every number's backend is
named in the section's first table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from townsquare.api import UsageError

from . import figures, html
from .html import Number

EVAL_FILE = "zhou_eval.json"
#: what the report says of persona similarity under ``--no-similarity``
NO_SIMILARITY = "not computed (--no-similarity)"
#: the paper's own numbers, to read ours against (Table 1 first / second stage; Table 2)
PAPER = ("Zhou et al. Table 1 (BERTScore, first stage): like 0.440 vs not like 0.433, reblog 0.438 vs 0.432, "
         "comment 0.435 vs 0.433, post 0.465; C.score: like 0.972 vs 0.934; distinct-1/2 of posts 22.40 / 63.88, "
         "comments 3.38 / 19.05 (%). Table 2 (GPT-4, 1-3): posts Info 2.658, Cons 2.967, Hum 3.000.")


class _NoSimilarity:
    name = NO_SIMILARITY

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.zeros(0)


def _n(value: float | None, digits: int = 3, signed: bool = False) -> Number | None:
    if value is None:
        return None
    return Number(f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}")


def load_or_measure(run: Any, *, with_similarity: bool, plugin_options: Sequence[str], plugins: Any) -> tuple[Any, str]:
    """The run's Zhou result and where it came from."""
    from townsquare.api.commands import open_run

    from . import similarity, zhou_metrics

    saved = run.path / EVAL_FILE
    if saved.is_file():
        try:
            return zhou_metrics.ZhouResult.from_json(json.loads(saved.read_text(encoding="utf-8"))), f"{saved.name} (townsquare eval zhou)"
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise UsageError(f"{saved}: not an evaluation written by townsquare eval zhou ({exc})") from None
    scorer: Any = _NoSimilarity()
    if with_similarity:
        from .pair_similarity import EmbedderSimilarity

        cache, name = similarity.run_embedder(run.manifest, str(run.path / "manifest.json"), plugin_options, plugins)
        scorer = EmbedderSimilarity(similarity.sync_embed(cache), name)
    latest = open_run(str(run.path)).latest_checkpoint()
    result, _ = zhou_metrics.measure(run.db, run.manifest, scorer, checkpoint=latest[1] if latest else None)
    return result, "computed for this report (no judge: run townsquare eval zhou RUN for C.score and Info / Cons / Hum)"


def zhou_section(report: Any) -> str | None:
    """The section's HTML for the report's :class:`~.build.Report`; None for a run without
    posts (and without a saved evaluation). The embedder is rebuilt from the manifest with the
    report's plugins; ``--no-similarity`` leaves BS out here too."""
    run = report.run
    has_posts = run.db.execute("SELECT 1 FROM posts LIMIT 1").fetchone() is not None
    if not has_posts and not (run.path / EVAL_FILE).is_file():
        return None
    with_similarity = report.sim is not None or report.sim_problem != NO_SIMILARITY
    try:
        result, source = load_or_measure(run, with_similarity=with_similarity, plugin_options=report.plugin_options, plugins=report.plugins)
    except UsageError as exc:
        return html.none(f"Zhou et al. metrics not computed: {exc}")
    return render(result, source)


def render(result: Any, source: str) -> str:
    b = result.backends
    stages = "; ".join(f"{s.name}: rounds {s.start}–{'end' if s.end is None else s.end - 1}" for s in result.stages)
    backends = [
        ("source of these numbers", source),
        ("regular agents (populations)", ", ".join(result.regular)),
        ("stages", stages),
        ("BS / ΔBS", b.get("similarity")),
        ("C.score / ΔC", b.get("nli") or "not computed"),
        ("Info / Cons / Hum", b.get("judge") or "not computed"),
        ("distinct-1/2", b.get("distinct")),
    ]
    body = html.table(("measure", "backend"), backends)
    rows = []
    for r in result.actions:
        rows.append((r.stage, r.action, _n(r.bs_acted, 4), _n(r.bs_not, 4), _n(r.delta_bs, 4, True), _n(r.c_acted), _n(r.c_not),
                     _n(r.delta_c, 3, True), f"{r.pairs_acted:,}" if r.action == "post" else f"{r.pairs_acted:,} / {r.pairs_not:,}"))
    body += "<h3>Actions: acted on vs browsed only (Table 1, appendix G Table 15)</h3>"
    circular = [line for line in result.notes if line.startswith("CIRCULAR:")]
    for line in circular:  # before the numbers it qualifies, in bold
        body += f"<p><strong>{html.escape(line)}</strong></p>"
    body += html.table(("stage", "action", "BS acted", "BS not", "ΔBS", "C.score acted", "C.score not", "ΔC", "pairs"), rows)
    body += html.note("For each action, the persona–post similarity (BS) and NLI consistency (C.score: entailment 1, neutral 0, "
                      "contradiction −1) of the posts the regular agents acted on and of those they were shown and did not; "
                      "Δ = acted − not (appendix G). The post row scores their own posts. Persona: personality, hobbies and "
                      "content preferences (§4.2). Means over (agent, post) pairs.")
    text_rows = [(t.stage, t.kind, f"{t.count:,}", _n(t.distinct_1, 2), _n(t.distinct_2, 2), _n(t.informativeness, 2),
                  _n(t.consistency, 2), _n(t.humanness, 2), t.judged) for t in result.texts]
    body += "<h3>Posts and comments: diversity and judged quality (Tables 1, 2)</h3>"
    body += html.table(("stage", "text", "count", "distinct-1 (%)", "distinct-2 (%)", "Info", "Cons", "Hum", "graded"), text_rows)
    body += html.note("Info / Cons / Hum: 1 poor, 2 moderate, 3 good, averaged over the graded texts. " + PAPER)
    k = result.knowledge
    rate = "no knowledge retrieved" if k.get("rate") is None else f"{k['rate']:.3f} ({k['adopted']:,} of {k['retrieved']:,} items)"
    krows = [("component", ", ".join(k.get("components") or []) or "none"), ("adoption rate (adopted / retrieved)", rate)]
    krows += [(f"{stage}: posts written with adopted knowledge", f"{s['with_knowledge']:,} of {s['posts']:,}")
              for stage, s in (k.get("stages") or {}).items() if s.get("posts")]
    body += "<h3>Knowledge adoption (§3.1.1, T_k)</h3>" + html.table(("measure", "value"), krows)
    if not k.get("checkpoint"):
        body += html.note("No checkpoint: the adoption counters are kept in the components' checkpointed state.")
    f = result.followers
    body += f"<h3>Followers of the regular agents (fig. 6)</h3>"
    if f.get("all_agents"):
        body += html.note("Every agent is a regular agent here: the plot is the Followers section's.")
    elif f["agents"]:
        body += html.image(figures.followers([int(c) for c in f["counts"]]), "followers per regular agent")
    body += html.table(("measure", "value"), [("regular agents", f["agents"]), ("with no follower", f["with_none"]),
                                               ("max", f["max"]), ("mean", _n(f["mean"], 2)), ("Gini", _n(f["gini"]))])
    for line in result.notes:
        if line not in circular:
            body += html.note(line)
    return body
