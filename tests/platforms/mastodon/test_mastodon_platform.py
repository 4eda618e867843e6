"""The Mastodon platform in-process, over real HTTP to mastodon-mock on 127.0.0.1: the same
answers as the in-memory platform, humans' posts, retries on 5xx and timeouts, 429 with its
reset time, per-account caps, replay from the journal, and reconciling a lost answer."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

pytest.importorskip("mastodon")
pytest.importorskip("mastodon_mock")

from helpers import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "support"))
from mastodon_server import make_platform as make, mock, register_agents as register, server  # noqa: E402,F401

from townsquare.actions import Action  # noqa: E402
from townsquare.errors import RunStopped, UsageError  # noqa: E402
from townsquare.platforms.in_memory import InMemoryConfig, InMemoryPlatform  # noqa: E402
from townsquare.platforms.mastodon import MastodonConfig, MastodonPlatform  # noqa: E402
from townsquare.platforms.mastodon.journal import fingerprint  # noqa: E402

NOW = "2024-01-01T08:00:00"


AGENTS = ("a-1", "a-2", "a-3")


async def batch(platform, actions, round, now=NOW):
    """The engine's way in: apply_batch where offered, else apply one by one."""
    if hasattr(platform, "apply_batch"):
        return await platform.apply_batch(actions, round, now)
    return [await platform.apply(a, round, now) for a in actions]


def summary(view) -> tuple:
    return (view.id, view.author_id, view.text, view.round, view.created_at, view.reply_to,
            view.likes, view.reblogs, view.replies, view.author_followers)


ROUND_0 = [Action("a-1", "post", text="hiking in the mountains"), Action("a-2", "post", text="jazz piano at night"),
           Action("a-3", "post", text="   ")]
ROUND_1 = [
    Action("a-3", "like", target_post="p1"), Action("a-3", "reblog", target_post="p1"),
    Action("a-3", "comment", target_post="p1", text="me too"), Action("a-3", "follow", target_agent="a-1"),
    Action("a-3", "like", target_post="p1"), Action("a-3", "reblog", target_post="p1"), Action("a-2", "follow", target_agent="a-2"),
    Action("a-2", "unfollow", target_agent="a-1"), Action("a-2", "like", target_post="p99"), Action("a-2", "follow", target_agent="zz"),
    Action("a-2", "browse", post_ids=("p1",)), Action("a-2", "comment", target_post="p1", text=""), Action("a-9", "post", text="x"),
    Action("a-2", "follow", target_agent="a-1"), Action("a-2", "like", target_post="p2"), Action("a-1", "dance"),
]


def test_same_answers_as_the_in_memory_platform(mock, tmp_path):
    async def play(platform):
        await register(platform)
        out = [await batch(platform, ROUND_0, 0)]
        out.append([summary(v) for v in await platform.home_timeline("a-3", 10)])
        out.append(await batch(platform, ROUND_1, 1, "2024-01-01T09:00:00"))
        for agent in AGENTS:
            out.append([summary(v) for v in await platform.home_timeline(agent, 10)])
            profile = await platform.profile(agent)
            out.append((profile.followers, profile.following, await platform.followers(agent), await platform.following(agent)))
        out.append([summary(v) for v in await platform.public_timeline(2)])
        out.append([summary(v) for v in await platform.search("MOUNTAINS hiking", 5)])
        out.append(summary(await platform.get_post("p3")))
        out.append((await platform.get_post("p42"), await platform.profile("nobody")))
        return out

    mastodon = make(mock, tmp_path)
    ours = asyncio.run(play(mastodon))
    reference = asyncio.run(play(InMemoryPlatform(InMemoryConfig())))
    for mine, theirs in zip(ours, reference):
        if isinstance(mine, list) and mine and hasattr(mine[0], "ok"):
            assert [(r.ok, r.created_id, r.error) for r in mine] == [(r.ok, r.created_id, r.error) for r in theirs]
        else:
            assert mine == theirs
    results = ours[2]
    assert results[0].remote_id and results[2].remote_id  # Mastodon ids for the record
    stats = mock.stats()
    assert stats["status_count"] == 2 + 1 + 1  # two posts, one reblog, one comment
    asyncio.run(mastodon.aclose())


