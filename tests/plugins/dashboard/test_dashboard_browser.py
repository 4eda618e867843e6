"""``townsquare serve`` in a real browser: headless Chromium (the Debian ``chromium`` package)
driven by Playwright over a finished quickstart run on the scripted test model: the timeline
shows the run's posts, an agent opens, links lead on, an interview question is answered; and a
live run's page picks up the round written after it was opened. The same tests take the
screenshots in docs/ (``TOWNSQUARE_SCREENSHOTS=docs/img``; elsewhere they go to a temp folder).

Skipped when playwright or chromium is missing, unless ``TOWNSQUARE_REQUIRE_BROWSER=1`` (CI),
where that is an error. One browser and one server per run for the whole module.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from helpers import ROOT, scenario_text
from test_dashboard import query, quickstart_run

REQUIRE = os.environ.get("TOWNSQUARE_REQUIRE_BROWSER") == "1"
#: hang guards, far above normal durations (a page loads in well under a second here)
WAIT_MS = 120_000
START_S = 120
#: how often the pages under test poll for changes (the default is 1500 ms)
POLL_MS = 200
VIEWPORT = {"width": 1280, "height": 860}


def unavailable(why: str) -> None:
    if REQUIRE:
        pytest.fail(f"{why}, and TOWNSQUARE_REQUIRE_BROWSER=1 says the browser tests must run")
    pytest.skip(why)


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser's path, once playwright and the dashboard's packages are known to be there."""
    for package, extra in (("playwright", "test"), ("starlette", "dashboard"), ("uvicorn", "dashboard")):
        try:
            __import__(package)
        except ImportError:
            unavailable(f"{package} is not installed (pip install -e '.[{extra}]')")
    executable = shutil.which("chromium")
    if executable is None:
        unavailable("no chromium on PATH (apt-get install -y chromium)")
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)  # a hang guard: expect() waits for the page, 5 s by default
    return executable


