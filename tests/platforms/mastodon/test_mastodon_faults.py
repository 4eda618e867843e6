"""The Mastodon platform under faults, over real HTTP to mastodon-mock (its fault plane) and
through a seeded fault proxy (HTML 502s, resets, cut-off bodies, 429s, answers lost after the
write): 5xx and timeouts retried without duplicates, 429 waiting for its reset time or refused
when the reset is too far, per-account caps, an outage that stops the run, sign-up that
survives every fault with one account per agent, and fatal answers that stop cleanly."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest

pytest.importorskip("mastodon")
pytest.importorskip("mastodon_mock")

from helpers import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "support"))
from mastodon_server import make_platform as make, mock, proxy, register_agents as register, server  # noqa: E402,F401

from townsquare.actions import Action  # noqa: E402

NOW = "2024-01-01T08:00:00"


def test_5xx_and_timeouts_are_retried_without_duplicates(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path, request_timeout=0.5)
        await register(platform, ("a-1",))
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "status", "status": 500,
                    "body": {"error": "(sqlite3.OperationalError) database is locked"}}, "count": 2})
        first = await platform.apply_batch([Action("a-1", "post", text="after two 500s")], 0, NOW)
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "latency", "delay_ms": 1500}, "count": 1})
        second = await platform.apply_batch([Action("a-1", "post", text="after a timeout")], 1, NOW)
        retries = platform.conn.transport.stats["retries"]
        await platform.aclose()
        return first, second, retries

    first, second, retries = asyncio.run(go())
    assert first[0].ok and second[0].ok and retries >= 3
    time.sleep(1.3)  # the timed-out request is still being served
    assert mock.stats()["status_count"] == 2  # the Idempotency-Key made the retry return the same status


def test_429_waits_for_the_reset_time(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path)
        await register(platform, ("a-1",))
        reset = int(time.time()) + 2
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "ratelimit", "headers": {
            "X-RateLimit-Reset": str(reset), "X-RateLimit-Remaining": "0", "Retry-After": "2"}}, "count": 1})
        started = time.monotonic()
        result = await platform.apply_batch([Action("a-1", "post", text="patient")], 0, NOW)
        waited = time.monotonic() - started
        later = await platform.apply_batch([Action("a-1", "post", text="after the reset")], 1, NOW)
        stats = dict(platform.conn.transport.stats)
        await platform.aclose()
        return result, waited, later, stats

    result, waited, later, stats = asyncio.run(go())
    assert result[0].ok and later[0].ok and stats["ratelimited"] == 1
    assert waited >= 0.5
    assert mock.stats()["status_count"] == 2


def test_429_with_a_distant_reset_is_a_refusal_not_a_hang(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path, max_ratelimit_wait=1)
        await register(platform, ("a-1",))
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses/*/favourite"}, "effect": {"type": "ratelimit"}, "count": 1})
        await platform.apply_batch([Action("a-1", "post", text="x")], 0, NOW)
        await register(platform, ("a-2",))
        started = time.monotonic()
        result = await platform.apply_batch([Action("a-2", "like", target_post="p1")], 1, NOW)
        await platform.aclose()
        return result, time.monotonic() - started

    result, took = asyncio.run(go())
    # the mock's reset is 300 s away: a wait for it would take minutes (a hang guard, not a timing)
    assert not result[0].ok and "rate limited" in result[0].error and took < 120


def test_per_account_caps_refuse_in_wall_time(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path, status_cap=2, follow_cap=1)
        await register(platform)
        results = await platform.apply_batch([
            Action("a-1", "post", text="one"), Action("a-1", "post", text="two"), Action("a-1", "post", text="three"),
            Action("a-2", "post", text="other account"), Action("a-1", "follow", target_agent="a-2"),
            Action("a-1", "follow", target_agent="a-3"), Action("a-1", "reblog", target_post="p4"),
        ], 0, NOW)
        await platform.aclose()
        return results

    results = asyncio.run(go())
    assert [r.ok for r in results] == [True, True, False, True, True, False, False]
    assert results[2].error == "rate cap: a-1 reached 2 statuses per 3 hours"
    assert results[5].error.startswith("rate cap: a-1 reached 1 follows per 24 hours")
    assert mock.stats()["status_count"] == 3


def test_an_outage_stops_the_run_and_a_resume_sends_what_never_arrived(mock, tmp_path):
    """The server answers 503 to every post after the first: the run stops cleanly (no write
    is recorded as refused because of the outage) and the resumed round sends the rest."""
    from townsquare.errors import RunStopped

    actions = [Action("a-1", "post", text="before the outage"), Action("a-2", "post", text="during the outage")]

    async def first_then_outage():
        platform = make(mock, tmp_path, max_retries=2)
        await register(platform, ("a-1", "a-2"))
        checkpoint = json.loads(json.dumps(platform.get_state()))
        done = await platform.apply(actions[0], 0, NOW)
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "status", "status": 503}})
        with pytest.raises(RunStopped, match=r"mastodon server http://127.0.0.1:\d+ unreachable .post by a-2: gave up after 3 tries: HTTP 503"):
            await platform.apply(actions[1], 0, NOW)
        await platform.aclose()
        return checkpoint, done

    async def resumed(checkpoint):
        platform = make(mock, tmp_path)
        await register(platform, ("a-1", "a-2"))
        platform.set_state(checkpoint)
        results = await platform.apply_batch(actions, 0, NOW)
        await platform.aclose()
        return results

    checkpoint, done = asyncio.run(first_then_outage())
    assert done.ok and mock.stats()["status_count"] == 1
    mock._request("DELETE", "/api/v1/_mock/faults")
    results = asyncio.run(resumed(checkpoint))
    assert [r.created_id for r in results] == ["p1", "p2"] and results[0].remote_id == done.remote_id
    assert mock.stats()["status_count"] == 2


# --------------------------------------------------------------------------- sign-up and classification


def accounts_on(mock) -> int:
    """Accounts on the server besides the mock's own seeded one."""
    return mock.stats()["user_count"] - 1