def test_following_feed_and_author_filter(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path, home_source="following")
        await register(platform)
        await platform.apply_batch([Action("a-1", "post", text="one"), Action("a-2", "post", text="two"),
                                    Action("a-3", "follow", target_agent="a-2")], 0, NOW)
        await platform.apply_batch([Action("a-2", "reblog", target_post="p1")], 1, NOW)
        feed = await platform.home_timeline("a-3", 10)
        only = await platform.home_timeline("a-3", 10, author_filter={"a-1"})
        nobody = await platform.home_timeline("a-1", 10)
        await platform.aclose()
        return feed, only, nobody

    feed, only, nobody = asyncio.run(go())
    assert sorted(v.id for v in feed) == ["p1", "p2"]  # a-2's post, and a-1's post a-2 reblogged
    assert [v.id for v in only] == ["p1"] and nobody == []


def test_humans_posts_accounts_and_follows(mock, tmp_path):
    human = mock._request("POST", "/api/v1/_mock/dev_user", {"username": "human", "display_name": "A Human"})
    client = mock.client(human["access_token"])
    status = client.status_post("a public post by a person about mountains", visibility="public")

    async def go():
        platform = make(mock, tmp_path)
        await register(platform)
        feed = await platform.home_timeline("a-1", 10)
        post_id = f"m{status.id}"
        assert [(v.id, v.author_id) for v in feed] == [(post_id, "@human")]
        results = await platform.apply_batch([Action("a-1", "like", target_post=post_id), Action("a-1", "follow", target_agent="@human"),
                                              Action("a-2", "comment", target_post=post_id, text="hello human"),
                                              Action("a-1", "like", target_post=post_id)], 0, NOW)
        assert [r.ok for r in results] == [True, True, True, False]
        view = await platform.get_post(post_id)
        assert (view.likes, view.replies, view.author_followers) == (1, 1, 1)
        assert await platform.following("a-1") == ["@human"]
        assert (await platform.profile("@human")).followers == 1
        assert [v.id for v in await platform.search("mountains", 5)] == [post_id]
        comment = await platform.get_post("p1")
        assert comment.reply_to == post_id
        unfollow = await platform.apply_batch([Action("a-1", "unfollow", target_agent="@human")], 1, NOW)
        assert unfollow[0].ok and await platform.following("a-1") == []
        await platform.aclose()

    asyncio.run(go())
    human_view = client.account_followers(client.me().id)
    assert list(human_view) == []


def test_replay_answers_from_the_journal_and_hides_the_future(mock, tmp_path):
    """A resumed round: the engine rebuilds the platform, restores the last checkpoint and
    re-issues the same actions. Nothing is sent twice; reads see what the original round saw."""
    round_1 = [Action("a-2", "like", target_post="p1"), Action("a-2", "comment", target_post="p1", text="replayed?"),
               Action("a-3", "follow", target_agent="a-1"), Action("a-3", "reblog", target_post="p1"),
               Action("a-1", "post", text="new in round one")]

    async def first():
        platform = make(mock, tmp_path)
        await register(platform)
        await platform.apply_batch([Action("a-1", "post", text="the first post")], 0, NOW)
        checkpoint = json.loads(json.dumps(platform.get_state()))
        before = [summary(v) for v in await platform.home_timeline("a-2", 10)]
        profile = await platform.profile("a-1")
        results = await platform.apply_batch(round_1, 1, NOW)
        await platform.aclose()
        return checkpoint, before, profile, results

    async def replay(checkpoint):
        platform = make(mock, tmp_path)
        await register(platform)
        registered = platform.conn.transport.stats["requests"]
        platform.set_state(checkpoint)
        seen = [summary(v) for v in await platform.home_timeline("a-2", 10)]
        profile = await platform.profile("a-1")
        following = await platform.following("a-3")
        reads = platform.conn.transport.stats["requests"]
        results = await platform.apply_batch(round_1, 1, NOW)
        writes = platform.conn.transport.stats["requests"] - reads
        await platform.aclose()
        return registered, seen, profile, following, results, writes

    checkpoint, before, profile, results = asyncio.run(first())
    statuses = mock.stats()["status_count"]
    registered, seen, profile_again, following, replayed, writes = asyncio.run(replay(checkpoint))
    assert registered == 0  # accounts come from the journal, tokens from the store
    assert seen == before and profile_again == profile and following == []
    assert [(r.ok, r.created_id, r.remote_id) for r in replayed] == [(r.ok, r.created_id, r.remote_id) for r in results]
    assert writes == 0 and mock.stats()["status_count"] == statuses


