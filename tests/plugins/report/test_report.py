"""``townsquare report RUN`` on real runs: every section renders, its numbers match ones computed
here straight from ``events.sqlite``, and the page is self-contained."""

from __future__ import annotations

import base64
from html import escape
import json
import re
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from helpers import ROOT, scenario_text
from townsquare import hookimpl
from townsquare.actions import Action
from townsquare.specs import PolicySpec

REPORT_PLUGIN = "townsquare.plugins.report.run_report"
SCRIPTED = "townsquare.testing.scripted"
SECTIONS = ("At a glance", "Key numbers", "Actions by kind", "Followers", "Actions", "Posts and comments", "Text diversity",
            "Persona similarity", "Groundedness", "LLM calls", "Run", "Slot table")
#: the page's order: what happened first, how the run was set up last
ORDER = ["headline", "followers", "actions", "sample", "text", "similarity", "groundedness", "zhou", "llm", "health", "run"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True)


def query(run_dir: Path, sql: str, params: tuple = ()) -> list[tuple]:
    db = sqlite3.connect(run_dir / "events.sqlite")
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text.lower())


def distinct(texts: list[str], n: int) -> float:
    """Li et al. (2016): distinct n-grams over all tokens."""
    grams = [tuple(t[i:i + n]) for t in map(tokens, texts) for i in range(len(t) - n + 1)]
    return round(100 * len(set(grams)) / sum(len(tokens(t)) for t in texts), 2)


def num(html: str, label: str) -> str:
    """The first number cell after a cell holding ``label``."""
    match = re.search(rf"<td>{re.escape(label)}</td><td class=\"num\">([^<]+)</td>", html)
    assert match, f"no number next to {label!r}"
    return match.group(1)


def section(html: str, anchor: str) -> str:
    match = re.search(rf'<section id="{anchor}">.*?</section>', html, re.S)
    assert match, anchor
    return match.group(0)


def followers_from_trace(run_dir: Path) -> Counter:
    edges: set[tuple[str, str]] = set()
    for follower, followee, kind in query(run_dir, "SELECT follower, followee, kind FROM follows ORDER BY seq"):
        (edges.add if kind == "follow" else edges.discard)((follower, followee))
    return Counter(followee for _, followee in edges)


def check_self_contained(html: str) -> None:
    assert "<script" not in html.lower()
    assert not re.search(r"(src|href)=\"(?!data:image/png;base64,|#)", html), "external resource"
    assert "http://" not in html and "https://" not in html
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert images
    for data in images:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"


def check_last_metrics(run_dir: Path, html: str) -> None:
    """The activity metric asked the platform for follower counts at the last round: the
    report's replay of the follows table must agree."""
    last = query(run_dir, "SELECT MAX(round) FROM metrics")[0][0]
    metrics = dict(query(run_dir, "SELECT name, value FROM metrics WHERE round = ?", (last,)))
    agents = query(run_dir, "SELECT COUNT(*) FROM agents")[0][0]
    assert int(num(html, "follow edges at the end").replace(",", "")) == round(metrics["activity.followers.mean"] * agents)
    assert int(num(section(html, "followers"), "max")) == int(metrics["activity.followers.max"])


# --------------------------------------------------------------------------- embedding baseline, CLI


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """examples/baseline.toml, shortened, run and reported through the command line."""
    tmp = tmp_path_factory.mktemp("report")
    run_dir = tmp / "run"
    out = cli("run", str(ROOT / "examples" / "baseline.toml"), "--out", str(run_dir), "--set", "rounds=16", "--quiet")
    assert out.returncode == 0, out.stderr
    rep = cli("report", str(run_dir), "-p", REPORT_PLUGIN)
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.strip() == str(run_dir / "report.html")
    return run_dir, (run_dir / "report.html").read_text(encoding="utf-8")


