"""``townsquare serve RUN`` without a browser: every page over a finished quickstart run (on the
scripted test model) shows the numbers ``events.sqlite`` holds; the recsys and town pages over
run directories written here with the event store; a live run is read without its lock and
its new rounds show; the interview endpoint answers; bad input is one line and exit 2.

The browser tests are in test_dashboard_browser.py; they reuse :func:`quickstart_run`."""

from __future__ import annotations

import html
import json
import re
import select
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import ROOT

pytest.importorskip("starlette")
pytest.importorskip("httpx")  # Starlette's TestClient

from starlette.testclient import TestClient  # noqa: E402

from townsquare.cli import main  # noqa: E402
from townsquare.plugins.dashboard.agent_page import reflections_view  # noqa: E402
from townsquare.plugins.dashboard.app import make_app  # noqa: E402
from townsquare.plugins.dashboard.follower_graph import layout  # noqa: E402
from townsquare.plugins.dashboard.run_reader import Memory  # noqa: E402
from townsquare.plugins.dashboard.svg_chart import line_chart, nice_ticks  # noqa: E402
from townsquare.launch.run_lock import create, locked  # noqa: E402
from townsquare.rundir import RunDir  # noqa: E402
from townsquare.store import EventStore  # noqa: E402

QUICKSTART = ROOT / "examples" / "quickstart.toml"
SCRIPTED = "townsquare.testing.scripted"
#: the scripted model writes a comment whenever the comment prompt asks (Zhou table 7's format)
COMMENT_RULE = 'llm.rules={ "Comment content" = "Comment content: That is a fair point, thanks for sharing." }'
#: hang guard for the served subprocess to print its address: far above the second it takes
START_S = 120


#: where a browser on this machine reaches the dashboard (its Host header)
LOCAL = "http://127.0.0.1:8000"


def local(app) -> TestClient:
    """A client that asks as a page of the dashboard on this machine does."""
    return TestClient(app, base_url=LOCAL)


def quickstart_run(out: Path, rounds: int = 12) -> Path:
    """The quickstart scenario (11 agents; follows come with the 2-day reflection) on the
    scripted test model: seconds, not the offline model's minutes."""
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.runner import start_run

    run_dir, summary = start_run(QUICKSTART, out=out, plugin_options=[SCRIPTED], plugins=make_plugin_manager(enable=[SCRIPTED]),
                                 overrides=["llm.name=scripted", COMMENT_RULE, f"rounds={rounds}"])
    assert summary.stopped is None
    return run_dir.path


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return quickstart_run(tmp_path_factory.mktemp("dashboard") / "quick")


@pytest.fixture(scope="module")
def client(run) -> TestClient:
    return local(make_app(run))


def query(run: Path, sql: str, params: tuple = ()) -> list[tuple]:
    db = sqlite3.connect(run / "events.sqlite")
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def section(html: str, anchor: str) -> str:
    match = re.search(rf'<section id="{anchor}">.*?</section>', html, re.S)
    assert match, anchor
    return match.group(0)


# --------------------------------------------------------------------------- the pages


def test_timeline_shows_the_newest_posts_with_their_likes_reblogs_and_comments(run, client):
    top = query(run, "SELECT post_id FROM posts WHERE reply_to IS NULL ORDER BY round DESC, rowid DESC")
    assert len(top) > 10
    page = client.get("/").text
    shown = re.findall(r'<article class="post" id="post-[^"]+" data-post="([^"]+)"', page)
    assert shown == [p for (p,) in top[:30]]
    assert "older →" not in page or len(top) > 30
    for post_id in shown:
        card = re.search(rf'data-post="{re.escape(post_id)}">.*?</article>', page, re.S).group(0)
        for kind in ("like", "reblog"):
            [(n,)] = query(run, "SELECT COUNT(*) FROM actions WHERE ok = 1 AND kind = ? AND target_post = ?", (kind, post_id))
            assert re.search(rf'class="{kind}s">{n} {kind}s?<', card), (post_id, kind, n)
        comments = query(run, "SELECT text FROM posts WHERE reply_to = ?", (post_id,))
        assert card.count('class="comment"') == len(comments)
    assert query(run, "SELECT COUNT(*) FROM posts WHERE reply_to IS NOT NULL")[0][0] > 0, "the run has comments to show"
    assert 'class="comment"' in page


