"""``townsquare eval zhou`` and the report's Zhou section on a real two-stage run (Zhou §4.1:
initial agents seed the sandbox; regular agents browse their posts in stage 1, each other's in
stage 2), every number checked against one computed here from ``events.sqlite``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from townsquare.plugins.embedders.hash import HashEmbedder
from townsquare.plugins.report.zhou_command import evaluate_run
from townsquare.plugins.report.zhou_judges import evaluation_persona
from townsquare.plugins.report import tables

from helpers import cli_in_process as cli, count_scripted_calls

SCRIPTED = "townsquare.testing.scripted"
DATA = Path(__file__).resolve().parents[2] / "data"

SCENARIO = """
name = "zhou-eval"
seed = 4
rounds = 9
[llm]
name = "scripted"
text_reply = "Thinking about {{topic}} and long walks"
[llm.rules]
"Suggest .* topics" = "1. Sourdough starters\\n2. Mountain trails\\n3. Old cameras"
"Write one post" = "Fresh bread from my oven this morning."
'exactly one of "like"' = "like"
'exactly one of "forward"' = "no operation"
'reply with "Comment content:"' = "Comment content: Lovely, thanks for sharing."
"Treat the profile as what you know" = "{nli}"
"You are grading a post" = '{{"informativeness": 3, "consistency": 2, "humanness": 3}}'
"You are grading a comment" = "grades: all good"
"That was not valid" = '{{"informativeness": 1, "consistency": 1, "humanness": 2}}'

[[populations]]
name = "initial"
count = 2
end_round = 1
activity = {{ model = "always" }}
personas = {{ name = "synthetic" }}
slots = {{ policy = "social_agent", planner = "none", reflector = "none", "memory.short_term" = "none" }}
config = {{ social_agent = {{ browse = false, initial_posts = 3 }} }}