def test_baseline_report_has_every_section_and_is_self_contained(baseline):
    run_dir, html = baseline
    for title in SECTIONS:
        assert re.search(rf">{title}[^<]*</h[23]>", html), title
    assert re.findall(r'<section id="([^"]+)">', html) == ORDER
    check_self_contained(html)
    # actions over time and the main metrics (headline), followers, similarity (no LLM plot)
    assert len(re.findall(r"<img ", html)) == 4
    assert "no LLM calls in this run" in html
    assert html.count("none in this run") >= 2  # comments: distinct and similarity


def test_baseline_headline_leads_with_what_happened(baseline):
    from townsquare.plugins.report.groundedness import run_summary_line

    run_dir, html = baseline
    top = section(html, "headline")
    assert "<strong class=\"status-finished\">Finished</strong>: 16 of 16 rounds, " in top
    # key numbers and actions by kind sit in the headline, with the trace's numbers
    posts = query(run_dir, "SELECT COUNT(*) FROM posts WHERE reply_to IS NULL")[0][0]
    assert posts > 0 and f"<td>posts / comments</td><td>{posts:,} / 0</td>" in top
    for kind, n in query(run_dir, "SELECT kind, COUNT(*) FROM actions WHERE ok = 1 GROUP BY kind"):
        assert f'<td>{kind}</td><td class="num">{n:,}</td>' in top, kind
    assert f"<p>{escape(run_summary_line(run_dir))}</p>" in top
    assert 'alt="actions over time"' in top and 'alt="main metrics over rounds"' in top
    assert "persona margin of posts (groundedness.posts.margin)" in top and "follower Gini (activity.followers.gini)" in top
    assert f"<code>townsquare serve {run_dir}</code>" in top
    # the run's metadata and slot table come last
    assert html.index('<section id="run">') > html.index('<section id="llm">')
    assert "persona.context" not in top


def test_baseline_groundedness_section_shows_the_metric(baseline):
    run_dir, html = baseline
    part = section(html, "groundedness")
    last = query(run_dir, "SELECT MAX(round) FROM metrics")[0][0]
    metrics = dict(query(run_dir, "SELECT name, value FROM metrics WHERE round = ? AND name LIKE 'groundedness.%'", (last,)))
    assert num(part, "persona margin of posts (own − others)") == f"{metrics['groundedness.posts.margin']:.4f}"
    assert float(num(part, "AUC of persona–post cosine for liked vs not liked")) == 1.0  # a threshold rule


def test_baseline_header_shows_run_and_slot_table(baseline):
    run_dir, html = baseline
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert "townsquare report: baseline" in html and "16 of 16 rounds" in html and "seed 7" in html
    assert "<td>rounds=16</td>" in html
    for row in manifest["slot_table"]:
        assert f"<td>{row['scope']}</td><td>{row['slot']}</td><td>{row['component']}</td>" in html
    # empty slots (no persona.context in this run) are marked
    assert '<tr class="ablated"><td>users</td><td>persona.context</td><td>-</td>' in html


def test_baseline_followers_match_the_trace_and_the_platform(baseline):
    run_dir, html = baseline
    counts = followers_from_trace(run_dir)
    assert sum(counts.values()) > 0, "the run should make some follows"
    assert int(num(html, "follow edges at the end").replace(",", "")) == sum(counts.values())
    agents = query(run_dir, "SELECT COUNT(*) FROM agents")[0][0]
    zero = agents - len(counts)
    assert f"<td>agents with no follower</td><td>{zero} of {agents}</td>" in html
    top_agent, top_n = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    assert re.search(rf'<td class="num">1</td><td>{top_agent}</td><td>[^<]+</td><td class="num">{top_n}</td>', html)
    check_last_metrics(run_dir, html)


def test_baseline_actions_and_distinct(baseline):
    run_dir, html = baseline
    for kind, n in query(run_dir, "SELECT kind, COUNT(*) FROM actions WHERE ok = 1 GROUP BY kind"):
        assert re.search(rf'<td>{kind}</td><td class="num">{n:,}</td>', section(html, "actions")), kind
    posts = [t for (t,) in query(run_dir, "SELECT text FROM posts WHERE reply_to IS NULL")]
    assert posts
    expected = f"{distinct(posts, 1):.2f} / {distinct(posts, 2):.2f}"
    assert num(html, "distinct-1 / distinct-2 of posts (%)") == expected
    assert re.search(rf'<td>posts</td><td class="num">{len(posts)}</td><td class="num">[\d,]+</td>'
                     rf'<td class="num">{distinct(posts, 1):.2f}</td><td class="num">{distinct(posts, 2):.2f}</td>', html)