@pytest.mark.parametrize("fault", ["html_502_after", "reset_after", "cut", "cut_close"])
def test_a_lost_sign_up_answer_is_recovered_with_one_account(mock, proxy, tmp_path, fault):
    """The server made the account, its answer was lost: the retry hears "taken", logs in with
    the password stored before the request (a server before Mastodon 4.4) and carries on with
    that one account."""
    proxy.password_grant = True
    proxy.configure({fault: 1.0}, only=["POST /api/v1/accounts"], limit=1)

    async def go():
        platform = make(proxy, tmp_path)
        await register(platform, ("a-1", "a-2"))
        result = await platform.apply_batch([Action("a-1", "post", text="still me")], 0, NOW)
        me = mock.client(platform.conn.accounts["a-1"].token).me()
        await platform.aclose()
        return result, me, platform.conn.accounts["a-1"]

    result, me, account = asyncio.run(go())
    assert proxy.counts[fault] == 1
    assert result[0].ok and str(me.id) == account.remote_id and me.username.endswith("_a_1")
    assert accounts_on(mock) == 2 and mock.stats()["status_count"] == 1


def test_a_sign_up_lost_by_a_stopped_run_is_recovered_on_resume(mock, proxy, tmp_path):
    """The answer is lost and the retries run out (the run stops); the resumed run finds the
    account its predecessor made, by the username and password stored before the request."""
    from townsquare.errors import RunStopped

    proxy.password_grant = True
    proxy.configure({"html_502_after": 1.0}, only=["POST /api/v1/accounts"], limit=1)
    first = make(proxy, tmp_path, max_retries=0)
    with pytest.raises(RunStopped, match="unreachable"):
        asyncio.run(register(first, ("a-1",)))
    asyncio.run(first.aclose())
    assert accounts_on(mock) == 1

    async def resumed():
        platform = make(proxy, tmp_path)
        await register(platform, ("a-1",))
        await platform.aclose()
        return platform.conn.accounts["a-1"]

    account = asyncio.run(resumed())
    assert accounts_on(mock) == 1 and str(mock.client(account.token).me().id) == account.remote_id


