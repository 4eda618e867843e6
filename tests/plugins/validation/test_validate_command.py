"""``townsquare validate``: RecAgent runs (the oracle test model) against a MovieLens-shaped trace
drawn from known distributions: the table, ``--json``, ``--html``, ``--seeds`` and the one-line
errors."""

from __future__ import annotations

import json

import pytest

from helpers import cli_in_process
from validation_support import recsys_study

pytest.importorskip("powerlaw")
ORACLE = "townsquare.testing.oracle"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from townsquare.launch.runner import start_run

    root = tmp_path_factory.mktemp("validate")
    scenario = recsys_study(root, rounds=4, count=8)
    runs = [start_run(scenario, seed=s, out=root / f"run{s}", plugin_options=[ORACLE])[0].path for s in (1, 2)]
    return root, scenario, runs


def test_the_json_carries_every_shared_dimension_with_its_interval_floor_and_variance_ratio(setup, capsys):
    root, _, runs = setup
    code, out, _ = cli_in_process(capsys, "validate", *map(str, runs), "--against", str(root / "trace"), "--json", "--splits", "5", "-p", ORACLE)
    assert code == 0
    found = json.loads(out)
    rows = {d["name"]: d for d in found["dimensions"]}
    assert {"activity_per_user", "inter_event_times", "burstiness", "hour_of_day", "day_of_week", "rating_distribution",
            "popularity_gini", "long_tail_share", "genre_entropy"} == set(rows)
    for row in rows.values():
        assert {"name", "real", "simulated", "interval", "distance", "floor", "variance_ratio"} <= set(row)
        assert len(row["replicates"]) == 2 and len(row["interval"]) == 2 and row["floor"] is not None
    assert rows["rating_distribution"]["metric"] == "js" and rows["popularity_gini"]["metric"] == "relative_error"
    assert rows["activity_per_user"]["variance_ratio"] > 0 and rows["hour_of_day"]["variance_ratio"] is None
    assert {d["name"] for d in found["not_shared"]} >= {"cascade_size", "follower_degree"}
    assert found["kinds"] == ["rate"] and found["grain_seconds"] == 5 * 3600 and found["trace"]["users"] == 80


def test_the_table_and_the_html_report_with_plots(setup, capsys):
    root, _, runs = setup
    code, out, err = cli_in_process(capsys, "validate", *map(str, runs), "--against", str(root / "trace"), "--html", "--splits", "3",
                                    "--dimension", "activity_per_user", "--dimension", "rating_distribution", "-p", ORACLE)
    assert code == 0
    assert out.splitlines()[0].startswith("2 runs against") and "activity_per_user" in out and "genre_entropy" not in out.split("not shared")[0]
    report = root / "validate-trace.html"
    assert f"report: {report}" in err
    page = report.read_text()
    assert page.count("<img") == 2 and "data:image/png;base64," in page and "rating_distribution" in page


def test_seeds_runs_the_scenario_and_will_not_overwrite(setup, capsys, tmp_path):
    root, scenario, _ = setup
    out = tmp_path / "reps"
    code, stdout, err = cli_in_process(capsys, "validate", str(scenario), "--seeds", "2", "--out", str(out), "--against", str(root / "trace"),
                                       "--splits", "2", "--dimension", "activity_per_user", "-p", ORACLE)
    assert code == 0 and sorted(p.name for p in out.iterdir()) == ["seed-1", "seed-2"] and "2 runs against" in stdout
    code, _, err = cli_in_process(capsys, "validate", str(scenario), "--seeds", "2", "--out", str(out), "--against", str(root / "trace"), "-p", ORACLE)
    assert code == 2 and "seed-1: exists already" in err


def test_bad_input_is_one_line(setup, capsys, monkeypatch, data_home):
    root, scenario, runs = setup
    cases = [
        (["validate", str(scenario), "--against", str(root / "trace")], "not a run directory (a scenario file: add --seeds N)"),
        (["validate", str(runs[0]), "--against", str(root / "trace"), "--dimension", "nope"], "--dimension nope: no such dimension"),
        (["validate", str(runs[0]), "--against", "movielens-100k"], "townsquare data fetch movielens-100k"),
        (["validate", str(runs[0]), "--against", str(root)], "is none of the trace layouts"),
        (["validate", str(runs[0]), "--against", str(root / "trace"), "--set", "rounds=2"], "--set needs --seeds"),
    ]
    for args, message in cases:
        code, _, err = cli_in_process(capsys, *args, "-p", ORACLE)
        lines = err.strip().splitlines()
        assert code == 2 and message in lines[-1] and "Traceback" not in err, (args, err)
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "powerlaw" else real_find_spec(name, *a))
    code, _, err = cli_in_process(capsys, "validate", str(runs[0]), "--against", str(root / "trace"))
    assert code == 2 and "pip install 'townsquare[validate]'" in err.strip().splitlines()[-1]


def test_a_disabled_dimension_plugin_leaves_its_rows_out(setup, capsys):
    root, _, runs = setup
    code, out, _ = cli_in_process(capsys, "validate", str(runs[0]), "--against", str(root / "trace"), "--json", "--splits", "2",
                                  "-p", "no:time_of_day", "-p", "no:genre_entropy", "-p", ORACLE)
    names = {d["name"] for d in json.loads(out)["dimensions"]}
    assert code == 0 and not names & {"hour_of_day", "day_of_week", "genre_entropy"} and "activity_per_user" in names