def test_baseline_engaged_posts_fit_the_persona_better(baseline):
    _, html = baseline
    part = section(html, "similarity")
    assert "Embedder: hash" in part
    assert float(num(part, "like")) > float(num(part, "not like"))
    assert float(num(part, "engaged (like, reblog or comment)")) > float(num(part, "browsed only"))
    assert float(num(part, "reblog")) > float(num(part, "like"))  # reblogs need a higher cosine


def test_like_similarity_matches_the_policys_own_cosines(make_plugins, write_scenario, run_scenario):
    """The embedding baseline stores cos(persona, post) of every like in the action's detail,
    computed with the run's embedder: the report, which rebuilds that embedder from the
    manifest, must find the same mean (per agent, then over agents). Personas without
    ``fields`` here: the agents table stores fields with sorted keys, so a persona's text is
    rebuilt exactly only when it has none or one."""
    from townsquare.plugins.report.build import build_report

    plugins = make_plugins(strict=False)
    run, _ = run_scenario(write_scenario(scenario_text(rounds=8, count=6)), plugins=plugins)
    run_dir = run.path
    path, notes = build_report(run_dir, plugins=plugins)
    assert notes == []
    authors = dict(query(run_dir, "SELECT post_id, author_id FROM posts"))
    similarities: dict[str, dict[str, dict[str, float]]] = {"like": defaultdict(dict), "reblog": defaultdict(dict)}
    query_actions = "SELECT kind, agent_id, target_post, detail FROM actions WHERE kind IN ('like', 'reblog') AND ok = 1"
    for kind, agent, post, detail in query(run_dir, query_actions):
        if authors.get(post) != agent:
            similarities[kind][agent][post] = json.loads(detail)["similarity"]
    part = section(path.read_text(encoding="utf-8"), "similarity")
    for kind, by_agent in similarities.items():
        assert by_agent, kind
        expected = sum(sum(v.values()) / len(v) for v in by_agent.values()) / len(by_agent)
        assert float(num(part, kind)) == pytest.approx(expected, abs=2e-4), kind
        assert re.search(rf'<td>{kind}</td><td class="num">[-\d.]+</td><td class="num">[-\d.]+</td>'
                         rf'<td class="num">{len(by_agent)}</td><td class="num">{sum(map(len, by_agent.values()))}</td>', part)


# --------------------------------------------------------------------------- LLM calls, CLI


def test_llm_calls_section(tmp_path):
    # Ada's like/skip answers are unusable, and so are the repairs: a parse_failure each time.
    extra = ('[plugins.scripted]\npolicy_post_probability = 1.0\n'
             'rules = { "^You are Ada" = "perhaps", "^Answer with exactly" = "perhaps" }\n')
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=4, count=3, policy="scripted_feed", llm=True, extra=extra))
    run_dir = tmp_path / "run"
    out = cli("run", str(scenario), "--out", str(run_dir), "-p", SCRIPTED, "--quiet")
    assert out.returncode == 0, out.stderr
    rep = cli("report", str(run_dir), "-p", REPORT_PLUGIN, "--out", str(tmp_path / "r.html"))
    assert rep.returncode == 0, rep.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    check_self_contained(html)

    statuses = dict(query(run_dir, "SELECT status, COUNT(*) FROM llm_calls GROUP BY status"))
    assert statuses.get("parse_failure", 0) > 0 and statuses["ok"] > 0
    calls = sum(n for s, n in statuses.items() if s != "parse_failure")
    assert num(html, "LLM calls") == f"{calls:,}"
    assert num(html, "calls to the provider (ok + cached + error)") == f"{calls:,}"
    for status, n in statuses.items():
        assert f'<td>{status}</td><td class="num">{n:,}</td>' in html
    prompt, completion = query(run_dir, "SELECT SUM(prompt_tokens), SUM(completion_tokens) FROM llm_calls WHERE status != 'parse_failure'")[0]
    assert num(html, "prompt tokens") == f"{prompt:,}" and num(html, "completion tokens") == f"{completion:,}"
    for purpose, n in query(run_dir, "SELECT purpose, COUNT(*) FROM llm_calls WHERE status != 'parse_failure' GROUP BY purpose"):
        assert f'<td>{purpose}</td><td class="num">{n:,}</td>' in html
    assert "like.repair" in html
    assert len(re.findall(r"<img ", html)) == 5  # + LLM calls and tokens
    assert num(section(html, "headline"), "LLM answers that failed to parse") == f"{statuses['parse_failure']:,}"
    assert "no LLM calls in this run" not in html
    answered, cached = query(run_dir, "SELECT SUM(prompt_tokens), SUM(cached_prefix_tokens) FROM llm_calls WHERE status IN ('ok', 'cached')")[0]
    assert 0 < cached < answered
    assert f"cacheable prompt prefix: {cached:,} of {answered:,} prompt tokens ({cached / answered:.1%}" in html


