"""``townsquare calibrate``: the activity model fitted to a trace drawn from known distributions,
the scenario rewritten with only its ``[activity]`` table changed, and validate's distances
before and after."""

from __future__ import annotations

import json
import tomllib
from datetime import datetime

import numpy as np
import pytest

from helpers import cli_in_process
from townsquare.api import UsageError
from townsquare.plugins.validation.calibration import ActivityFit, Clock, fit_activity, hourly_profile, session_sizes, with_activity
from validation_support import Population, draw, recsys_study

pytest.importorskip("powerlaw")
ORACLE = "townsquare.testing.oracle"


def test_the_fit_brings_the_activity_model_closer_to_the_trace():
    real = draw("real", Population(alpha=1.1, x_min=3.0), users=400, seed=4)
    clock = Clock(agents=200, rounds=40, minutes=300, start=datetime(1998, 1, 5, 8))
    fit = fit_activity(real, clock, np.ones(10, dtype=np.int64), before=(2.0, 2.0), hourly_before=None)
    assert fit.expected_ks < fit.expected_ks_before / 2 and fit.expected_ks < 0.15
    assert fit.trace_alpha == pytest.approx(1.1, abs=0.2) and fit.trace_users == 400
    assert len(fit.hourly) == 24 and np.mean(fit.hourly) == pytest.approx(1.0, abs=1e-3)
    assert int(np.argmax(fit.hourly)) in (20, 21)  # the synthetic population's evening peak (sessions run on past 21:00)


def test_the_hourly_profile_is_the_traces_hours_with_one_event_added_to_each():
    from townsquare.lib.validation import Trace

    trace = Trace.from_events("t", [("a", 3600.0 * 5 + 10, "rate", "1", 3.0)] * 22)
    profile = hourly_profile(trace)
    assert profile[5] == pytest.approx(23 * 24 / 46, abs=1e-4) and profile[0] == pytest.approx(24 / 46, abs=1e-4)
    assert hourly_profile(Trace.from_events("t", [("a", 1.0, "rate", "", 3.0)], absolute_times=False)) is None


def _fit() -> ActivityFit:
    return ActivityFit(alpha=1.3, x_min=0.25, hourly=[1.0] * 24, expected_ks=0.1, expected_ks_before=0.3, trace_alpha=0.8,
                       trace_users=10, session_mean=1.0, sessions_seen=5)


def test_the_scenario_keeps_every_line_but_its_activity_table():
    from townsquare.plugins.validation.calibration import activity_table

    table = activity_table(_fit(), "ml")
    text = 'name = "x"  # my study\nrounds = 3\n[activity]\nalpha = 2.0   # ours\nx_min = 2.0\n\n[clock]\nminutes_per_round = 60\n'
    out = with_activity(text, table, "s.toml")
    assert out.startswith('name = "x"  # my study\nrounds = 3\n[activity]') and out.endswith("\n[clock]\nminutes_per_round = 60\n")
    data = tomllib.loads(out)
    assert data["activity"] == {"model": "pareto", "alpha": 1.3, "x_min": 0.25, "hourly": [1.0] * 24} and data["clock"]["minutes_per_round"] == 60
    added = tomllib.loads(with_activity('rounds = 3\n[[populations]]\nname = "u"\n', table, "s.toml"))
    assert added["activity"]["alpha"] == 1.3 and added["populations"] == [{"name": "u"}]
    with pytest.raises(UsageError, match="dotted keys or an inline table"):
        with_activity('rounds = 3\nactivity = { alpha = 2.0 }\n', table, "s.toml")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibrate")
    return root, recsys_study(root, rounds=6, count=12)


def test_calibrate_writes_the_scenario_and_shows_distances_before_and_after(setup, capsys):
    root, scenario = setup
    out = root / "calibrated.toml"
    code, stdout, err = cli_in_process(capsys, "calibrate", str(scenario), "--against", str(root / "trace"), "--write", str(out),
                                       "--seeds", "2", "--out", str(root / "runs"), "--splits", "3", "--json", "-p", ORACLE)
    assert code == 0, err
    report = json.loads(stdout)
    written = tomllib.loads(out.read_text())
    assert written["activity"]["alpha"] == report["fit"]["alpha"] and len(written["activity"]["hourly"]) == 24
    original = tomllib.loads(scenario.read_text())
    assert {k: v for k, v in written.items() if k != "activity"} == {k: v for k, v in original.items() if k != "activity"}
    assert report["fit"]["sessions_seen"] > 0 and report["fit"]["session_mean"] == 1.0  # the oracle watches once a session
    before = {d["name"]: d for d in report["before"]["dimensions"]}
    after = {d["name"]: d for d in report["after"]["dimensions"]}
    assert set(before) == set(after) and len(before["activity_per_user"]["distances"]) == 2
    assert sorted(p.name for p in (root / "runs" / "after").iterdir()) == ["seed-1", "seed-2"]
    change = report["activity_ks_change"]
    assert change["mean"] == pytest.approx(np.mean(after["activity_per_user"]["distances"]) - np.mean(before["activity_per_user"]["distances"]))
    assert session_sizes(sorted((root / "runs" / "before").iterdir())).tolist() == [1] * report["fit"]["sessions_seen"]
    code, again, err = cli_in_process(capsys, "calibrate", str(scenario), "--against", str(root / "trace"), "--write", str(out), "--force",
                                      "--reuse-runs", "--seeds", "2", "--out", str(root / "runs"), "--splits", "3", "--json", "-p", ORACLE)
    assert code == 0 and err.count("finished before: reused") == 4 and json.loads(again)["after"] == report["after"]


def test_calibrate_without_runs_and_its_refusals(setup, capsys):
    root, scenario = setup
    out = root / "fit-only.toml"
    code, stdout, _ = cli_in_process(capsys, "calibrate", str(scenario), "--against", str(root / "trace"), "--write", str(out), "--no-runs", "-p", ORACLE)
    assert code == 0 and "wrote" in stdout and "before [95% CI]" not in stdout and out.is_file()
    code, _, err = cli_in_process(capsys, "calibrate", str(scenario), "--against", str(root / "trace"), "--write", str(out), "--no-runs", "-p", ORACLE)
    assert code == 2 and "exists already (add --force" in err
    own = root / "own.toml"
    own.write_text(scenario.read_text().replace('slots = { policy = "recagent_policy" }', 'slots = { policy = "recagent_policy" }\nactivity = { alpha = 3.0 }'))
    code, _, err = cli_in_process(capsys, "calibrate", str(own), "--against", str(root / "trace"), "--write", str(root / "x.toml"), "--no-runs", "-p", ORACLE)
    assert code == 2 and "populations[0].activity overrides [activity]" in err