def test_timeline_pages_through_older_posts(run, client):
    [(total,)] = query(run, "SELECT COUNT(*) FROM posts WHERE reply_to IS NULL")
    assert 10 < total
    older = client.get("/?offset=10").text
    assert f"11–{total} of {total}" in older and older.count('<article class="post"') == total - 10
    assert 'href="/?offset=0">← newer' in older and "older →" not in older


def test_agents_page_lists_every_agent_with_its_counts(run, client):
    page = client.get("/agents").text
    agents = query(run, "SELECT agent_id FROM agents")
    assert len(re.findall(r'href="/agents/[^"]+" class="agent"', page)) == len(agents) == 11
    author, posts = query(run, "SELECT author_id, COUNT(*) FROM posts GROUP BY author_id ORDER BY 2 DESC LIMIT 1")[0]
    assert re.search(rf"<td>{author}</td><td>[^<]+</td><td>{posts}</td>", page)


def test_agent_page_shows_persona_slots_follows_memories_and_actions(run, client):
    [(agent, persona)] = query(run, "SELECT agent_id, persona FROM agents WHERE agent_id IN "
                                    "(SELECT follower FROM follows) ORDER BY idx LIMIT 1")
    page = client.get(f"/agents/{agent}").text
    for sentence in json.loads(persona)["sentences"]:
        assert sentence.replace("'", "&#x27;") in section(page, "persona")
    manifest = json.loads((run / "manifest.json").read_text())
    population = query(run, "SELECT population FROM agents WHERE agent_id = ?", (agent,))[0][0]
    policy = next(r["component"] for r in manifest["slot_table"] if r["scope"] == population and r["slot"] == "policy")
    assert f"<td>policy</td><td>{policy}</td>" in section(page, "slots")
    followees = [b for (b,) in query(run, "SELECT followee FROM follows WHERE follower = ? AND kind = 'follow'", (agent,))]
    follows = section(page, "follows")
    assert followees and all(f'href="/agents/{b}"' in follows for b in followees)
    [(n_actions,)] = query(run, "SELECT COUNT(*) FROM actions WHERE agent_id = ?", (agent,))
    assert section(page, "actions").count("<tr>") - 1 == min(n_actions, 40)
    assert "From the checkpoint after round 11." in section(page, "reflections")
    # what the run made: the follow reflection's rows, the activity plan the agent kept
    reflections = query(run, "SELECT COUNT(*) FROM reflections WHERE agent_id = ?", (agent,))[0][0]
    assert reflections and section(page, "reflections").count("<td>follow_reflection</td>") == reflections
    assert "posts_per_week" in section(page, "plans") and "no plan in the checkpoint" not in section(page, "plans")
    assert section(page, "memories").count("<li>") > 0  # the action memory's records
    assert 'id="interview"' in page and f'data-agent="{agent}"' in page


def test_an_unknown_agent_is_a_404_page(client):
    response = client.get("/agents/nobody")
    assert response.status_code == 404 and "No such page" in response.text


def test_graph_has_a_node_per_agent_and_an_arrow_per_follow_edge_now(run, client):
    edges = set()
    for follower, followee, kind in query(run, "SELECT follower, followee, kind FROM follows ORDER BY seq"):
        (edges.add if kind == "follow" else edges.discard)((follower, followee))
    page = client.get("/graph").text
    assert page.count('class="node"') == 11
    drawn = set(re.findall(r'marker-end="url\(#arrow\)"><title>([^<]+) follows ([^<]+)</title>', page))
    assert drawn == edges and edges


def test_metrics_page_plots_actions_and_every_metric(run, client):
    page = client.get("/metrics").text
    metrics = {name.split(".")[0] for (name,) in query(run, "SELECT DISTINCT name FROM metrics")}
    assert metrics
    for metric in metrics:
        assert f'aria-label="{metric}' in page
    assert 'aria-label="Accepted actions per round, by kind"' in page
    # a rate never shares an axis with a count: groundedness's like rate and its decisions are two panels
    assert re.search(r'aria-label="groundedness: [^"]*likes\.rate', page) and re.search(r'aria-label="groundedness: [^"]*likes\.decisions', page)
    assert not re.search(r'aria-label="groundedness: [^"]*likes\.rate[^"]*likes\.decisions', page)


def test_series_of_one_scale_share_a_panel():
    from townsquare.plugins.dashboard.run_pages import by_scale

    panels = by_scale({"rate": {0: 0.2, 1: 0.4}, "decisions": {0: 40.0, 1: 111.0}, "auc": {1: 0.9}, "posts": {0: 12.0, 1: 30.0},
                       "tiny": {0: 0.0}, "huge": {0: 50_000.0}})
    assert [sorted(p) for p in panels] == [["huge"], ["decisions", "posts"], ["auc", "rate", "tiny"]]