def test_a_lost_answer_is_reconciled_not_resent(mock, tmp_path):
    """The process died after the server made a status and a favourite but before the journal
    heard back: the intents are settled by asking the server."""
    post = Action("a-1", "post", text="did this arrive?")
    like = Action("a-2", "like", target_post="p1")

    async def crash():
        platform = make(mock, tmp_path)
        await register(platform, ("a-1", "a-2"))
        await platform.apply_batch([Action("a-1", "post", text="first")], 0, NOW)
        checkpoint = json.loads(json.dumps(platform.get_state()))
        journal = platform.conn.journal
        first_remote = platform.conn.state.remote[0]
        journal.intend(1, 0, like, fingerprint(like), None, first_remote)
        journal.intend(1, 1, post, fingerprint(post), "statuses", None)
        mock.client(platform.conn.accounts["a-2"].token).status_favourite(first_remote)
        made = mock.client(platform.conn.accounts["a-1"].token).status_post("did this arrive?", visibility="private")
        await platform.aclose()
        return checkpoint, str(made.id)

    async def resume(checkpoint):
        platform = make(mock, tmp_path)
        await register(platform, ("a-1", "a-2"))
        platform.set_state(checkpoint)
        feed = await platform.home_timeline("a-2", 10)
        results = await platform.apply_batch([like, post], 1, NOW)
        await platform.aclose()
        return feed, results

    checkpoint, made = asyncio.run(crash())
    feed, results = asyncio.run(resume(checkpoint))
    assert [(v.id, v.likes) for v in feed] == [("p1", 0)]  # the future is hidden, its like uncounted
    assert results[0].ok and results[1].ok and results[1].remote_id == made and results[1].created_id == "p2"
    assert mock.stats()["status_count"] == 2
    assert mock.client("mock_token").status(checkpoint["local"]["posts"]["remote_id"][0]).favourites_count == 1


def test_parallel_writes_answer_in_order(mock, tmp_path):
    actions = [Action(f"a-{k % 3 + 1}", "post", text=f"post {k}") for k in range(12)]
    actions += [Action("a-1", "comment", target_post="p12", text="on a post of this batch"), Action("a-2", "like", target_post="p3")]

    async def go():
        platform = make(mock, tmp_path, write_parallelism=4)
        await register(platform)
        results = await platform.apply_batch(actions, 0, NOW)
        view = await platform.get_post("p13")
        await platform.aclose()
        return results, view

    results, view = asyncio.run(go())
    assert [r.created_id for r in results[:13]] == [f"p{k}" for k in range(1, 14)] and all(r.ok for r in results)
    assert view.reply_to == "p12" and mock.stats()["status_count"] == 13


def test_state_round_trips_without_tokens(mock, tmp_path):
    async def go():
        platform = make(mock, tmp_path)
        await register(platform)
        await platform.apply_batch(ROUND_0 + [Action("a-2", "browse", post_ids=("p1",))], 0, NOW)
        state = platform.get_state()
        tokens = [a.token for a in platform.conn.accounts.values()]
        other = make(mock, tmp_path)
        await register(other)
        other.set_state(json.loads(json.dumps(state)))
        again = other.get_state()
        await platform.aclose()
        await other.aclose()
        return state, again, tokens

    state, again, tokens = asyncio.run(go())
    assert json.loads(json.dumps(again)) == json.loads(json.dumps(state))
    text = json.dumps(state)
    assert tokens and not any(token in text for token in tokens)
    assert not any(token in repr(state) for token in tokens)


