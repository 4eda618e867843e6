"""The recommender-system platform ``recsys``: catalogues, item recommenders, the action
vocabulary, pages, search, watches with ratings, chat and broadcast delivery, state."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from helpers import ROOT, SHARED_DATA
from townsquare.api import Action, Agent, Persona, UsageError
from townsquare.lib.items import ItemInteractions
from townsquare.platforms.recsys import RECSYS_ACTIONS, RecsysConfig, load_catalogue
from townsquare.platforms.recsys.catalogue import load_movielens, synthetic_catalogue
from townsquare.platforms.recsys.platform import RecsysPlatform
from townsquare.recommenders.item_popularity import ItemPopularity, ItemPopularityConfig
from townsquare.recommenders.item_random import ItemRandom

MINI = ROOT / "tests" / "data" / "recsys" / "ml-mini"


def run(coro):
    return asyncio.run(coro)


def make_platform(recommender=None, friends=None, history=None, **settings):
    platform = RecsysPlatform(load_movielens(MINI), recommender or ItemPopularity(), **settings)
    friends = friends or {"Ada": ["Bo"], "Bo": ["Ada", "Cy"], "Cy": []}
    for k, name in enumerate(friends):
        fields = {"friends": friends[name], "history": (history or {}).get(name, [])}
        agent = Agent(f"u-{k + 1}", k, "u", Persona(name, fields=fields), 1.0, np.random.default_rng(k))
        platform.join(agent)
        run(platform.register_account(agent.id, name, ""))
    return platform


def apply(platform, *actions, round=0):
    return [run(platform.apply(a, round, "2024-01-01T08:00:00")) for a in actions]


def test_movielens_loader_reads_genres_and_rating_counts():
    catalogue = load_movielens(MINI)
    assert len(catalogue) == 8
    heat = catalogue.get("2")
    assert heat.title == "Heat (1995)" and heat.genres == ("Action", "Crime", "Thriller") and heat.prior_count == 3
    assert catalogue.get("7").genres == () and catalogue.get("7").prior_count == 0
    assert catalogue.genre_of("sci-fi movies") == "Sci-Fi" and catalogue.genre_of("SciFi") == "Sci-Fi"


def test_search_by_category_then_keyword():
    catalogue = load_movielens(MINI)
    assert [i.id for i in catalogue.search("sci-fi movies")] == ["4", "5", "8"]  # one rating each: catalogue order
    assert [i.id for i in catalogue.search("matrix")] == ["8"]
    assert [i.id for i in catalogue.search("<Blade Runner>")] == ["4"]
    assert catalogue.search("nothing like this") == []
    assert catalogue.find_title("heat").id == "2" and catalogue.find_title("Heat (1995)").id == "2"


def test_bad_catalogue_files_stop_with_one_line(tmp_path):
    bad = tmp_path / "ml"
    bad.mkdir()
    (bad / "movies.csv").write_text("movieId,name\n1,x\n")
    with pytest.raises(UsageError, match=r"movies.csv: missing column 'title'"):
        load_movielens(bad)
    with pytest.raises(UsageError, match=r"absent: no such MovieLens folder"):
        load_movielens(tmp_path / "absent")
    with pytest.raises(UsageError, match=r"not a MovieLens folder \(expected movies.csv, u.item, movies.dat or RecBole's NAME.item\)"):
        load_movielens(tmp_path)
    with pytest.raises(UsageError, match=r"platform.path: catalogue 'movielens' needs a path"):
        load_catalogue(RecsysConfig(catalogue="movielens"))


def test_synthetic_catalogue_is_deterministic():
    a, b = synthetic_catalogue(12), synthetic_catalogue(12)
    assert [i.title for i in a.items] == [i.title for i in b.items] and len({i.title for i in a.items}) == 12
    assert set(a.genres) <= {"Action", "Comedy", "Drama", "Sci-Fi", "Romance", "Thriller", "Animation", "Documentary"}


def test_popularity_ranks_by_watches_plus_prior_and_skips_watched():
    platform = make_platform(ItemPopularity(ItemPopularityConfig(prior_weight=1.0, max_shown=2)), reshow=True)
    assert [i.id for i in platform.recommend("u-1", 3)] == ["2", "6", "1"]  # 3 ratings, 2, then catalogue order
    apply(platform, Action("u-2", "watch", target_post="8", detail={"rating": 8}),
          Action("u-3", "watch", target_post="8", detail={"rating": 6}),
          Action("u-1", "watch", target_post="2", detail={"rating": 9}))
    assert [i.id for i in platform.recommend("u-1", 3)] == ["8", "6", "1"]  # 8: 1 + 2 watches; 2 watched by u-1
    apply(platform, Action("u-1", "recommend", post_ids=("8", "6")), Action("u-1", "next_page", post_ids=("8",)))
    assert [i.id for i in platform.recommend("u-1", 3)] == ["6", "1", "3"]  # 8 shown twice: to the end


def test_items_once_shown_are_never_offered_again_by_default():
    platform = make_platform()
    assert [i.id for i in platform.recommend("u-1", 3)] == ["2", "6", "1"]
    apply(platform, Action("u-1", "recommend", post_ids=("2", "6")), Action("u-1", "search", text="blade", post_ids=("4",)))
    assert [i.id for i in platform.recommend("u-1", 3)] == ["1", "3", "5"]  # 2 and 6 shown, 4 found by search
    assert [i.id for i in platform.recommend("u-2", 3)] == ["2", "6", "1"]  # another user's pages are their own
    assert [i.id for i in make_platform(reshow=True).recommend("u-1", 1)] == ["2"]


def test_items_rated_before_the_run_are_never_offered_and_train_the_log():
    history = {"Ada": [{"id": "2", "title": "Heat (1995)", "rating": 4.5}, {"id": "6", "title": "x", "rating": 1.0}]}
    platform = make_platform(history=history)
    assert platform.rated_before("u-1") == {"2", "6"}
    offered = [i.id for i in platform.recommend("u-1", 10)]
    assert "2" not in offered and "6" not in offered and len(offered) == len(platform.catalogue) - 2
    # the earlier ratings are in the log on the 1-10 scale, once, as the user's watches
    assert platform.interactions.ratings["u-1"] == {"2": 9.0, "6": 2.0} and platform.interactions.watch_counts["2"] == 1
    platform.join(platform.members["u-1"])  # joining again (a rebuilt agent) adds nothing
    assert platform.interactions.watched["u-1"] == ["2", "6"]
    # settings: offered again when exclude_seen is off; not in the log without history_in_log
    loose = make_platform(history=history, exclude_seen=False, history_in_log=False)
    assert "2" in [i.id for i in loose.recommend("u-1", 10)] and "u-1" not in loose.interactions.watched
    # a watch in the run is excluded too, and every catalogue item is reachable for the others
    apply(platform, Action("u-2", "watch", target_post="4", detail={"rating": 7}))
    assert "4" not in [i.id for i in platform.recommend("u-2", 10)]


def test_random_recommender_uses_the_viewer_generator():
    platform = make_platform(ItemRandom())
    first = [i.id for i in platform.recommend("u-1", 5, np.random.default_rng(3))]
    again = [i.id for i in platform.recommend("u-1", 5, np.random.default_rng(3))]
    assert first == again and len(set(first)) == 5


def test_platform_declares_its_actions_and_refuses_others():
    platform = make_platform()
    assert platform.actions == RECSYS_ACTIONS and "like" not in RECSYS_ACTIONS
    [refused] = apply(platform, Action("u-1", "like", target_post="2"))
    assert not refused.ok and "does not accept 'like'" in refused.error
    assert [r.ok for r in apply(platform, Action("u-1", "watch", target_post="99"),
                                Action("u-1", "watch", target_post="2", detail={"rating": 11}),
                                Action("u-1", "chat", target_agent="u-1", text="hi"),
                                Action("u-1", "broadcast", text=" "))] == [False] * 4


def test_watch_records_rating_and_chat_broadcast_reach_inboxes():
    platform = make_platform()
    results = apply(platform, Action("u-1", "enter"), Action("u-1", "watch", target_post="4", text="Moody and gorgeous.", detail={"rating": 9}),
                    Action("u-1", "chat", target_agent="u-2", text="Ada: seen <Blade Runner>?", detail={"items": ["4"]}),
                    Action("u-2", "broadcast", text="Everyone should watch <Heat>!", detail={"items": ["2"]}), round=2)
    assert all(r.ok for r in results) and results[3].created_id == "b1"
    assert platform.interactions.ratings == {"u-1": {"4": 9.0}} and [i.id for i in platform.watched("u-1")] == ["4"]
    assert [(m["kind"], m["from"], m["items"]) for m in platform.inbox("u-2")] == [("chat", "u-1", ["4"])]
    # Bo's friends are Ada and Cy: both hear the broadcast; Bo does not hear it himself
    assert [m["kind"] for m in platform.inbox("u-1")] == ["broadcast"] and [m["kind"] for m in platform.inbox("u-3")] == ["broadcast"]
    assert platform.inbox("u-1", start=1) == []
    timeline = run(platform.home_timeline("u-1", 5))
    assert [(p.id, p.author_id, p.extra["items"]) for p in timeline] == [("b1", "u-2", ["2"])]
    assert run(platform.followers("u-2")) == ["u-1", "u-3"]


def test_state_round_trips():
    platform = make_platform()
    apply(platform, Action("u-1", "watch", target_post="4", detail={"rating": 7}), Action("u-2", "broadcast", text="hello <Heat>"),
          Action("u-1", "recommend", post_ids=("2", "6")))
    state = platform.get_state()
    copy = make_platform()
    copy.set_state(state)
    assert copy.get_state() == state and copy.interactions.watch_counts["4"] == 1
    interactions = ItemInteractions()
    interactions.set_state(state["interactions"])
    assert interactions.shown["u-1"]["2"] == 1


def test_platform_needs_an_item_recommender():
    from townsquare.api import ComponentError

    with pytest.raises(ComponentError, match="needs an item recommender"):
        RecsysPlatform(synthetic_catalogue(5), object())


@pytest.mark.shared_data
def test_shared_movielens_small_loads():
    folder = SHARED_DATA / "movielens" / "ml-latest-small"
    if not (folder / "movies.csv").exists():
        pytest.skip("shared MovieLens data not present")
    catalogue = load_movielens(folder)
    assert len(catalogue) == 9125 and catalogue.get("1").title == "Toy Story (1995)" and catalogue.get("1").prior_count > 100