def test_llm_page_totals_match_the_store(run, client):
    page = client.get("/llm").text
    [(calls, prompt, completion)] = query(run, "SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens) FROM llm_calls "
                                               "WHERE status != 'parse_failure'")
    assert f"<b>{calls:,}</b><span>calls</span>" in page and f"<b>{calls:,}</b><span>LLM calls</span>" in page  # the run bar too
    assert f"<b>{prompt:,}</b><span>prompt tokens</span>" in page
    assert f"<b>{completion:,}</b><span>completion tokens</span>" in page
    newest = query(run, "SELECT seq FROM llm_calls ORDER BY seq DESC LIMIT 1")[0][0]
    assert f"<td>{newest}</td>" in page
    # the mean latency over every call, the number the report shows (one computation)
    [(latency,)] = query(run, "SELECT AVG(latency_ms) FROM llm_calls WHERE status != 'parse_failure'")
    assert f"<b>{latency:,.1f} ms</b><span>mean latency</span>" in page


def test_social_media_run_hides_the_recsys_and_town_pages(client):
    page = client.get("/").text
    assert 'href="/graph"' in page and 'href="/recsys"' not in page and 'href="/town"' not in page


def test_a_fragment_carries_the_run_bar_and_content_and_the_version_is_stable(client):
    data = client.get("/agents?fragment=1").json()
    assert set(data) == {"version", "title", "runbar", "content"}
    assert 'data-status="finished"' in data["runbar"] and "12 of 12" in data["runbar"]
    assert client.get("/api/version").json()["version"] == client.get("/api/version").json()["version"] == data["version"]


def test_static_files_are_the_packages_own(client):
    page = client.get("/").text
    assert re.findall(r'(?:src|href)="(https?:[^"]+)"', page) == []
    assert "fetch(" in client.get("/static/dashboard.js").text
    assert client.get("/static/dashboard.css").status_code == 200


# --------------------------------------------------------------------------- interviews


def test_interview_endpoint_answers_on_the_runs_model_and_the_agent_page_lists_it(run, client):
    response = client.post("/api/interview", json={"agent": "regular-0002", "question": "What did you read today?"})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["round"] == 11 and answer["model"] == "scripted-test-model"
    assert answer["answer"].startswith("a scripted reply about")
    stored = [json.loads(line) for line in (run / "interviews.jsonl").read_text().splitlines()]
    assert stored[-1]["answer"] == answer["answer"] and stored[-1]["agent_id"] == "regular-0002"
    assert "What did you read today?" in section(client.get("/agents/regular-0002").text, "interviews")


@pytest.mark.parametrize("body,message", [
    ({"agent": "nobody", "question": "hi?"}, "no agent 'nobody' in the run"),
    ({"agent": "regular-0001", "question": "  "}, "name an agent and ask a question"),
    ({"question": "hi?"}, "name an agent and ask a question"),
    ({"agent": "regular-0001", "question": "x" * 3000}, "longer than 2000 characters"),
])
def test_interview_bad_input_is_one_line(client, body, message):
    response = client.post("/api/interview", json=body)
    assert response.status_code == 400 and message in response.json()["error"]


def test_interview_body_that_is_not_json(client):
    response = client.post("/api/interview", content=b"<html>", headers={"content-type": "application/json"})
    assert response.status_code == 400 and "send JSON" in response.json()["error"]


# --------------------------------------------------------------------------- live and platform runs


def write_run(path: Path, platform: str, status: str = "finished") -> tuple[RunDir, EventStore]:
    """A run directory written with the real event store, round by round, as the engine does."""
    run = create(path, "made")
    run.write_manifest({"name": "made", "rounds": 3, "status": status, "scenario": {"platform": {"name": platform}},
                        "slot_table": [{"scope": "users", "slot": "policy", "component": "p", "plugin": "p"}]})
    store = EventStore(run.events_path)
    store.add_agents([(f"u{i}", i, "users", f"User {i}", json.dumps({"name": f"User {i}"}), 1.0, 0, None) for i in range(3)])
    return run, store


def action(round: int, agent: str, kind: str, target_post=None, target_agent=None, text=None, detail=None) -> tuple:
    return (round, f"2024-01-01T0{round}:00:00", agent, kind, target_post, target_agent, text, None, 1, None, None,
            json.dumps(detail) if detail else None)


