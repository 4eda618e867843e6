"""benchmarks/cocoon.py: end values with intervals over seeds, paired effects against MF alone,
finding MovieLens, and a cut-down run that prints the JSON the benchmark promises."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from helpers import ROOT

spec = importlib.util.spec_from_file_location("cocoon_benchmark", ROOT / "benchmarks" / "cocoon.py")
cocoon = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cocoon)


def test_end_values_intervals_and_paired_effects():
    curves = {"mf": {1: [2.0, 1.8, 1.6], 2: [2.0, 1.9, 1.7]}, "rec": {1: [2.0, 1.9, 1.9], 2: [2.0, 2.0, 2.1]},
              "soc": {1: [2.0, 1.8, 1.6], 2: [2.0, 1.9, 1.7]}, "both": {1: [2.0, 2.0, 2.0], 2: [2.0, 2.0, 2.0]}}
    out = cocoon.summarise(curves, end_rounds=2, strategies_from=2)
    # mf ends: seed 1 (1.8 + 1.6)/2 = 1.7, seed 2 1.8; mean 1.75, t(1) interval 1.75 +- 12.706 * 0.05
    assert out["mf"]["end"] == pytest.approx(1.75) and out["mf"]["end_ci"] == pytest.approx([1.75 - 0.6353, 1.75 + 0.6353], abs=1e-3)
    assert out["mf"]["curve"] == [2.0, 1.85, 1.65] and out["mf"]["max"] == 2.0
    assert out["mf"]["end_below_max"] == pytest.approx(0.125)
    # each seed against its own highest value: 1 - 1.7/2 = 0.15, 1 - 1.8/2 = 0.1
    assert out["mf"]["below_max"] == pytest.approx(0.125)
    # rec ends 1.9 and 2.05: paired differences 0.2 and 0.25
    assert out["rec"]["effect"] == pytest.approx(0.225) and out["rec"]["effect_ci"][0] < 0.225 < out["rec"]["effect_ci"][1]
    assert out["soc"]["effect"] == 0 and "effect" not in out["mf"]


def test_movielens_is_found_from_data_or_the_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TOWNSQUARE_DATA", str(tmp_path / "home"))
    assert cocoon.find_movielens(None) is None and cocoon.find_movielens("data:movielens-latest-small") is None
    folder = tmp_path / "movielens" / "ml-latest-small"
    folder.mkdir(parents=True)
    (folder / "movies.csv").write_text("movieId,title,genres\n")
    (folder / "ratings.csv").write_text("userId,movieId,rating,timestamp\n")
    assert cocoon.find_movielens(str(tmp_path)) == folder and cocoon.find_movielens(str(folder)) == folder
    installed = tmp_path / "home" / "movielens-latest-small"
    installed.mkdir(parents=True)
    (installed / ".townsquare-dataset.json").write_text("{}")
    assert cocoon.find_movielens(None) == installed
    assert cocoon.find_movielens(None, "ml-1m") is None
    ml1m = tmp_path / "copies" / "ml-1m"
    ml1m.mkdir(parents=True)
    (ml1m / "movies.dat").write_text("1::Toy Story (1995)::Animation|Children's|Comedy\n")
    assert cocoon.find_movielens(str(tmp_path / "copies"), "ml-1m") == ml1m
    assert cocoon.catalogue_overrides("ml-1m", ml1m) == ["platform.catalogue=movielens", f"platform.path={ml1m}"]


def test_a_cut_down_benchmark_prints_the_promised_json(tmp_path, monkeypatch):
    env_data = tmp_path / "nothing"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cocoon.py"), "--seeds", "2", "--rounds", "3", "--end-rounds", "2",
                             "--json", "--reshow", "--data", str(env_data), "--set", "plugins.rec_strategy.from_round=1",
                             "--set", "plugins.soc_strategy.from_round=1", "--set", "populations.0.count=8"],
                            capture_output=True, text=True, timeout=600,
                            env={"PATH": "", "HOME": str(tmp_path), "TOWNSQUARE_DATA": str(tmp_path / "home")})
    assert result.returncode == 0, result.stderr
    assert "skipping ml-latest-small: not installed (townsquare data fetch movielens-latest-small, or --data PATH)" in result.stderr
    assert "skipping ml-1m: not installed (townsquare data fetch movielens-1m, or --ml1m PATH)" in result.stderr
    out = json.loads(result.stdout)
    assert out["catalogues"]["ml-latest-small"] == out["catalogues"]["ml-1m"] == {"skipped": "not installed"}
    assert out["settings"]["reshow"] is True and out["settings"]["readings"] == ["every_genre", "first_genre"]
    synthetic = out["catalogues"]["synthetic"]
    assert set(synthetic) == {"random_page", "mf", "rec", "soc", "both"}
    # a random page of 5 of the synthetic catalogue's items (8 genres): above 1 by either reading
    assert 1.0 < synthetic["random_page"]["first_genre"] < synthetic["random_page"]["every_genre"] < 2.0
    for name in ("mf", "rec", "soc", "both"):
        for reading in ("every_genre", "first_genre"):
            entry = synthetic[name][reading]
            assert len(entry["curve"]) == 3 and len(entry["end_ci"]) == 2 and len(entry["end_by_seed"]) == 2
            assert len(entry["below_max_ci"]) == 2 and entry["below_max"] >= 0
            assert ("effect" in entry and "effect_ci" in entry) == (name != "mf")
        assert ("cumulative_effect" in synthetic[name]) == (name != "mf")


def test_oracle_agents_hear_of_other_movies_only_from_the_friends_soc_strategy_gives(tmp_path, monkeypatch):
    from townsquare.testing.oracle import OracleLLM

    heard: list[str] = []
    original = OracleLLM.complete

    async def complete(oracle, request):
        if request.purpose == "recagent.page":
            listed = request.messages[-1].content.split("Movies you have heard about but not watched:", 1)[1].split("\n", 1)[0]
            if "<" in listed:
                heard.append(listed)
        return await original(oracle, request)

    monkeypatch.setattr(OracleLLM, "complete", complete)
    options, agents = cocoon.AGENTS["oracle"]
    base = [*cocoon.catalogue_overrides("synthetic", None), "rounds=4", "populations.0.count=8", "plugins.cocoon_entropy.users=everyone",
            "plugins.soc_strategy.from_round=1", *agents]
    alone = cocoon.entropy_curves(base, 1, tmp_path / "mf", options, strategies_from=1)
    curve, cumulative = alone["every_genre"], alone["cumulative"]
    assert len(curve) == len(cumulative) == len(alone["first_genre"]) == 4 and all(0 < e <= 3 for e in curve)
    assert all(0 < f <= 3 for f in alone["first_genre"])
    assert heard == []  # nobody has friends: nothing is heard of
    assert alone["off_interest"] == 0.0  # so every movie watched meets the watcher's interests (the oracle's page rule)
    befriended = cocoon.entropy_curves([*base, "plugins.soc_strategy.enabled=true"], 1, tmp_path / "soc", options, strategies_from=1)
    assert heard  # the new friends' posts name movies, and the agents' pages list them as heard of
    assert befriended["off_interest"] > 0  # and some of them, outside the watcher's interests, are watched


def test_the_papers_catalogue_runs_from_an_ml_1m_folder(tmp_path):
    """ML-1M's movies.dat (a fixture of its layout) with the cocoon personas: both readings, the
    random-page level of that catalogue, and MF's pages' share of items meeting the interests."""
    import argparse

    from helpers import ROOT as root

    folder = root / "tests" / "data" / "recsys" / "ml-1m-mini"
    assert cocoon.find_movielens(str(folder), "ml-1m") == folder
    args = argparse.Namespace(agents="embedding", rounds=2, recommender="item_mf", reshow=True, strategies_from=1, end_rounds=1,
                              overrides=["populations.0.count=6", "plugins.rec_strategy.from_round=1"], seed_list=[1, 2],
                              conditions=["mf", "rec"], json=True)
    out = cocoon.run_catalogue("ml-1m", folder, args, tmp_path)
    assert set(out) == {"random_page", "mf", "rec"}
    # 5 of the fixture's 8 movies: a random page's E is positive under either reading
    assert out["random_page"]["every_genre"] > out["random_page"]["first_genre"] > 0
    for reading in ("every_genre", "first_genre"):
        assert len(out["mf"][reading]["curve"]) == 2 and "effect_ci" in out["rec"][reading]
    assert 0 <= out["mf"]["in_interest_end"] <= 1