# --------------------------------------------------------------------------- comments and follows, API


class Commenter:
    """Test policy: browse, comment on the first of other agents' posts, post a persona sentence,
    follow the first author it sees on even rounds and unfollow it on odd ones."""

    def __init__(self, config, ctx):
        self.following: list[str] = []

    async def step(self, ctx):
        me = ctx.agent.id
        feed = [p for p in await ctx.home_timeline(6) if p.author_id != me and p.reply_to is None]
        actions = [Action(me, "browse", post_ids=tuple(p.id for p in feed))] if feed else []
        for post in feed[:1]:
            actions.append(Action(me, "comment", target_post=post.id, text=f"Round {ctx.round}: so true about {post.text.split()[-1]}"))
        if feed and ctx.round % 2 == 0:
            actions.append(Action(me, "follow", target_agent=feed[0].author_id))
            self.following.append(feed[0].author_id)
        elif self.following and ctx.round % 2 == 1:
            actions.append(Action(me, "unfollow", target_agent=self.following.pop()))
        sentences = ctx.agent.persona.sentences
        actions.append(Action(me, "post", text=sentences[ctx.round % len(sentences)]))
        return actions

    def get_state(self):
        return {"following": self.following}

    def set_state(self, state):
        self.following = list(state["following"])


class CommenterPlugin:
    plugin_name = "commenter_policy"

    @hookimpl
    def townsquare_register_policies(self):
        return [PolicySpec("commenter", Commenter)]


@pytest.fixture
def comment_run(make_plugins, write_scenario, run_scenario):
    plugins = make_plugins(CommenterPlugin(), strict=False)
    run_dir, summary = run_scenario(write_scenario(scenario_text(rounds=5, count=3, policy="commenter")), plugins=plugins)
    assert summary.counts.get("comment", 0) > 0 and summary.counts.get("unfollow", 0) > 0
    return run_dir.path, plugins