def test_live_run_is_read_without_its_lock_and_a_new_round_shows(tmp_path):
    run, store = write_run(tmp_path / "live", "in_memory", status="running")
    store.buffer("posts", ("p1", "u0", 0, "2024-01-01T00:00:00", "first post", None, None))
    store.commit_round((0, "2024-01-01T00:00:00", 3, 1, 0, 0.01))
    with locked(run):  # the writer holds the run, as townsquare run does
        client = local(make_app(run.path))
        before = client.get("/api/version").json()["version"]
        page = client.get("/").text
        assert 'data-status="live"' in page and "first post" in page and 'data-round="0"' in page
        store.buffer("posts", ("p2", "u1", 1, "2024-01-01T01:00:00", "second post", None, None))
        store.commit_round((1, "2024-01-01T01:00:00", 3, 1, 0, 0.01))
        assert client.get("/api/version").json()["version"] != before
        fragment = client.get("/?fragment=1").json()
        assert "second post" in fragment["content"] and 'data-round="1"' in fragment["runbar"]
    store.close()
    # the writer is gone but the manifest still says running: an interrupted run, not a live one
    assert 'data-status="not running (interrupted; resume it)"' in local(make_app(run.path)).get("/").text


def test_a_run_still_being_built_has_pages_that_wait(tmp_path):
    run = create(tmp_path / "new", "new")
    run.write_manifest({"name": "new", "rounds": 3, "status": "running", "scenario": {}})
    client = local(make_app(run.path))
    for path in ("/", "/agents", "/graph", "/metrics", "/llm"):
        response = client.get(path)
        assert response.status_code == 200 and "has not written its first rows yet" in response.text


def test_recsys_page_shows_watches_by_genre_and_chats(tmp_path):
    run, store = write_run(tmp_path / "rec", "recsys")
    store.buffer("actions", action(0, "u0", "watch", target_post="m1", text="loved it", detail={"genres": ["Drama"], "rating": 8}))
    store.buffer("actions", action(0, "u1", "watch", target_post="m2", detail={"genres": ["Drama", "War"], "rating": 6}))
    store.buffer("actions", action(1, "u1", "chat", target_agent="u2", text="watch m2 with me"))
    store.buffer("actions", action(1, "u2", "broadcast", text="m1 is great"))
    store.commit_round((0, "2024-01-01T00:00:00", 3, 4, 0, 0.01))
    store.close()
    client = local(make_app(run.path))
    page = client.get("/recsys").text
    assert "<b>2</b><span>watches</span>" in page and "<b>7.00</b><span>mean rating</span>" in page
    assert "<b>1</b><span>chats</span>" in page and "<b>1</b><span>broadcasts</span>" in page
    assert "watch m2 with me" in page and "all friends" in page and "Drama, War" in page
    assert 'href="/recsys"' in client.get("/").text and 'href="/town"' not in client.get("/").text


def test_town_page_shows_where_each_agent_is(tmp_path):
    run, store = write_run(tmp_path / "town", "town")
    store.buffer("actions", action(0, "u0", "wait", detail={"at": "the Ville:Hobbs Cafe:cafe"}))
    store.buffer("actions", action(0, "u1", "wait", detail={"at": "the Ville:Oak Hill College:library"}))
    store.buffer("actions", action(1, "u0", "wait", detail={"at": "the Ville:Oak Hill College:library"}))
    store.buffer("actions", action(2, "u0", "wait", detail={"at": "the Ville:Oak Hill College:library"}))
    store.commit_round((0, "2024-01-01T00:00:00", 3, 4, 0, 0.01))
    store.close()
    page = local(make_app(run.path)).get("/town").text
    rows = re.findall(r'<tr><td><a href="/agents/(u\d)" class="agent">[^<]+</a></td><td>([^<]+)</td><td>(\d+)</td>', page)
    assert rows == [("u0", "Oak Hill College, library", "1"), ("u1", "Oak Hill College, library", "0")]
    assert "Hobbs Cafe, cafe → Oak Hill College, library" in page
    assert "<b>2</b><span>in Oak Hill College</span>" in page


# --------------------------------------------------------------------------- pieces


def test_reflections_show_the_memories_they_rest_on():
    memories = [Memory("memory.stream", 1, "observation", "Ada posted about hiking", "2024-01-01T08:00", 3),
                Memory("memory.stream", 2, "observation", "Bo liked my post", "2024-01-01T09:00", 2),
                Memory("memory.stream", 3, "reflection", "I enjoy outdoor people", "2024-01-01T10:00", 7, [1, 2, 99])]
    html = reflections_view(memories, ("reflection",), "none")
    assert "I enjoy outdoor people" in html and "rests on 3 memories" in html
    assert "Ada posted about hiking" in html and "Bo liked my post" in html
    assert "1 record(s) no longer in memory" in html
    assert "none" in reflections_view(memories, ("plan",), "none")


