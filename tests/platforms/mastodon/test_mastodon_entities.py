"""The Mastodon adapter's offline parts: entity parsing over JSON fixtures in the shape of real
Mastodon entities, token files, the token store, the journal, local state, read corrections."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from townsquare.actions import Action
from townsquare.errors import UsageError
from townsquare.platforms.mastodon.accounts import TokenStore, load_credentials, parse_entries, token_store_path, username_for
from townsquare.platforms.mastodon.entities import html_to_text, parse_account, parse_relationship, parse_status, parse_time, same_text
from townsquare.platforms.mastodon.feed import Corrections
from townsquare.platforms.mastodon.journal import Journal, fingerprint
from townsquare.platforms.mastodon.state import LocalState

DATA = Path(__file__).resolve().parents[2] / "data" / "mastodon"


def load(name: str):
    return json.loads((DATA / name).read_text())


# --------------------------------------------------------------------------- entities


def test_reply_status_fields():
    status = parse_status(load("status_reply.json"))
    assert status.id == "110528700000000042"
    assert status.in_reply_to_id == "110528699999999001"
    assert (status.favourites, status.reblogs, status.replies) == (5, 0, 2)
    assert status.visibility == "private"
    assert status.created_at == datetime(2024, 3, 5, 14, 22, 7, 123000, tzinfo=timezone.utc)
    assert status.text == "@bo Mountains & hiking relax me too.\nSee you at 6 <sharp>!\n\nSecond paragraph."
    assert status.account.followers == 12 and status.account.bot and status.account.acct == "ada"
    assert status.reblog is None and status.original is status


def test_reblog_wrapper_points_at_the_original():
    wrapper = parse_status(load("status_reblog.json"))
    assert wrapper.reblog is not None and wrapper.text == ""
    original = wrapper.original
    assert original.id == "110528699999999001" and original.account.acct == "bo@other.example"
    assert (original.favourites, original.reblogs, original.replies, original.account.followers) == (9, 3, 4, 250)
    assert original.text == "I play jazz piano at night. #jazz"
    assert wrapper.account.acct == "cy"


def test_mastodon_py_entities_parse_like_plain_json():
    """Mastodon.py hands over typed dictionaries with int ids and datetimes; same records."""
    pytest.importorskip("mastodon")
    from mastodon.return_types import Account, Relationship, Status
    from mastodon.types_base import try_cast_recurse

    for name in ("status_reply.json", "status_reblog.json"):
        assert parse_status(try_cast_recurse(Status, load(name))) == parse_status(load(name))
    assert parse_account(try_cast_recurse(Account, load("account.json"))) == parse_account(load("account.json"))
    rel = load("relationship.json")[0]
    assert parse_relationship(try_cast_recurse(Relationship, rel)) == parse_relationship(rel)


def test_timeline_and_relationships():
    timeline = [parse_status(d) for d in load("timeline_home.json")]
    assert [s.original.id for s in timeline] == ["110528699999999001", "110528700000000042"]
    following, requested = (parse_relationship(d) for d in load("relationship.json"))
    assert following.following and not following.requested
    assert requested.requested and not requested.following and requested.followed_by


def test_account_note_is_plain_text():
    account = parse_account(load("account.json"))
    assert account.note == "I love hiking in the mountains.\n\nResearch account & bot: https://example.org/study"
    assert (account.followers, account.following, account.statuses) == (12, 7, 31)


def test_times_and_text_helpers():
    assert parse_time("2024-03-05T14:22:07Z") == datetime(2024, 3, 5, 14, 22, 7, tzinfo=timezone.utc)
    assert parse_time(datetime(2024, 3, 5)) == datetime(2024, 3, 5, tzinfo=timezone.utc)
    with pytest.raises(ValueError):
        parse_time(None)
    assert html_to_text(None) == "" and html_to_text("<p>a<br>b</p>") == "a\nb"
    assert same_text("hello  world\n again", html_to_text("<p>hello world<br />again</p>"))
    assert not same_text("hello world", "hello there")


# --------------------------------------------------------------------------- accounts


def test_token_entries_by_order_or_by_agent():
    assert parse_entries(["t1", "t2"], "f") == ({}, ["t1", "t2"])
    assert parse_entries(["users-0001\tt1", "users-0002 t2"], "f") == ({"users-0001": "t1", "users-0002": "t2"}, [])
    with pytest.raises(UsageError, match="mixes"):
        parse_entries(["t1", "users-0002 t2"], "f")
    with pytest.raises(UsageError, match="twice"):
        parse_entries(["a t1", "a t2"], "f")
    with pytest.raises(UsageError, match="entry 1"):
        parse_entries(["a b c"], "f")


def test_credentials_from_file_and_environment(tmp_path, monkeypatch):
    (tmp_path / "tokens.txt").write_text("# comment\ntok-a\n\ntok-b\n")
    creds = load_credentials("tokens.txt", None, str(tmp_path))
    assert creds.configured and len(creds) == 2
    assert creds.token_for("anyone", 1) == "tok-b" and creds.token_for("x", 2) is None
    monkeypatch.setenv("MASTO_TOKENS", "users-0001 tok-a, users-0002 tok-b")
    creds = load_credentials(None, "MASTO_TOKENS", str(tmp_path))
    assert creds.token_for("users-0002", 0) == "tok-b" and creds.source == "env"
    monkeypatch.delenv("MASTO_TOKENS")
    with pytest.raises(UsageError, match="MASTO_TOKENS"):
        load_credentials(None, "MASTO_TOKENS", str(tmp_path))
    with pytest.raises(UsageError, match="missing.txt: no such Mastodon access token file"):
        load_credentials("missing.txt", None, str(tmp_path))
    assert not load_credentials(None, None, ".").configured


def test_token_store_is_private_and_reloads(tmp_path):
    path = token_store_path(tmp_path / "store", "http://127.0.0.1:1/", "abc")
    assert path == token_store_path(tmp_path / "store", "http://127.0.0.1:1", "abc")
    assert path != token_store_path(tmp_path / "store", "http://127.0.0.1:1", "abd")
    store = TokenStore(path)
    store.put_app("cid", "csecret")
    store.put("users-0001", "tok1")
    assert os.stat(path).st_mode & 0o777 == 0o600
    again = TokenStore(path)
    assert again.tokens == {"users-0001": "tok1"} and again.app == ("cid", "csecret")
    memory = TokenStore(None)
    memory.put("a", "t")
    assert memory.tokens == {"a": "t"}


def test_usernames_are_valid_and_run_unique():
    name = username_for("users-0001", "0123456789ab", "ts")
    assert name == "ts012345_users_0001"
    long = username_for("a-very-long-population-name-0001", "0123456789ab", "ts")
    assert len(long) <= 30 and long.startswith("ts012345_") and long.replace("_", "").isalnum()
    assert long != username_for("a-very-long-population-name-0002", "0123456789ab", "ts")


# --------------------------------------------------------------------------- journal and state


def test_journal_rows_caps_and_future(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    key = journal.run_key
    like = Action("a", "like", target_post="p1")
    journal.intend(0, 0, like, fingerprint(like), None, "r1")
    assert [r.state for r in journal.intents()] == ["intent"] and journal.intents()[0].action["target_post"] == "p1"
    journal.done(0, 0, "a", "like", fingerprint(like), None, "r1", True, None, "r1", None)
    assert [r.kind for r in journal.successful()] == ["like"]
    post = Action("a", "post", text="hi")
    journal.done(1, 0, "a", "post", fingerprint(post), "statuses", None, True, "p2", "r2", None)
    journal.done(1, 1, "a", "post", fingerprint(post), "statuses", None, False, None, None, "HTTP 422")
    assert journal.intents() == []
    assert journal.count_recent("a", "statuses", 0) == 1
    assert [(r.round, r.kind) for r in journal.future(0)] == [(1, "post")]
    journal.close()
    reopened = Journal(tmp_path / "j.sqlite")
    assert reopened.run_key == key and reopened.get(1, 0).remote_id == "r2"
    reopened.forget(1, 0)
    assert reopened.get(1, 0) is None
    reopened.put_account("a", "42", "ts_a", "ts_a", "signup", None)
    assert reopened.account("a")["remote_id"] == "42" and reopened.account("a")["index"] == 0 and "a" in reopened.accounts()


def test_fingerprint_tells_actions_apart():
    assert fingerprint(Action("a", "post", text="x")) == fingerprint(Action("a", "post", text="x", detail={"k": 1}))
    assert fingerprint(Action("a", "post", text="x")) != fingerprint(Action("a", "post", text="y"))


def test_local_state_round_trips():
    state = LocalState()
    first = state.add_post("a", "hello", 0, "2024-01-01T08:00:00", None)
    state.settle_post(first, "100", 1.5)
    refused = state.add_post("b", "too long", 0, "2024-01-01T08:00:00", None)
    state.settle_post(refused, None, 2.0)
    state.likes[first] = {"b"}
    state.reblogs[first] = {"b": "101"}
    state.following = {"b": {"a", "@human"}}
    state.reads = {"b": {"p1", "m7"}}
    state.foreign_seen = {"7": 1}
    state.foreign_accounts = {"@human": "9"}
    state.applied_round = 1
    saved = json.loads(json.dumps(state.get_state()))
    other = LocalState()
    other.set_state(saved)
    assert other.get_state() == state.get_state()
    assert other.index_of("p1") == 0 and other.index_of("p2") is None and other.index_of("p3") is None
    assert other.local_id_of("100") == "p1" and other.local_id_of("555") == "m555"


def test_corrections_undo_what_a_replayed_round_has_not_reached():
    journal = Journal(None)
    journal.done(3, 0, "a", "post", "f", "statuses", None, True, "p9", "s1", None)
    journal.done(3, 1, "b", "comment", "f", "statuses", "s0", True, "p10", "s2", None)
    journal.done(3, 2, "b", "like", "f", None, "s0", True, None, "s0", None)
    journal.done(3, 3, "c", "reblog", "f", "statuses", "s0", True, None, "s3", None)
    journal.done(3, 4, "c", "follow", "f", "follows", "acc-a", True, None, "acc-a", None)
    journal.done(3, 5, "b", "unfollow", "f", None, "acc-a", True, None, "acc-a", None)
    journal.done(3, 6, "b", "like", "f", None, "s5", False, None, None, "HTTP 404")
    c = Corrections.from_rows(journal.future(2))
    assert c.hidden == {"s1", "s2", "s3"}
    assert (c.favourites["s0"], c.reblogs["s0"], c.replies["s0"], c.favourites["s5"]) == (1, 1, 1, 0)
    assert c.followers["acc-a"] == 0 and c.following["c"] == 1 and c.following["b"] == -1
    assert c.statuses == {"a": 1, "b": 1, "c": 1}
    assert sorted(c.edges) == [("b", "acc-a", -1), ("c", "acc-a", 1)]
    assert Corrections.from_rows(journal.future(3)).hidden == set()
