"""``townsquare sweep``: settings x seeds as runs (ablate's machinery), a table and plot with
intervals, sweep.json; Morris and Sobol designs through SALib; the study metric sets."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest

from helpers import cli_in_process, scenario_text
from townsquare.lib.stats import mean_interval
from townsquare.commands.study_runs import Job, Variant
from townsquare.commands.sweep import (
    METRIC_SETS, Cell, Measure, Point, grid, measures, missing_metrics, morris_levels, parse_vary, salib,
)
from townsquare.errors import UsageError


def test_vary_values_are_read_as_set_reads_them():
    assert parse_vary('k=[1, 2],[3],"a,b"').values == ([1, 2], [3], "a,b")
    assert parse_vary('k=[1, 2],[3],"a,b"').texts == ("[1, 2]", "[3]", "a,b")
    setting = parse_vary("llm.news_importance=4, 6,8")
    assert setting.values == (4, 6, 8) and setting.integer() and setting.bounds() == (4.0, 8.0)
    assert parse_vary("recommender.name=random,chronological").values == ("random", "chronological")
    assert parse_vary("llm.relay_fidelity=0.5,1").numeric() and not parse_vary("llm.relay_fidelity=0.5,1").integer()
    for bad in ("nokey", "x=", "x=1,,2", "x=1,1"):
        with pytest.raises(UsageError):
            parse_vary(bad)


def test_grid_points_and_their_folders():
    points = grid([parse_vary("llm.news_importance=4,8"), parse_vary("recommender.name=random,chronological")])
    assert [p.values() for p in points] == [
        {"llm.news_importance": 4, "recommender.name": "random"}, {"llm.news_importance": 4, "recommender.name": "chronological"},
        {"llm.news_importance": 8, "recommender.name": "random"}, {"llm.news_importance": 8, "recommender.name": "chronological"}]
    assert points[0].name == "news_importance=4,name=random"
    assert points[0].variant(["llm.name=oracle"]).overrides == ["llm.name=oracle", "llm.news_importance=4", 'recommender.name="random"']
    odd = Point.of([("a.b", "x/y z")])
    assert "/" not in odd.name and " " not in odd.name


def test_metric_names():
    assert [m.name for m in measures(["party"], "last")] == ["heard", "came"]
    assert measures(["party"], "last")[1].source == "town_metrics.party.attended_guests"
    assert measures(["cocoon", "conformity"], "last")[0].summary == "end:5"
    assert measures(["town_metrics.density"], "mean") == [Measure("town_metrics.density", "town_metrics.density", "mean")]
    for bad in ([], ["x"]):
        with pytest.raises(UsageError):
            measures(bad, "end:0" if bad else "last")
    assert set(METRIC_SETS) == {"party", "cocoon", "conformity"}


def test_morris_levels_keep_integer_settings_whole():
    assert morris_levels([parse_vary("k=1,10")], 4) == 4      # 1, 4, 7, 10
    assert morris_levels([parse_vary("k=4,8")], 4) == 2       # 4 and 8
    assert morris_levels([parse_vary("k=0.1,0.9")], 6) == 6   # a real range: any levels


def test_without_salib_one_line_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "SALib", None)
    with pytest.raises(UsageError, match=r'\.\[sweep\]'):
        salib()


def last_round(path, name):
    """A run's last-round value of ``posts.count`` or ``rounds.actions``, read from its tables."""
    db = sqlite3.connect(path / "events.sqlite")
    try:
        last = db.execute("SELECT MAX(round) FROM rounds").fetchone()[0]
        if name == "posts.count":
            return float(db.execute("SELECT COUNT(*) FROM posts WHERE round = ?", (last,)).fetchone()[0])
        return float(db.execute("SELECT actions FROM rounds WHERE round = ?", (last,)).fetchone()[0])
    finally:
        db.close()


def test_sweep_runs_every_point_and_seed_resumably_with_intervals(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=3, count=3))
    out = tmp_path / "sweep"
    args = ["sweep", str(scenario), "--vary", "recommender.name=chronological,random", "--seeds", "2", "--jobs", "2",
            "--metric", "posts.count", "--metric", "rounds.actions", "--out", str(out)]
    code, stdout, stderr = cli_in_process(capsys, *args)
    assert code == 0, stderr
    assert stderr.count(": finished") == 4
    assert "| recommender.name | posts.count | rounds.actions | n |" in stdout
    data = json.loads((out / "sweep.json").read_text())
    assert data["method"] == "grid" and data["seeds"] == [11, 12]
    assert data["settings"] == [{"key": "recommender.name", "values": ["chronological", "random"]}]
    assert len(data["points"]) == 4
    for point in data["points"]:
        assert set(point) >= {"settings", "metric", "mean", "interval"}
        # each value is the run's own last-round count, and the interval is Student's t over them
        assert point["values"] == [last_round(out / point["runs"] / f"seed-{s}", point["metric"]) for s in point["seeds"]]
        interval = mean_interval(point["values"])
        assert point["mean"] == pytest.approx(interval.mean)
        assert point["interval"][0] == pytest.approx(interval.low) and point["interval"][1] == pytest.approx(interval.high)
    row = next(line for line in stdout.splitlines() if line.startswith("| random |"))
    random_posts = next(p for p in data["points"] if p["metric"] == "posts.count" and p["settings"]["recommender.name"] == "random")
    assert f"[{random_posts['interval'][0]:.4g}, {random_posts['interval'][1]:.4g}]" in row
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG" and (out / "sweep.md").is_file()

    # resumable as a whole: finished runs are skipped, a killed one resumed
    manifest = out / "name=random" / "seed-12" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "status": "running"}))
    code, _, stderr = cli_in_process(capsys, *args)
    assert code == 0, stderr
    assert stderr.count("skipped (finished)") == 3 and stderr.count(": finished") == 1
    assert json.loads((out / "sweep.json").read_text())["points"] == data["points"]


