"""The dashboard spends and shows nothing it should not.

* Host: only the names it is served under (DNS rebinding gets a 400);
* Origin: a state-changing request from another site (``Origin``, ``Origin: null``,
  ``Sec-Fetch-Site: cross-site``) is a 403; the interview takes ``application/json`` only (415);
* interviews go through the run's budget (past it: 402 with the budget's message, nothing
  asked), a cache (a repeated question costs nothing) and a journal (``RUN/interviews/``), at
  most a few waiting at once (429);
* an endpoint that echoes the API key in its errors (401, 400, 403, 429, 500, an HTML 502)
  puts it in no response, no page and no file the dashboard writes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import read_table, run_cli, scenario_text

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from test_dashboard import LOCAL, local, quickstart_run  # noqa: E402
from townsquare.plugins.dashboard.app import make_app  # noqa: E402
from townsquare.plugins.dashboard.guard import allowed_hosts, split_host  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

ASK = {"agent": "regular-0002", "question": "What did you read today?"}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return quickstart_run(tmp_path_factory.mktemp("guard") / "quick", rounds=2)


@pytest.fixture(scope="module")
def client(run) -> TestClient:
    return local(make_app(run))



# --------------------------------------------------------------------------- Host and Origin


@pytest.mark.parametrize("base", ["http://evil.example", "http://evil.example:8000", "http://127.0.0.2:8000"])
def test_a_foreign_host_is_refused(run, base):
    response = TestClient(make_app(run), base_url=base).get("/")
    assert response.status_code == 400 and "not served under the name" in response.json()["error"]


@pytest.mark.parametrize("base", ["http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000", "http://LOCALHOST."])
def test_the_loopback_names_are_answered(run, base):
    assert TestClient(make_app(run), base_url=base).get("/").status_code == 200


def test_hosts_follow_the_listening_address():
    assert "192.0.2.7" in allowed_hosts("192.0.2.7") and "evil.example" not in allowed_hosts("0.0.0.0")
    assert {"127.0.0.1", "localhost", "::1"} <= allowed_hosts("127.0.0.1") and "lab.example" in allowed_hosts(extra=["Lab.Example"])
    assert split_host("[::1]:8000") == "::1" and split_host("LocalHost.:80") == "localhost" and split_host("::1") == "::1"


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"},
    {"Origin": "http://127.0.0.1:9999"},  # another port is another site
    {"Origin": "null"},
    {"Sec-Fetch-Site": "cross-site"},
], ids=["foreign", "other-port", "null", "sec-fetch-cross-site"])
def test_a_cross_origin_post_is_refused_and_asks_nothing(run, client, headers):
    before = interview_calls(run)
    response = client.post("/api/interview", json=ASK, headers=headers)
    assert response.status_code == 403 and response.json()["error"].startswith("refused: ")
    assert interview_calls(run) == before


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None])
def test_the_interview_takes_json_only(run, client, content_type):
    headers = {"Origin": LOCAL} | ({"Content-Type": content_type} if content_type else {})
    response = client.post("/api/interview", content=json.dumps(ASK).encode(), headers=headers)
    assert response.status_code == 415 and "send JSON" in response.json()["error"]


def test_the_own_page_may_post(client):
    response = client.post("/api/interview", json=ASK, headers={"Origin": LOCAL, "Sec-Fetch-Site": "same-origin"})
    assert response.status_code == 200, response.text


def test_a_huge_page_offset_is_an_empty_page_not_an_error(client):
    for path in ("/", "/llm"):
        assert client.get(path, params={"offset": str(10**30)}).status_code == 200


# --------------------------------------------------------------------------- budget, cache, journal


def interview_calls(run: Path) -> list[tuple]:
    path = run / "interviews" / "events.sqlite"
    return read_table(run / "interviews", "llm_calls") if path.is_file() else []


def test_interviews_spend_the_runs_budget_repeat_from_the_cache_and_are_journaled(tmp_path):
    run = quickstart_run(tmp_path / "run", rounds=2)
    spent = sum(1 for row in read_table(run, "llm_calls") if row[6] == "ok")
    # the same run, its budget set two calls above what it spent (resume records it in the manifest)
    assert run_cli(*["resume", str(run), "--quiet", "--set", f"plugins.llm_budget.max_calls={spent + 2}"]) == 0
    client = local(make_app(run))
    answers = [client.post("/api/interview", json={"agent": f"regular-000{n}", "question": "Hi?"}) for n in (1, 2)]
    assert [a.status_code for a in answers] == [200, 200] and not any(a.json()["cached"] for a in answers)

    refused = client.post("/api/interview", json={"agent": "regular-0003", "question": "Hi?"})
    assert refused.status_code == 402, refused.text
    message = refused.json()["error"]
    assert message.startswith(f"interview refused: LLM budget reached: {spent + 2} calls (limit {spent + 2})")
    assert f"townsquare resume {run} --set plugins.llm_budget.max_calls=" in message

    again = client.post("/api/interview", json={"agent": "regular-0001", "question": "Hi?"})  # asked before: no call
    assert again.status_code == 200 and again.json()["cached"] and again.json()["answer"] == answers[0].json()["answer"]

    journal = interview_calls(run)
    assert [(row[2], row[3], row[6]) for row in journal] == [
        ("regular-0001", "interview", "ok"), ("regular-0002", "interview", "ok"), ("regular-0001", "interview", "cached")]
    assert all(row[1] == 1 for row in journal)  # the round asked about
    # the run's own tables are the run's: a replay still equals them
    assert not any(row[3] == "interview" for row in read_table(run, "llm_calls"))
    # the command line counts the same budget
    assert run_cli(*["interview", str(run), "regular-0004", "Hi?"]) == 3


def test_waiting_interviews_are_limited(run, monkeypatch):
    """While one interview is answered, at most ``max_waiting`` wait; the others are told to
    ask again (429) instead of queueing up calls."""
    import townsquare.api.commands as commands
    from townsquare.api import UsageError

    release, entered = threading.Event(), threading.Event()

    def slow(*args, **kwargs):
        entered.set()
        release.wait(60)  # a hang guard, not a timing: released below
        raise UsageError("stand-in interview")

    monkeypatch.setattr(commands, "interview", slow)
    statuses: list[int] = []
    with local(make_app(run, max_waiting=2)) as client:
        def post() -> None:
            statuses.append(client.post("/api/interview", json=ASK).status_code)

        first = threading.Thread(target=post)
        first.start()
        assert entered.wait(60)
        others = [threading.Thread(target=post) for _ in range(6)]
        for thread in others:
            thread.start()
        while len(statuses) < 4:  # the four beyond the two waiting are refused at once
            threading.Event().wait(0.01)
        release.set()
        for thread in [first, *others]:
            thread.join(60)
    assert sorted(statuses) == [400, 400, 400, 429, 429, 429, 429]


# --------------------------------------------------------------------------- an endpoint that echoes the key

KEY = "sk-echoed-0123456789abcdef"
ECHOES = {
    "401": (401, "application/json", '{"error": {"message": "Incorrect API key provided: %s", "code": "invalid_api_key"}}'),
    "400": (400, "application/json", '{"error": {"message": "Bad request for key %s"}}'),
    "403": (403, "application/json", '{"error": {"message": "Key %s may not use this model"}}'),
    "429": (429, "application/json", '{"error": {"message": "Rate limit reached for key %s"}}'),
    "500": (500, "application/json", '{"error": {"message": "Internal error while serving %s"}}'),
    "502": (502, "text/html", "<html><body><h1>502 Bad Gateway</h1><p>upstream refused Bearer %s</p></body></html>"),
}


class Echo(BaseHTTPRequestHandler):
    """An endpoint that answers every call with an error quoting the key it was sent."""

    reply = ECHOES["401"]

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, content_type, body = self.reply
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        data = (body % key).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def echo_run(tmp_path_factory):
    """A run with no LLM call of its own (the embedding baseline) whose [llm] is the echoing endpoint."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = tmp_path_factory.mktemp("echo")
    extra = (f'[llm]\nname = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:{server.server_address[1]}/v1"\n'
             'api_key_env = "ECHO_TEST_KEY"\ntimeout_s = 2\n[plugins.llm_retry]\nattempts = 2\nbase_delay_s = 0.01\n')
    (tmp / "s.toml").write_text(scenario_text(rounds=1, extra=extra))
    yield tmp, server
    server.shutdown()


