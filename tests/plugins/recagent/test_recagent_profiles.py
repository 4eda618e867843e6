"""RecAgent's persona sources: the profile CSV with its relationship file as friend graph,
profiles aligned with MovieLens rating histories, and LLM-generated profiles from seeds."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from helpers import ROOT, SHARED_DATA
from townsquare.api import BuildContext, Services, UsageError
from townsquare.plugins.recagent.recagent_profiles import (
    CsvProfiles, GeneratedProfiles, MovieLensProfiles, RecAgentProfilesConfig, read_profiles,
)
from townsquare.testing.llm_chain import build_chain
from townsquare.testing.scripted import ScriptedConfig, ScriptedLLM

DATA = ROOT / "tests" / "data" / "recsys"


def test_csv_profiles_with_friend_graph(tmp_path):
    source = CsvProfiles(RecAgentProfilesConfig(path=str(DATA / "user.csv"), relationships=str(DATA / "relationship.csv")), ".")
    personas = source.load(4, np.random.default_rng(0))
    assert [p.name for p in personas] == ["Dana Reed", "Omar Hale", "Lia Park", "Dana Reed #2"]
    dana = personas[0]
    assert dana.fields["interests"] == ["sci-fi movies", "thriller movies"] and dana.fields["features"] == ["Watcher", "Explorer"]
    assert dana.fields["age"] == 31 and dana.fields["career"] == "nurse" and dana.fields["traits"] == ["curious", "warm"]
    assert dana.fields["friends"] == ["Omar Hale"] and personas[1].fields["friends"] == ["Dana Reed", "Lia Park"]
    assert personas[1].fields["friend_ids"] == ["0", "2"]
    assert dana.sentences[0] == "I am Dana Reed, 31 years old, female, nurse."
    only = CsvProfiles(RecAgentProfilesConfig(path=str(DATA / "user.csv"), relationships=str(DATA / "relationship.csv"),
                                              relations=["friend"]), ".")
    assert only.profiles[1]["friends"] == ["Dana Reed"]
    by_name = tmp_path / "names.csv"
    by_name.write_text("user_1,user_2,relationship\nLia Park,Dana Reed,1\nNobody,Dana Reed,1\n")
    named = CsvProfiles(RecAgentProfilesConfig(path=str(DATA / "user.csv"), relationships=str(by_name)), ".")
    assert named.profiles[0]["friends"] == ["Lia Park"] and named.profiles[0]["friend_ids"] == ["2"]


def test_bad_profile_files_stop_with_one_line(tmp_path):
    bad = tmp_path / "u.csv"
    bad.write_text("id,name,age,traits,status,feature\n0,Al,x,,cook,\n")
    with pytest.raises(UsageError, match=r"u.csv: line 2: age 'x' is not a whole number"):
        read_profiles(bad)
    bad.write_text("id,name,age,traits,status,feature\n0,Al,3,,cook,Lurker\n")
    with pytest.raises(UsageError, match=r"unknown feature 'Lurker'"):
        read_profiles(bad)
    with pytest.raises(UsageError, match=r"absent.csv: no such profile file"):
        read_profiles(tmp_path / "absent.csv")
    with pytest.raises(UsageError, match=r"missing column 'user_2'"):
        (tmp_path / "r.csv").write_text("user_1,relationship\n")
        CsvProfiles(RecAgentProfilesConfig(path=str(DATA / "user.csv"), relationships=str(tmp_path / "r.csv")), ".")


def test_movielens_profiles_take_interests_from_earlier_ratings():
    source = MovieLensProfiles(RecAgentProfilesConfig(path=str(DATA / "ml-mini"), history_fraction=0.5, top_genres=2), ".")
    [one, two] = source.load(2, np.random.default_rng(0))
    # user 1, earlier half: Heat (Action|Crime|Thriller, 4.0), Blade Runner (Action|Sci-Fi|Thriller, 5.0)
    assert one.name == "MovieLens user 1" and one.fields["interests"] == ["action movies", "thriller movies"]
    assert one.fields["history"] == [{"id": "2", "title": "Heat (1995)", "rating": 4.0, "timestamp": 1000},
                                     {"id": "4", "title": "Blade Runner (1982)", "rating": 5.0, "timestamp": 1010}]
    assert one.fields["future_items"] == ["5", "6"] and one.fields["favourites"] == ["Blade Runner (1982)", "Heat (1995)"]
    assert "My favourite movies include Blade Runner (1982), Heat (1995)." in one.text
    # user 2, earlier half: Toy Story 3.0 (below 3.5, not liked), Heat 4.0
    assert two.fields["interests"] == ["action movies", "crime movies"]
    with pytest.raises(UsageError, match="MovieLens user 99 has no ratings"):
        MovieLensProfiles(RecAgentProfilesConfig(path=str(DATA / "ml-mini"), users=[99]), ".")


def test_generated_profiles_are_checked_and_fall_back_to_seeds():
    answers = iter(['{"name": "Rosa Lin", "gender": "female", "age": 52, "traits": ["patient"], "career": "baker", '
                    '"interests": ["drama movies"], "features": ["critic"]}', "not json", "still not json"])

    class Sequence(ScriptedLLM):
        def _reply(self, request, prompt, digest):
            return next(answers)

    chain = build_chain(Sequence())
    ctx = BuildContext(services=Services(platform=None, embedder=None, llm=chain.client), seed=0)
    source = GeneratedProfiles(RecAgentProfilesConfig(path=str(DATA / "user.csv")), ctx)
    personas = asyncio.run(source.load(2, np.random.default_rng(0)))
    assert personas[0].name == "Rosa Lin" and personas[0].fields["features"] == ["Critic"]
    assert personas[1].name == "Omar Hale #3" and personas[1].fields["career"] == "architect"
    assert [c.status for c in chain.records].count("parse_failure") == 1


@pytest.mark.shared_data
def test_shared_recagent_profiles_load():
    folder = SHARED_DATA / "yulan-rec"
    if not (folder / "user_1000.csv").exists():
        pytest.skip("shared RecAgent data not present")
    source = CsvProfiles(RecAgentProfilesConfig(path=str(folder / "user_1000.csv"), relationships=str(folder / "relationship_1000.csv")), ".")
    personas = source.load(20, np.random.default_rng(0))
    assert personas[0].name == "David Smith" and personas[0].fields["interests"] == ["sci-fi movies", "comedy movies"]
    assert any(p.fields["friends"] for p in personas)


@pytest.mark.parametrize("folder,layout", [("ml-mini", "ml-latest-small"), ("ml-100k-mini", "ml-100k"), ("ml-1m-mini", "ml-1m")])
def test_the_three_movielens_layouts_load_alike(folder, layout):
    from townsquare.lib.movielens import load_movielens_data
    from townsquare.platforms.recsys.catalogue import load_movielens

    data = load_movielens_data(DATA / folder)
    assert data.layout == layout and len(data.items) == 8 and len(data.ratings) == 10
    heat = next(i for i in data.items if i.id == "2")
    assert heat.title == "Heat (1995)" and heat.genres == ("Action", "Crime", "Thriller")
    assert next(i for i in data.items if i.title.startswith("Some Untagged")).genres == ()  # none listed / "unknown"
    histories = data.histories()
    assert [r.item for r in histories["1"]] == ["2", "4", "5", "6"] and histories["1"][0].timestamp == 1000
    catalogue = load_movielens(DATA / folder)
    assert catalogue.get("2").prior_count == 3 and catalogue.find_title("heat").id == "2"
    source = MovieLensProfiles(RecAgentProfilesConfig(path=str(DATA / folder), history_fraction=0.5, top_genres=2), ".")
    one = source.load(1, np.random.default_rng(0))[0]
    assert [h["title"] for h in one.fields["history"]] == ["Heat (1995)", "Blade Runner (1982)"]
    assert one.fields["future_items"] == ["5", "6"]


def test_movielens_demographics_reach_the_profile():
    hundred = MovieLensProfiles(RecAgentProfilesConfig(path=str(DATA / "ml-100k-mini")), ".").load(2, np.random.default_rng(0))
    assert (hundred[0].fields["age"], hundred[0].fields["gender"], hundred[0].fields["career"]) == (24, "male", "technician")
    assert hundred[1].text.startswith("I am MovieLens user 2, 53 years old, female, writer.")
    million = MovieLensProfiles(RecAgentProfilesConfig(path=str(DATA / "ml-1m-mini")), ".").load(3, np.random.default_rng(0))
    assert (million[0].fields["age_group"], million[0].fields["gender"], million[0].fields["career"]) == ("under 18", "female", "K-12 student")
    assert million[1].text.startswith("I am MovieLens user 2, aged 56+, male, self-employed.")
    assert "Amélie (2001)" in {i.title for i in source_items(DATA / "ml-1m-mini")}  # Latin-1, as MovieLens writes it


def source_items(folder):
    from townsquare.lib.movielens import load_movielens_data

    return load_movielens_data(folder).items


def test_bad_movielens_files_stop_with_one_line(tmp_path):
    from townsquare.lib.movielens import load_movielens_data

    folder = tmp_path / "ml-1m"
    folder.mkdir()
    (folder / "movies.dat").write_text("1::Toy Story (1995)::Comedy\n2::only two fields\n")
    with pytest.raises(UsageError, match=r"movies.dat: line 2: expected 3 fields separated by '::', found 2"):
        load_movielens_data(folder)
    (folder / "movies.dat").write_text("1::Toy Story (1995)::Comedy\n")
    (folder / "ratings.dat").write_text("1::1::five::978300760\n")
    with pytest.raises(UsageError, match=r"ratings.dat: line 1: rating and timestamp must be numbers"):
        load_movielens_data(folder)
    hundred = tmp_path / "ml-100k"
    hundred.mkdir()
    (hundred / "u.item").write_text("1|Toy Story (1995)|01-Jan-1995||url|" + "|".join(["2"] * 19) + "\n")
    with pytest.raises(UsageError, match=r"u.item: line 1: genre flags must be 0 or 1"):
        load_movielens_data(hundred)


def test_a_persona_keeps_at_most_history_limit_ratings_each_side():
    source = MovieLensProfiles(RecAgentProfilesConfig(path=str(DATA / "ml-mini"), history_fraction=0.5, history_limit=1), ".")
    one = source.load(1, np.random.default_rng(0))[0]
    # user 1: earlier Heat, Blade Runner (the latest kept); later Alien, Casablanca (the first kept)
    assert [h["title"] for h in one.fields["history"]] == ["Blade Runner (1982)"] and one.fields["future_items"] == ["5"]
    assert one.fields["interests"] == ["action movies", "thriller movies", "crime movies"]  # from every earlier rating
    assert RecAgentProfilesConfig().history_limit is None  # all, by default
