"""``townsquare ablate``: variants x seeds in processes, resumable, and the paper-style table."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT, scenario_text
from townsquare.commands.ablate import Job, Variant, parse_variant, summarise
from townsquare.errors import UsageError
from townsquare.lib.stats import mean_interval, paired_test, welch_test


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support")}
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True, env=env, timeout=600)


def test_parse_variant():
    assert parse_variant('full=') == Variant("full")
    assert parse_variant('v=-p no:knowledge_boundary --set recommender.name=random -pfoo --set=a.b="x y"') == Variant(
        "v", ["recommender.name=random", 'a.b=x y'], ["no:knowledge_boundary", "foo"])
    for bad in ("noequals", "a b=--set x=1", "v=--seed 3", "v=--set"):
        with pytest.raises(UsageError):
            parse_variant(bad)


def test_ablate_runs_every_variant_and_seed_resumably_and_tabulates(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=3, count=3))
    out = tmp_path / "abl"
    args = ["ablate", str(scenario), "--variant", "full=", "--variant", "random=--set recommender.name=random",
            "--seeds", "2", "--jobs", "2", "--out", str(out)]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(": finished") == 4
    for name in ("full", "random"):
        for seed in (11, 12):
            manifest = json.loads((out / name / f"seed-{seed}" / "manifest.json").read_text())
            assert manifest["status"] == "finished" and manifest["seed"] == seed
    assert json.loads((out / "random" / "seed-11" / "manifest.json").read_text())["scenario"]["recommender"]["name"] == "random"
    assert "### posts.count" in first.stdout and "paired two-sided t-test" in first.stdout and "| full | 2 |" in first.stdout

    # the CSV holds the per-run values; its interval and test are the stats module's on them
    with open(out / "ablation.csv", newline="") as fh:
        rows = {(r["metric"], r["variant"]): r for r in csv.DictReader(fh)}
    base = [float(v) for v in rows[("rounds.actions", "full")]["values"].split()]
    other = [float(v) for v in rows[("rounds.actions", "random")]["values"].split()]
    assert len(base) == len(other) == 2
    interval = mean_interval(other)
    assert float(rows[("rounds.actions", "random")]["ci95_low"]) == pytest.approx(interval.low, nan_ok=True)
    assert rows[("rounds.actions", "random")]["seeds"] == rows[("rounds.actions", "full")]["seeds"] == "11 12"
    p = paired_test(other, base).p
    assert rows[("rounds.actions", "random")]["test"] == "paired"
    assert float(rows[("rounds.actions", "random")]["p_value"]) == pytest.approx(p, nan_ok=True)
    assert (out / "ablation.png").read_bytes()[:4] == b"\x89PNG"

    # resumable: a finished run is skipped, a killed one (manifest still "running") is resumed,
    # a folder without a manifest is started again
    manifest_path = out / "full" / "seed-12" / "manifest.json"
    manifest_path.write_text(json.dumps({**json.loads(manifest_path.read_text()), "status": "running"}))
    (out / "random" / "seed-12" / "manifest.json").unlink()
    again = cli(*args)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("skipped (finished)") == 2 and again.stderr.count(": finished") == 2
    assert json.loads(manifest_path.read_text())["status"] == "finished"


def test_bad_variant_stops_before_any_run(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2))
    result = cli("ablate", str(scenario), "--variant", "a=", "--variant", "b=--set recommender.name=nonesuch",
                 "--seeds", "2", "--out", str(tmp_path / "abl"))
    assert result.returncode == 2
    assert result.stderr.startswith("error: --variant b:") and "nonesuch" in result.stderr
    assert not (tmp_path / "abl").exists()


def test_summarise_pairs_runs_by_seed_or_tests_them_as_independent(tmp_path, monkeypatch):
    """The paired test pairs each run with the baseline's run of the same seed (a seed only one
    side finished is left out); Welch's takes every run of each side."""
    values = {("base", 1): 1.0, ("base", 2): 3.0, ("base", 3): 2.0, ("base", 4): 5.0, ("base", 5): 9.0,
              ("v", 1): 1.2, ("v", 2): 3.2, ("v", 3): 2.2, ("v", 4): 5.3}  # v's seed 5 did not finish
    jobs = [Job(Variant(name), seed, tmp_path / name / str(seed)) for name in ("base", "v") for seed in range(1, 6)]
    monkeypatch.setattr(Job, "status", lambda job: "finished" if (job.variant.name, job.seed) in values else "stopped")

    class Series:
        def __init__(self, path):
            self.series = {"m": {0: values[(path.parent.name, int(path.name))]}}

    monkeypatch.setattr("townsquare.commands.ablate.read_series", Series)
    paired = {r.variant: r for r in summarise(jobs, "base")}
    assert paired["base"].test is None and paired["v"].seeds == [1, 2, 3, 4]
    assert paired["v"].test == paired_test([1.2, 3.2, 2.2, 5.3], [1.0, 3.0, 2.0, 5.0])
    assert paired["v"].test.p < 0.01
    welch = {r.variant: r for r in summarise(jobs, "base", test="welch")}
    assert welch["v"].test == welch_test([1.2, 3.2, 2.2, 5.3], [1.0, 3.0, 2.0, 5.0, 9.0])
    assert welch["v"].test.p > 0.3
    with pytest.raises(UsageError, match="--test"):
        summarise(jobs, "base", test="sign")