@pytest.mark.parametrize("fault", ["html_502_after", "reset_after", "cut", "hang_after"])
def test_a_lost_sign_up_answer_without_password_logins_goes_on_under_a_new_username(mock, proxy, tmp_path, fault):
    """Mastodon 4.4+ (as mastodon-mock) refuses password logins: the token of an account whose
    sign-up answer was lost cannot be had. The agent signs up again as USERNAME_2 and the run
    goes on; the account it cannot use is an orphan in the run's journal, and
    ``townsquare mastodon cleanup`` removes it (mastodon-mock lets any account use its admin API)."""
    from townsquare.platforms.mastodon.cleanup import cleanup

    proxy.hang_s = 0.5
    proxy.configure({fault: 1.0}, only=["POST /api/v1/accounts"], limit=1)

    async def go():
        platform = make(proxy, tmp_path, request_timeout=0.3 if fault == "hang_after" else 5)
        await register(platform, ("a-1", "a-2"))
        result = await platform.apply_batch([Action("a-1", "post", text="me, renamed")], 0, NOW)
        me = mock.client(platform.conn.accounts["a-1"].token).me()
        await platform.aclose()
        return platform, result, me

    platform, result, me = asyncio.run(go())
    username = f"ts{journal_of(tmp_path).run_key[:6]}_a_1"
    assert proxy.counts[fault] == 1 and result[0].ok
    assert me.username == f"{username}_2" and str(me.id) == platform.conn.accounts["a-1"].remote_id
    journal = journal_of(tmp_path)
    assert [(o["username"], o["agent_id"]) for o in journal.orphans()] == [(username, "a-1")]
    assert "refuses password logins" in journal.orphans()[0]["reason"]
    journal.close()
    assert accounts_on(mock) == 3  # a-1, its orphan, a-2
    password = [p for _, p in platform.conn.store.pending.values()]
    assert not any(p in str(journal_of(tmp_path).orphans()) for p in password)

    lines = []
    cleanup(tmp_path / "run", echo=lines.append)
    assert accounts_on(mock) == 2 and "removed 1 of 1 orphaned accounts" in lines
    assert journal_of(tmp_path).orphans() == [] and journal_of(tmp_path).orphans(removed=True)[0]["username"] == username


def test_a_sign_up_lost_by_a_stopped_run_goes_on_renamed_on_resume(mock, proxy, tmp_path):
    """The answer is lost and the retries run out (the run stops before round 0); the resumed
    run hears "taken" for the username its predecessor sent, cannot log in, records the orphan
    and goes on under the next username: no resume stops the same way again."""
    from townsquare.errors import RunStopped

    proxy.configure({"html_502_after": 1.0}, only=["POST /api/v1/accounts"], limit=1)
    first = make(proxy, tmp_path, max_retries=0)
    with pytest.raises(RunStopped, match=r"unreachable \(sign up a-1 as ts\w+_a_1: gave up after 1 tries: HTTP 502"):
        asyncio.run(register(first, ("a-1",)))
    asyncio.run(first.aclose())
    assert accounts_on(mock) == 1

    async def resumed():
        platform = make(proxy, tmp_path)
        await register(platform, ("a-1",))
        await platform.aclose()
        return platform

    platform = asyncio.run(resumed())
    assert accounts_on(mock) == 2 and mock.client(platform.conn.accounts["a-1"].token).me().username.endswith("_a_1_2")
    assert [o["agent_id"] for o in journal_of(tmp_path).orphans()] == ["a-1"]


def test_a_username_someone_else_took_is_passed_over(mock, tmp_path):
    """A username taken by an account the run did not make: no orphan (it is not the run's),
    the agent takes its next username."""
    platform = make(mock, tmp_path)
    taken = f"ts{platform.conn.journal.run_key[:6]}_a_1"
    mock._request("POST", "/api/v1/_mock/dev_user", {"username": taken})
    asyncio.run(register(platform, ("a-1",)))
    asyncio.run(platform.aclose())
    assert mock.client(platform.conn.accounts["a-1"].token).me().username == f"{taken}_2"
    assert journal_of(tmp_path).orphans() == []