@pytest.fixture(scope="module")
def browser(chromium, run) -> Iterator[object]:
    """Launched after the run is made: Playwright's sync API keeps an event loop in this
    thread from then on, and a run (asyncio.run) cannot start inside it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield launched
        finally:
            launched.close()


class Served:
    """The dashboard app under uvicorn in a thread, on a free port of 127.0.0.1."""

    def __init__(self, run_path: Path):
        import uvicorn

        from townsquare.plugins.dashboard.app import make_app
        from townsquare.plugins.dashboard.serve_command import bind, url_of

        self.sock = bind("127.0.0.1", 0)
        self.url = url_of(self.sock)
        self.server = uvicorn.Server(uvicorn.Config(make_app(run_path, poll_ms=POLL_MS), log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + START_S
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the dashboard server did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=START_S)
        self.sock.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory, chromium) -> Path:
    return quickstart_run(tmp_path_factory.mktemp("browser") / "quick")


@pytest.fixture(scope="module")
def server(run) -> Iterator[Served]:
    served = Served(run)
    yield served
    served.stop()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport=VIEWPORT, base_url=server.url)
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    yield opened
    context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("TOWNSQUARE_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shoot(page, shots: Path, name: str) -> Path:
    path = shots / f"dashboard-{name}.png"
    page.screenshot(path=str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    return path


# --------------------------------------------------------------------------- a finished run


def test_timeline_shows_the_runs_posts(page, run, shots):
    from playwright.sync_api import expect

    posts = query(run, "SELECT p.post_id, p.text, a.name FROM posts p JOIN agents a ON a.agent_id = p.author_id "
                       "WHERE reply_to IS NULL ORDER BY round DESC, p.rowid DESC")
    page.goto("/")
    articles = page.locator("article.post")
    expect(articles).to_have_count(min(30, len(posts)))
    first = articles.first
    expect(first).to_have_attribute("data-post", posts[0][0])
    expect(first.locator("p.text")).to_have_text(posts[0][1])
    expect(first.locator(".meta a.agent").first).to_have_text(posts[0][2])
    expect(page.locator("#run-status")).to_have_text("finished")
    expect(page.locator(".comment").first).to_be_visible()
    shoot(page, shots, "timeline")


def test_open_an_agent_then_follow_a_link_to_the_agent_it_follows(page, run, shots):
    from playwright.sync_api import expect

    follower, followee = query(run, "SELECT follower, followee FROM follows WHERE kind = 'follow' ORDER BY seq LIMIT 1")[0]
    names = dict(query(run, "SELECT agent_id, name FROM agents"))
    page.goto("/agents")
    page.locator(f'a.agent[href="/agents/{follower}"]').click()
    expect(page).to_have_url(re.compile(rf"/agents/{follower}$"))
    expect(page.locator("h1")).to_have_text(names[follower])
    expect(page.locator("#persona")).to_contain_text(names[follower])
    expect(page.locator("#slots")).to_contain_text("policy")
    page.locator(f'#follows p a.agent[href="/agents/{followee}"]').first.click()
    expect(page.locator("h1")).to_have_text(names[followee])
    expect(page.locator("#follows")).to_contain_text(names[follower])  # followed by the agent we came from


def test_a_graph_node_opens_its_agent(page, run, shots):
    from playwright.sync_api import expect

    page.goto("/graph")
    nodes = page.locator("svg.graph a.node")
    expect(nodes).to_have_count(11)
    shoot(page, shots, "graph")
    agent = nodes.nth(3).get_attribute("data-agent")
    nodes.nth(3).locator("circle").click()
    expect(page).to_have_url(re.compile(rf"/agents/{agent}$"))


def test_interview_an_agent_in_the_browser(page, run, shots):
    from playwright.sync_api import expect

    agent = query(run, "SELECT follower FROM follows WHERE kind = 'follow' ORDER BY seq LIMIT 1")[0][0]
    page.goto(f"/agents/{agent}")
    page.fill("#question", "What have you been reading about lately?")
    page.click("#interview button")
    answer = page.locator("#answer.answer")
    expect(answer).to_contain_text("a scripted reply about")
    expect(answer).to_contain_text("round 11 · scripted-test-model")
    expect(page.locator("#interviews")).to_contain_text("What have you been reading about lately?")  # the live update
    shoot(page, shots, "agent")


def test_metrics_and_llm_pages_draw_their_charts(page, run, shots):
    from playwright.sync_api import expect

    page.goto("/metrics")
    expect(page.locator("svg.chart").first).to_be_visible()
    assert page.locator("svg.chart polyline").count() >= 5
    shoot(page, shots, "metrics")
    page.goto("/llm")
    [(calls,)] = query(run, "SELECT COUNT(*) FROM llm_calls WHERE status != 'parse_failure'")
    expect(page.locator("#content .cards .card").first).to_contain_text(f"{calls:,}calls")
    shoot(page, shots, "llm")


# --------------------------------------------------------------------------- a live run


@pytest.fixture
def held_run(tmp_path) -> Iterator[tuple[Path, Path, subprocess.Popen]]:
    """A run of 3 rounds in another process, held at the start of its last round (the
    run_gate test plugin) until the test touches the gate."""
    scenario = tmp_path / "live.toml"
    scenario.write_text(scenario_text(rounds=3, count=3), encoding="utf-8")
    gate, out = tmp_path / "gate", tmp_path / "live"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support"), "TOWNSQUARE_LOG_LEVEL": "error",
           "RUN_GATE": str(gate), "RUN_GATE_ROUND": "2"}
    proc = subprocess.Popen([sys.executable, "-m", "townsquare.cli", "run", str(scenario), "--out", str(out), "-p", "run_gate"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + START_S
        while not Path(f"{gate}.reached").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the held run never reached its gate"
            time.sleep(0.02)
        yield out, gate, proc
    finally:
        gate.touch()
        if proc.poll() is None:
            try:
                proc.wait(timeout=START_S)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_a_live_page_picks_up_the_round_written_after_it_was_opened(browser, held_run, shots):
    from playwright.sync_api import expect

    out, gate, proc = held_run
    served = Served(out)
    context = browser.new_context(viewport=VIEWPORT, base_url=served.url)
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto("/metrics")
        expect(page.locator("#run-status")).to_have_text("live")
        expect(page.locator("#run-round")).to_have_attribute("data-round", "1")
        page.evaluate("window.openedOnce = true")  # gone if the page were reloaded instead of updated
        gate.touch()
        assert proc.wait(timeout=START_S) == 0, proc.communicate()
        expect(page.locator("#run-round")).to_have_attribute("data-round", "2")
        expect(page.locator("#run-status")).to_have_text("finished")
        assert page.evaluate("window.openedOnce") is True
        [(actions,)] = query(out, "SELECT COUNT(*) FROM actions")
        expect(page.locator("#runbar")).to_contain_text(re.compile(rf"(?<!\d){actions}\s*actions"))
    finally:
        context.close()
        served.stop()