def test_missing_or_refused_tokens_are_one_clear_error(mock, tmp_path):
    token = mock._request("POST", "/api/v1/_mock/dev_user", {"username": "operator1"})["access_token"]
    (tmp_path / "tokens.txt").write_text(f"{token}\n")
    platform = make(mock, tmp_path, tokens=str(tmp_path / "tokens.txt"))
    with pytest.raises(UsageError, match="no token for agent a-2 .agent number 2; the file holds 1"):
        asyncio.run(register(platform, ("a-1", "a-2")))
    asyncio.run(platform.aclose())
    (tmp_path / "bad.txt").write_text("a-1 not-a-valid-token\n")
    platform = make(mock, tmp_path / "other", tokens=str(tmp_path / "bad.txt"))
    with pytest.raises(RunStopped, match="refused .HTTP 401.: cannot set up the account of a-1 .the file entry 1.*HTTP 401") as info:
        asyncio.run(register(platform, ("a-1",)))
    assert "not-a-valid-token" not in str(info.value)
    asyncio.run(platform.aclose())


def test_without_mastodon_py_one_line_says_what_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_mastodon(name, *args, **kwargs):
        if name == "mastodon" or name.startswith("mastodon."):
            raise ImportError("No module named 'mastodon'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mastodon)
    with pytest.raises(UsageError, match=r'pip install -e "\.\[mastodon\]"'):
        MastodonPlatform(MastodonConfig(base_url="http://127.0.0.1:9"))


def test_scenario_selects_the_platform_and_validates_settings(tmp_path):
    from townsquare.errors import ScenarioError
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.scenario_files import load_scenario

    from helpers import scenario_text

    plugins = make_plugin_manager(enable=["townsquare.platforms.mastodon"])
    path = tmp_path / "s.toml"
    path.write_text(scenario_text())
    scenario = load_scenario(path, ["platform.name=mastodon", "platform.base_url=http://127.0.0.1:9",
                                    "platform.home_source=following", "platform.write_parallelism=2"], plugins)
    assert scenario.platform.spec.name == "mastodon" and scenario.platform.config.write_parallelism == 2
    assert scenario.platform.config.visibility == "private" and scenario.platform.config.bot
    with pytest.raises(ScenarioError, match="base_url"):
        load_scenario(path, ["platform.name=mastodon"], plugins)
    with pytest.raises(ScenarioError, match="visibility"):
        load_scenario(path, ["platform.name=mastodon", "platform.base_url=x", "platform.visibility=loud"], plugins)


def test_cleanup_undoes_the_runs_writes(mock, tmp_path):
    from townsquare.platforms.mastodon.cleanup import cleanup

    async def go():
        platform = make(mock, tmp_path)
        await register(platform)
        await platform.apply_batch(ROUND_0, 0, NOW)
        await platform.apply_batch(ROUND_1, 1, NOW)
        await platform.aclose()

    asyncio.run(go())
    assert mock.stats()["status_count"] == 4
    lines: list[str] = []
    assert cleanup(tmp_path / "run", dry_run=True, echo=lines.append)["statuses deleted"] == 3
    assert mock.stats()["status_count"] == 4
    done = cleanup(tmp_path / "run", echo=lines.append)
    assert done == {"statuses deleted": 3, "reblogs undone": 1, "favourites undone": 2, "follows undone": 2}
    assert mock.stats()["status_count"] == 0
    assert "tootctl accounts delete" in lines[-1]


def test_cleanup_under_an_outage_stops_with_one_line_then_carries_on(mock, tmp_path):
    from townsquare.platforms.mastodon.cleanup import cleanup

    async def go():
        platform = make(mock, tmp_path)
        await register(platform)
        await platform.apply_batch(ROUND_0, 0, NOW)
        await platform.aclose()

    asyncio.run(go())
    mock.fault({"match": {"methods": ["DELETE"], "path": "/api/v1/statuses/*"}, "effect": {"type": "status", "status": 503}})
    with pytest.raises(RunStopped, match=r"cleanup stopped after undoing 0 writes: mastodon server http://\S+: .*gave up after 6 tries"):
        cleanup(tmp_path / "run", echo=lambda line: None)
    mock._request("DELETE", "/api/v1/_mock/faults")
    assert cleanup(tmp_path / "run", echo=lambda line: None) == {"statuses deleted": 2}
    assert mock.stats()["status_count"] == 0