def journal_of(tmp_path):
    from townsquare.platforms.mastodon.journal import JOURNAL_NAME, Journal

    return Journal(tmp_path / "run" / JOURNAL_NAME)


def test_mastodon_py_warnings_go_to_the_log(capsys, monkeypatch):
    """A warning from Mastodon.py's code (a timeline it thinks unavailable under a fault) is a
    line of our log, not Python's two raw lines; anyone else's goes where it went before."""
    import os
    import warnings

    from townsquare.platforms.mastodon.client import fold_warnings, import_mastodon

    m = import_mastodon()
    before: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest: before.append(str(message)))
    fold_warnings(m)
    where = os.path.join(os.path.dirname(m.__file__), "timeline.py")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn_explicit("Timeline 'public' appears to be unavailable", m.errors.MastodonWarning, where, 57)
        warnings.warn_explicit("someone else's warning", UserWarning, "/elsewhere/module.py", 3)
    err = capsys.readouterr().err
    assert "mastodon.library_warning" in err and "Timeline 'public' appears to be unavailable" in err and "timeline.py:57" in err
    assert "someone else's warning" not in err and before == ["someone else's warning"]


def test_faults_before_the_server_on_sign_up_are_retried(mock, proxy, tmp_path):
    """HTML 502s, resets and 429s (with and without Retry-After) on the app, OAuth and sign-up
    requests: every agent ends with exactly one account."""
    proxy.retry_after = 0

    async def go():
        platform = make(proxy, tmp_path, max_retries=10, backoff_cap=0.2)
        proxy.configure({"ratelimit": 1.0}, only=["POST /api/v1/apps"], limit=1)  # a JSON 429 where the app should be
        await register(platform, ("a-1",))
        proxy.configure({"html_502": 0.08, "reset": 0.08, "ratelimit": 0.08, "ratelimit_bare": 0.08},
                        only=["POST /oauth/token", "POST /api/v1/accounts", "GET /api/v1/instance*", "GET /api/v1/accounts/*",
                              "PATCH /api/v1/accounts/update_credentials"])
        await register(platform, ("a-2", "a-3", "a-4"))
        await platform.aclose()
        return platform

    platform = asyncio.run(go())
    assert set(proxy.counts) == {"html_502", "reset", "ratelimit", "ratelimit_bare"}
    assert accounts_on(mock) == 4 and len({a.remote_id for a in platform.conn.accounts.values()}) == 4


def test_a_refused_token_stops_cleanly_without_echoing_it(mock, tmp_path):
    """401 (a server that echoes the token in its message) is fatal: one line naming the
    instance and the status, the token masked; no retries."""
    from townsquare.errors import RunStopped

    token = mock._request("POST", "/api/v1/_mock/dev_user", {"username": "operator1"})["access_token"]
    (tmp_path / "tokens.txt").write_text(f"a-1 {token}\n")

    async def go():
        platform = make(mock, tmp_path, tokens=str(tmp_path / "tokens.txt"))
        await register(platform, ("a-1",))
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "status", "status": 401,
                    "body": {"error": f"The access token {token} is invalid"}}})
        try:
            await platform.apply_batch([Action("a-1", "post", text="hello")], 0, NOW)
        finally:
            assert platform.conn.transport.stats["retries"] == 0
            await platform.aclose()

    with pytest.raises(RunStopped) as info:
        asyncio.run(go())
    message = str(info.value)
    assert f"mastodon server {mock.url} refused (HTTP 401): post by a-1: HTTP 401: The access token *** is invalid" in message
    assert token not in message and "\n" not in message


def test_not_a_mastodon_api_stops_at_the_first_account(mock, tmp_path):
    from townsquare.errors import RunStopped

    class Elsewhere:
        url = mock.url + "/not-mastodon"

    platform = make(Elsewhere, tmp_path)
    with pytest.raises(RunStopped, match=r"refused \(HTTP 404\): not a Mastodon API: read the instance"):
        asyncio.run(register(platform, ("a-1",)))
    asyncio.run(platform.aclose())