[[populations]]
name = "regular"
count = 3
start_round = 1
activity = {{ model = "always" }}
personas = {{ name = "synthetic" }}
slots = {{ policy = "social_agent", planner = "none", reflector = "none", "memory.short_term" = "none" }}
config = {{ social_agent = {{ feed_size = 3, post_probability_without_plan = 0.5 }} }}
feed_stages = [
  {{ start_round = 1, end_round = 5, authors = ["initial"] }},
  {{ start_round = 5, authors = ["regular"] }},
]
"""


@pytest.fixture
def run(write_scenario, run_scenario, make_plugins):
    plugins = make_plugins(enable=[SCRIPTED])
    run_dir, summary = run_scenario(write_scenario(SCENARIO.format(nli="entailment")), plugins=plugins)
    assert summary.stopped is None
    return run_dir.path, plugins


def query(run_dir: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(run_dir / "events.sqlite")
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def personas(run_dir: Path) -> dict[str, str]:
    db = sqlite3.connect(run_dir / "events.sqlite")
    try:
        return {a.agent_id: evaluation_persona(a.persona) for a in tables.agents(db) if a.population == "regular"}
    finally:
        db.close()


def test_eval_zhou_numbers_match_the_trace(run):
    run_dir, plugins = run
    result = evaluate_run(str(run_dir), similarity="embedder", pairs=0, texts=0, plugins=plugins)
    assert result.regular == ["regular"] and [s.name for s in result.stages] == ["stage 1", "stage 2"]
    assert result.backends["similarity"] == "cosine of the run's embedder (hash)"
    assert result.backends["nli"] == "LLM NLI judge (scripted-test-model)"
    # stage 1 likes, from the trace: every browsed post of an initial agent was liked (the scripted "like")
    texts = {pid: (author, text) for pid, author, text in query(run_dir, "SELECT post_id, author_id, text FROM posts")}
    liked = sorted({(a, p) for a, p, r in query(run_dir, "SELECT agent_id, target_post, round FROM actions WHERE kind = 'like' AND ok = 1")
                    if 1 <= r < 5 and a.startswith("regular") and texts[p][0] != a})
    row = next(r for r in result.actions if r.stage == "stage 1" and r.action == "like")
    assert liked and row.pairs_acted == len(liked)
    who = personas(run_dir)
    embedder = HashEmbedder()
    import asyncio

    vectors = asyncio.run(embedder.embed([who[a] for a, _ in liked] + [texts[p][1] for _, p in liked]))
    expected = float(np.mean(np.sum(vectors[:len(liked)] * vectors[len(liked):], axis=1)))
    assert row.bs_acted == pytest.approx(expected, abs=1e-6)
    assert row.c_acted == 1.0 and row.judged_acted == len(liked)  # the judge said entailment every time
    # stage 1 reblogs: none (the scripted "no operation"), so everything browsed is "not reblog"
    reblog = next(r for r in result.actions if r.stage == "stage 1" and r.action == "reblog")
    assert reblog.pairs_acted == 0 and reblog.bs_acted is None and reblog.pairs_not > 0 and reblog.c_not == 1.0
    # distinct-n of stage-2 comments, and the text counts
    comments = [t for (t,) in query(run_dir, "SELECT text FROM posts WHERE reply_to IS NOT NULL AND round >= 5 AND author_id LIKE 'regular%'")]
    text = next(t for t in result.texts if t.stage == "stage 2" and t.kind == "comment")
    assert text.count == len(comments) > 0
    from townsquare.plugins.report.text_metrics import distinct_percent

    assert (text.distinct_1, text.distinct_2) == tuple(distinct_percent(comments).values())
    # fig. 6 over the regular agents only
    assert result.followers["agents"] == 3 and len(result.followers["counts"]) == 3


def test_judge_grades_with_repair_and_the_cli_writes_the_file(run, tmp_path):
    import subprocess
    import sys

    run_dir, plugins = run
    result = evaluate_run(str(run_dir), similarity="embedder", pairs=5, texts=4, plugins=plugins)
    posts = next(t for t in result.texts if t.stage == "stage 1" and t.kind == "post")
    assert posts.judged == min(4, posts.count) and (posts.informativeness, posts.consistency, posts.humanness) == (3.0, 2.0, 3.0)
    comments = next(t for t in result.texts if t.stage == "stage 1" and t.kind == "comment")
    assert comments.judged > 0 and (comments.informativeness, comments.consistency, comments.humanness) == (1.0, 1.0, 2.0)  # repaired
    assert all(r.pairs_acted <= 5 and r.pairs_not <= 5 for r in result.actions)
    # the judge's calls went through the run's cache: its prompts are stored there
    def cached() -> int:
        cache = sqlite3.connect(run_dir / "llm_cache.sqlite")
        try:
            return cache.execute("SELECT COUNT(*) FROM responses WHERE purpose LIKE 'zhou.%'").fetchone()[0]
        finally:
            cache.close()

    before = cached()
    evaluate_run(str(run_dir), similarity="embedder", pairs=5, texts=4, plugins=plugins)
    assert before > 0 and cached() == before  # the same evaluation again: every answer from the cache
    out = tmp_path / "z.json"
    done = subprocess.run([sys.executable, "-m", "townsquare.cli", "eval", "zhou", str(run_dir), "--similarity", "embedder",
                           "--pairs", "5", "--texts", "2", "--out", str(out), "-p", SCRIPTED], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "stage 1" in done.stdout and "ΔBS" in done.stdout and "knowledge adoption" in done.stdout
    saved = json.loads(out.read_text())
    assert saved["backends"]["judge"] == "LLM judge (scripted-test-model)" and len(saved["actions"]) == 8
    assert {"delta_bs", "delta_c"} <= set(saved["actions"][0])


def test_contradictions_give_negative_c_score(write_scenario, run_scenario, make_plugins):
    plugins = make_plugins(enable=[SCRIPTED])
    run_dir, _ = run_scenario(write_scenario(SCENARIO.format(nli="contradiction")), plugins=plugins)
    result = evaluate_run(str(run_dir.path), similarity="embedder", quality=False, pairs=3, texts=0, plugins=plugins)
    assert {r.c_acted for r in result.actions if r.pairs_acted} == {-1.0}
    assert result.backends["judge"] is None


def test_the_report_has_the_zhou_section(run):
    from townsquare.plugins.report.build import build_report

    run_dir, plugins = run
    path, notes = build_report(run_dir, plugins=plugins)
    page = path.read_text()
    assert '<section id="zhou">' in page and "Followers of the regular agents (fig. 6)" in page
    assert "computed for this report (no judge" in page and "cosine of the run&#x27;s embedder (hash)" in page
    result = evaluate_run(str(run_dir), similarity="embedder", pairs=0, texts=1, plugins=plugins)
    (run_dir / "zhou_eval.json").write_text(json.dumps(result.to_json()))
    page = build_report(run_dir, plugins=plugins)[0].read_text()
    assert "zhou_eval.json (townsquare eval zhou)" in page and "LLM NLI judge (scripted-test-model)" in page


def test_without_an_llm_only_the_judges_are_refused(write_scenario, run_scenario, make_plugins):
    from helpers import scenario_text
    from townsquare.api import UsageError

    run_dir, _ = run_scenario(write_scenario(scenario_text(rounds=3, count=3)), plugins=make_plugins())
    result = evaluate_run(str(run_dir.path), similarity="embedder", nli="none", quality=False)
    assert result.backends["nli"] is None and all(r.c_acted is None for r in result.actions)
    assert [s.name for s in result.stages] == ["all rounds"] and result.knowledge["rate"] is None
    with pytest.raises(UsageError, match="the run has no \\[llm\\] to judge with"):
        evaluate_run(str(run_dir.path), similarity="embedder")
    with pytest.raises(UsageError, match="--nli 'bert'"):
        evaluate_run(str(run_dir.path), nli="bert")


def test_eval_zhou_is_estimated_first_and_records_every_call(run, tmp_path, capsys, monkeypatch):
    run_dir, _ = run
    calls = count_scripted_calls(monkeypatch)
    args = ["eval", "zhou", str(run_dir), "--similarity", "embedder", "--pairs", "5", "--texts", "2", "-p", SCRIPTED]
    code, printed, err = cli(capsys, *args, "--estimate")
    assert code == 0, err
    assert calls == [] and not (run_dir / "zhou_eval.json").exists() and not (run_dir / "zhou_eval.sqlite").exists()
    estimated = int(printed.split("ESTIMATE: ")[1].split(" LLM calls")[0])
    assert estimated > 0 and "zhou.nli" in printed and "zhou.quality" in printed
    code, printed, err = cli(capsys, *args, "--out", str(tmp_path / "z.json"))
    assert code == 0, err
    db = sqlite3.connect(tmp_path / "z.sqlite")
    rows = db.execute("SELECT purpose, status FROM llm_calls").fetchall()
    db.close()
    # one row per call made (ok or error), and the estimate is every call but the repairs
    assert len([r for r in rows if r[1] in ("ok", "error")]) == len(calls) > 0
    assert estimated == sum(1 for purpose in calls if not purpose.endswith(".repair"))
    assert f"{len(rows)} LLM calls" in printed and "z.sqlite" in printed
    assert "note: the judge is scripted, the model the agents ran on" in printed
    # again: answered from the run's cache, and the table holds each answer once
    calls.clear()
    code, again, err = cli(capsys, *args, "--out", str(tmp_path / "z.json"))
    assert code == 0 and calls == [], err
    assert f"{len(rows)} LLM calls" in again and " 0 answered by the model" in again
    db = sqlite3.connect(tmp_path / "z.sqlite")
    assert db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0] == len(rows)
    db.close()


def test_a_budget_stop_names_the_eval_zhou_command(run, tmp_path, capsys):
    run_dir, _ = run
    code, _, err = cli(capsys, "eval", "zhou", str(run_dir), "--similarity", "embedder", "--pairs", "5", "--texts", "2",
                       "--set", "plugins.llm_budget.max_calls=3", "-p", SCRIPTED)
    assert code == 3 and "Traceback" not in err, err
    assert f"raise it with: townsquare eval zhou {run_dir} " in err and err.strip().endswith("--set plugins.llm_budget.max_calls=6")
    db = sqlite3.connect(run_dir / "zhou_eval.sqlite")
    assert db.execute("SELECT COUNT(*) FROM llm_calls WHERE status = 'ok'").fetchone()[0] == 3
    db.close()


def test_likes_decided_by_the_similarity_rule_make_delta_bs_circular_and_say_so(write_scenario, run_scenario, make_plugins):
    from helpers import scenario_text
    from townsquare.plugins.report.build import build_report
    from townsquare.plugins.report.zhou_text import format_result

    run_dir, _ = run_scenario(write_scenario(scenario_text(rounds=4, count=4)), plugins=make_plugins())
    result = evaluate_run(str(run_dir.path), similarity="embedder", nli="none", quality=False)
    assert result.circular["like"]["by_similarity"] == result.circular["like"]["sessions"] > 0
    assert result.circular["comment"]["by_similarity"] == 0
    warning = next(n for n in result.notes if n.startswith("CIRCULAR: like"))
    assert "positive by construction" in warning
    assert "WARNING: CIRCULAR: like" in format_result(result)
    (run_dir.path / "zhou_eval.json").write_text(json.dumps(result.to_json()))
    page = build_report(run_dir.path)[0].read_text()
    assert "<strong>CIRCULAR: like was decided by the persona-post similarity rule" in page


def test_without_feed_stages_agents_that_never_browsed_are_initial_agents(write_scenario, run_scenario, make_plugins):
    plugins = make_plugins(enable=[SCRIPTED])
    unstaged = SCENARIO.format(nli="entailment").split("feed_stages = [")[0]
    run_dir, _ = run_scenario(write_scenario(unstaged), plugins=plugins)
    result = evaluate_run(str(run_dir.path), similarity="embedder", nli="none", quality=False, plugins=plugins)
    # the initial agents (browse = false) only seeded the sandbox: they are not evaluated
    assert result.regular == ["regular"] and [s.name for s in result.stages] == ["all rounds"]
    assert result.followers["agents"] == 3