def test_sweep_stops_before_any_run_on_a_bad_setting(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2))
    code, _, err = cli_in_process(capsys, "sweep", str(scenario), "--vary", "recommender.name=random,nonesuch", "--seeds", "2",
                                  "--metric", "posts.count", "--out", str(tmp_path / "a"))
    assert code == 2 and err.startswith("error: --vary: point name=nonesuch:") and "nonesuch" in err and not (tmp_path / "a").exists()
    code, _, err = cli_in_process(capsys, "sweep", str(scenario), "--vary", "rounds=1,2", "--seeds", "1", "--metric", "posts.count")
    assert code == 2 and "--seeds" in err
    code, _, err = cli_in_process(capsys, "sweep", str(scenario), "--vary", "rounds=1,2", "--vary", "rounds=3", "--metric", "posts.count")
    assert code == 2 and "a key repeats" in err
    # a study's measures need its metric: one line before any run, naming what the scenario runs
    code, _, err = cli_in_process(capsys, "sweep", str(scenario), "--vary", "rounds=1,2", "--metric", "party", "--out", str(tmp_path / "p"))
    assert code == 2 and "heard needs the metric town_metrics" in err and not (tmp_path / "p").exists()


def test_a_metric_no_run_recorded_is_named(tmp_path):
    job = Job(Variant("p"), 1, tmp_path / "p" / "seed-1")
    job.path.mkdir(parents=True)
    (job.path / "manifest.json").write_text(json.dumps({"status": "finished"}))
    point = Point.of([("rounds", 2)])
    found = mean_interval([3.0])
    cells = [Cell(point, Measure("heard", "town_metrics.party.heard"), [], [], mean_interval([])),
             Cell(point, Measure("posts.count", "posts.count"), [3.0], [1], found)]
    assert missing_metrics(cells, [job]) == ["heard (town_metrics.party.heard)"]
    (job.path / "manifest.json").write_text(json.dumps({"status": "running"}))
    assert missing_metrics(cells, [job]) == []  # nothing finished: nothing to say yet


@pytest.mark.parametrize("method", ["morris", "sobol"])
def test_morris_and_sobol_report_each_settings_influence(tmp_path, capsys, method):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2, count=3))
    out = tmp_path / method
    code, stdout, stderr = cli_in_process(capsys, "sweep", str(scenario), "--method", method, "--samples", "16", "--vary",
                                          "populations.0.count=1,3", "--seeds", "1", "--metric", "rounds.active", "--out", str(out))
    assert code == 0, stderr
    data = json.loads((out / "sweep.json").read_text())
    rows = data["design"]["rows"]
    assert all(r["populations.0.count"] in (1, 2, 3) for r in rows)
    means = {p["settings"]["populations.0.count"]: p["mean"] for p in data["points"]}
    assert means == {c: float(c) for c in means}  # every agent is active every round
    (found,) = data["influence"]
    if method == "morris":
        # one setting, trajectories of two rows: the elementary effect is the step's change over the
        # step in SALib's unit scale (delta = p / (2 (p - 1)), here p = 2: the whole range)
        ys = [means[r["populations.0.count"]] for r in rows]
        effects = [abs(ys[i + 1] - ys[i]) / 1.0 for i in range(0, len(ys), 2)]
        assert found["mu_star"] == pytest.approx(sum(effects) / len(effects))
        assert "mu*" in stdout and found["mu_star_interval"][0] <= found["mu_star"] <= found["mu_star_interval"][1]
    else:
        # the metric is the setting itself: it explains all of the variance
        assert found["ST"] == pytest.approx(1.0, abs=0.35) and "S1" in stdout
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_estimate_prices_each_point_once_per_seed_and_runs_nothing(tmp_path, capsys):
    from townsquare.commands.typical_answers import estimate_scenario

    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2, count=3, policy="social_agent", llm=True))
    code, out, err = cli_in_process(capsys, "sweep", str(scenario), "--llm", "scripted", "--vary", "populations.0.count=2,3", "--seeds", "2",
                                    "--metric", "posts.count", "--estimate", "--out", str(tmp_path / "o"))
    assert code == 0, err
    calls = {count: estimate_scenario(scenario, overrides=[f"populations.0.count={count}"], seed=11,
                                      plugin_options=["townsquare.testing.scripted"]).totals()[0] for count in (2, 3)}
    assert calls[2] < calls[3]
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("count=", "total"))}
    assert rows["count=2"][1:3] == ["2", f"{2 * calls[2]:,}"] and rows["count=3"][1:3] == ["2", f"{2 * calls[3]:,}"]
    assert rows["total"][2] == f"{2 * (calls[2] + calls[3]):,}"
    assert not (tmp_path / "o").exists()