@pytest.mark.parametrize("low,high,ticks", [(0, 44, [0, 20, 40, 60]), (0, 1, [0, 0.25, 0.5, 0.75, 1]), (0, 0, [0, 0.25, 0.5, 0.75, 1]),
                                            (-3, 7, [-5, -2.5, 0, 2.5, 5, 7.5]), (0, 150, [0, 50, 100, 150])])
def test_nice_ticks_cover_the_range_in_round_steps(low, high, ticks):
    assert nice_ticks(low, high) == ticks


def test_a_chart_has_a_line_per_series_and_names_the_ones_left_out():
    series = {f"s{i}": {0: float(i), 1: float(i + 1)} for i in range(10)}
    svg = line_chart(series, "many")
    assert svg.count("<polyline") == 8 and "+2 more" in svg
    assert "no values yet" in line_chart({}, "none")


def test_the_graph_layout_is_the_same_every_time_and_fills_the_square():
    nodes = [f"a{i}" for i in range(12)]
    edges = [(f"a{i}", f"a{(i + 1) % 12}") for i in range(12)]
    first, second = layout(nodes, edges), layout(nodes, edges)
    assert first == second
    xs, ys = [p[0] for p in first.values()], [p[1] for p in first.values()]
    assert min(xs) == min(ys) == 0.0 and max(xs) == max(ys) == 1.0


# --------------------------------------------------------------------------- the command


def test_serve_prints_its_address_and_serves_the_run(run):
    proc = subprocess.Popen([sys.executable, "-m", "townsquare.cli", "serve", str(run), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line, deadline = "", time.monotonic() + START_S
        while "http://" not in line and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stderr], [], [], 1.0)[0]:
                line = proc.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert url, (line, proc.poll())
        with urllib.request.urlopen(url.group(0) + "/agents", timeout=60) as response:
            assert response.status == 200 and b"regular-0001" in response.read()
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def serve(args: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", *args])
    return exit_info.value.code, capsys.readouterr().err.strip()


def test_serve_a_folder_that_is_no_run_is_one_line_and_exit_2(tmp_path, capsys):
    code, err = serve([str(tmp_path)], capsys)
    assert code == 2 and err == f"error: {tmp_path}: not a run directory (no manifest.json)"


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(run, capsys):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        code, err = serve([str(run), "--port", str(port)], capsys)
    finally:
        taken.close()
    assert code == 2 and err == f"error: --port {port} on 127.0.0.1: in use (another server listens there; pick another with --port)"


def test_serve_without_the_dashboard_extra_says_how_to_install_it(run, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    code, err = serve([str(run)], capsys)
    assert code == 2 and err.count("\n") == 0
    assert "pip install 'townsquare[dashboard]'" in err and "missing: uvicorn" in err


def test_a_recagent_run_shows_its_watches_chats_and_insights_with_their_evidence(write_scenario, run_scenario):
    from test_recagent_policy import scenario as recagent_scenario

    run_dir, _ = run_scenario(write_scenario(recagent_scenario()))
    client = local(make_app(run_dir.path))
    page = client.get("/recsys").text
    [(watches,)] = query(run_dir.path, "SELECT COUNT(*) FROM actions WHERE kind = 'watch' AND ok = 1")
    social = query(run_dir.path, "SELECT kind, text FROM actions WHERE kind IN ('chat', 'broadcast') AND ok = 1")
    assert watches and social
    assert f"<b>{watches}</b><span>watches</span>" in page and "Tense and stylish." in page
    for kind in ("chat", "broadcast"):
        assert f"<b>{sum(k == kind for k, _ in social)}</b><span>{kind}s</span>" in page
    assert all(html.escape(text) in page for _, text in social)
    _, state = run_dir.latest_checkpoint()
    records = [r for slot in state["agents"]["users-0002"]["components"].values() if isinstance(slot, dict)
               for r in slot.get("records", ()) if r.get("kind") in ("reflection", "insight")]
    reflections = section(client.get("/agents/users-0002").text, "reflections")
    assert reflections.count('class="reflection"') == len(records) > 0
    assert reflections.count("<summary>rests on") == sum(1 for r in records if r.get("evidence")) > 0