@pytest.mark.parametrize("echo", list(ECHOES))
def test_a_key_echoed_by_the_endpoint_appears_in_no_response(echo_run, echo, monkeypatch):
    tmp, _ = echo_run
    monkeypatch.setenv("ECHO_TEST_KEY", KEY)
    monkeypatch.setattr(Echo, "reply", ECHOES[echo])
    run = tmp / f"run-{echo}"
    assert run_cli(*["run", str(tmp / "s.toml"), "--out", str(run), "--quiet"]) == 0
    client = local(make_app(run))
    response = client.post("/api/interview", json={"agent": "users-0001", "question": "Hi?"})
    assert response.status_code in (500, 502) and "***" in response.json()["error"], response.text  # an endpoint failing is no spent budget
    pages = [response.text] + [client.get(path).text for path in ("/", "/agents/users-0001", "/llm")]
    assert all(KEY not in page for page in pages)
    written = [p.read_bytes() for p in run.rglob("*") if p.is_file()]
    assert written and all(KEY.encode() not in data for data in written)
    db = sqlite3.connect(run / "interviews" / "events.sqlite")
    errors = [row[0] for row in db.execute("SELECT error FROM llm_calls WHERE status = 'error'")]
    db.close()
    assert errors and all("***" in error or KEY not in error for error in errors)


def test_an_interview_whose_endpoint_is_down_is_a_502_not_a_spent_budget(tmp_path, monkeypatch):
    from townsquare.testing.fault_server import FaultServer

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FaultServer() as server:
        extra = (f'[llm]\nname = "openai"\nmodel = "test-model"\nbase_url = "{server.base_url}"\ntimeout_s = 5\n'
                 "[plugins.llm_retry]\nattempts = 2\nbase_delay_s = 0\n")
        (tmp_path / "s.toml").write_text(scenario_text(rounds=1, policy="scripted_feed", extra=extra))
        assert run_cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "run"), "--quiet", "-p", "townsquare.testing.scripted") == 0
    # the server is gone: every attempt is refused at the door
    response = local(make_app(tmp_path / "run")).post("/api/interview", json={"agent": "users-0001", "question": "Hi?"})
    assert response.status_code == 502, response.text
    assert response.json()["error"].startswith("interview refused: LLM call failed 2 times (interview for users-0001)")