def test_a_refused_write_is_the_actions_answer_not_a_stop(mock, tmp_path):
    """422 (validation) and Mastodon's per-action 403 refuse that action only."""
    async def go():
        platform = make(mock, tmp_path)
        await register(platform, ("a-1",))
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses"}, "effect": {"type": "status", "status": 422,
                    "body": {"error": "Validation failed: Text character limit of 500 exceeded"}}, "count": 1})
        mock.fault({"match": {"methods": ["POST"], "path": "/api/v1/statuses/*/reblog"}, "effect": {"type": "status", "status": 403,
                    "body": {"error": "This action is not allowed"}}, "count": 1})
        results = await platform.apply_batch([Action("a-1", "post", text="too long"), Action("a-1", "post", text="fine")], 0, NOW)
        results += await platform.apply_batch([Action("a-1", "reblog", target_post="p2")], 1, NOW)
        await platform.aclose()
        return results

    results = asyncio.run(go())
    assert [r.ok for r in results] == [False, True, False]
    assert "HTTP 422: Validation failed" in results[0].error and "HTTP 403: This action is not allowed" in results[2].error


def test_failures_are_classified_in_one_place():
    import mastodon as m

    from townsquare.platforms.mastodon.client import Seen, classify, describe, redact, retry_after

    cut = m.MastodonAPIError("Could not parse response as JSON, response code was 200, bad json content was "
                             "b'{\"access_token\":\"SECRET-TOKEN\",\"tok'.", "Exception was: x")
    html_404 = m.MastodonNotFoundError("Mastodon API returned error", 404, "Not Found", None)
    wrapped = m.MastodonIllegalArgumentError("Invalid request during oauth phase: ...")
    wrapped.__context__ = m.MastodonBadGatewayError("Mastodon API returned error", 502, "Bad Gateway", None)
    cases = [
        (m.MastodonNetworkError("Could not complete request: Read timed out."), None, "retry"),
        (m.MastodonRatelimitError("Hit rate limit."), Seen(429, 3.0, True), "ratelimit"),
        (cut, Seen(200, None, True), "retry"),
        (m.MastodonInternalServerError("Mastodon API returned error", 500, "", "database is locked"), None, "retry"),
        (html_404, Seen(404, None, False), "retry"),  # a proxy's page, not the API speaking
        (m.MastodonNotFoundError("Mastodon API returned error", 404, "Not Found", "Record not found"), Seen(404, None, True), "refused"),
        (m.MastodonAPIError("Mastodon API returned error", 422, "", "Validation failed"), Seen(422, None, True), "refused"),
        (m.MastodonUnauthorizedError("Mastodon API returned error", 401, "", "The access token is invalid"), None, "fatal"),
        (m.MastodonAPIError("Mastodon API returned error", 403, "", "Your login is currently disabled"), None, "fatal"),
        (m.MastodonAPIError("Mastodon API returned error", 403, "", "This action is not allowed"), None, "refused"),
        (wrapped, Seen(502, None, False), "retry"),
        # Mastodon.py's own refusal (no password logins): no answer of the server, no status
        (m.MastodonIllegalArgumentError("Password flow is not supported by this instance."), Seen(200, None, True), "refused"),
    ]
    assert [classify(m, exc, seen).kind for exc, seen, _ in cases] == [kind for _, _, kind in cases]
    assert classify(m, m.MastodonRatelimitError("Hit rate limit."), Seen(429, 3.0, True)).retry_after == 3.0
    assert classify(m, cases[-1][0], cases[-1][1]).status is None  # the stop line says no "HTTP 200"
    assert "SECRET-TOKEN" not in describe(cut) and describe(cut).startswith("HTTP 200: the answer was not JSON")
    assert redact("token abc123 is invalid", {"abc123", ""}) == "token *** is invalid"
    assert retry_after("7") == 7.0 and retry_after(None) is None and retry_after("soon") is None
    assert 0 < retry_after(__import__("email.utils").utils.formatdate(time.time() + 60, usegmt=True)) <= 61