def test_comments_follows_and_similarity(comment_run):
    from townsquare.plugins.report.build import build_report

    run_dir, plugins = comment_run
    path, notes = build_report(run_dir, plugins=plugins)
    assert path == run_dir / "report.html" and notes == []
    html = path.read_text(encoding="utf-8")
    comments = [t for (t,) in query(run_dir, "SELECT text FROM posts WHERE reply_to IS NOT NULL")]
    assert num(html, "distinct-1 / distinct-2 of comments (%)") == f"{distinct(comments, 1):.2f} / {distinct(comments, 2):.2f}"
    assert re.search(rf'<td>comments</td><td class="num">{len(comments)}</td>', html)
    # the comment rows of the similarity table are filled in now
    n_agents = len({a for (a,) in query(run_dir, "SELECT agent_id FROM actions WHERE kind = 'comment' AND ok = 1")})
    assert re.search(rf'<td>comment</td><td class="num">[-\d.]+</td><td class="num">[-\d.]+</td><td class="num">{n_agents}</td>',
                     section(html, "similarity"))
    # follows and unfollows replayed = what the platform counted at the end
    counts = followers_from_trace(run_dir)
    assert int(num(html, "follow edges at the end")) == sum(counts.values())
    check_last_metrics(run_dir, html)
    # the sample: the most commented post first, its author with the persona, its comments with theirs
    sample = section(html, "sample")
    [(post_id, author, text)] = query(run_dir, "SELECT p.post_id, p.author_id, p.text FROM posts p JOIN posts c ON c.reply_to = p.post_id "
                                               "GROUP BY p.post_id ORDER BY COUNT(*) DESC, p.round, p.rowid LIMIT 1")
    [(name, persona)] = query(run_dir, "SELECT name, persona FROM agents WHERE agent_id = ?", (author,))
    first = sample.index("<blockquote>")
    assert name in sample[:first] and json.loads(persona)["sentences"][0][:40] in sample[:first].replace("&#x27;", "'")
    assert text.replace("'", "&#x27;") in sample[first:first + len(text) + 40]
    commenter_text = query(run_dir, "SELECT text FROM posts WHERE reply_to = ? ORDER BY round LIMIT 1", (post_id,))[0][0]
    assert commenter_text in sample and "(copies the post)" not in sample  # "so true about X" takes one word of the post


def test_similarity_skipped_when_the_runs_plugins_are_missing(comment_run, tmp_path):
    run_dir, _ = comment_run
    out = cli("report", str(run_dir), "-p", REPORT_PLUGIN, "--out", str(tmp_path / "a.html"))
    assert out.returncode == 0, out.stderr
    assert "note: persona similarity not computed:" in out.stderr and "commenter" in out.stderr
    html = (tmp_path / "a.html").read_text(encoding="utf-8")
    assert "Persona similarity not computed" in html and "<td>comments</td>" in html

    out = cli("report", str(run_dir), "-p", REPORT_PLUGIN, "--out", str(tmp_path / "b.html"), "--no-similarity")
    assert out.returncode == 0 and "note:" not in out.stderr
    assert "not computed (--no-similarity)" in (tmp_path / "b.html").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("make", ["missing", "empty_dir", "file"])
def test_not_a_run_directory_is_one_line_exit_2(tmp_path, make):
    target = tmp_path / "x"
    if make == "empty_dir":
        target.mkdir()
    elif make == "file":
        target.write_text("hi")
    out = cli("report", str(target), "-p", REPORT_PLUGIN)
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if "plugin.failed" not in line]
    assert lines == [f"error: {target}: not a run directory (no manifest.json)"]


def test_out_in_a_missing_folder_is_one_line_exit_2(comment_run, tmp_path):
    run_dir, _ = comment_run
    out = cli("report", str(run_dir), "-p", REPORT_PLUGIN, "--no-similarity", "--out", str(tmp_path / "nope" / "r.html"))
    assert out.returncode == 2
    assert [line for line in out.stderr.splitlines() if "plugin.failed" not in line] == [
        f"error: --out {tmp_path / 'nope' / 'r.html'}: folder {tmp_path / 'nope'} does not exist"]


def test_a_stopped_run_says_why_and_how_to_continue_first(make_plugins, write_scenario, run_scenario):
    from townsquare.plugins.report.build import build_report

    plugins = make_plugins(enable=[SCRIPTED])
    scenario = write_scenario(scenario_text(rounds=4, count=3, policy="scripted_feed", llm=True,
                                            extra="[plugins.llm_budget]\nmax_calls = 3\n"))
    run, summary = run_scenario(scenario, plugins=plugins)
    assert summary.stopped and summary.rounds_completed < 4
    page = build_report(run.path, with_similarity=False, plugins=plugins)[0].read_text(encoding="utf-8")
    top = section(page, "headline")
    assert f'<strong class="status-stopped">Stopped</strong> after {summary.rounds_completed} of 4 rounds, 3 agents: ' in top
    assert escape(summary.stopped) in top and f"Continue with <code>townsquare resume {run.path}</code>." in top
    assert page.index("Stopped</strong>") < page.index('<section id="followers">')
