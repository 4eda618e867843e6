"""A real third-party package, pip-installed into this venv, found through entry points."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT, read_table, scenario_text

PACKAGE = ROOT / "tests" / "sample_plugin"


@pytest.fixture(scope="module")
def installed():
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", str(PACKAGE)], check=True, capture_output=True)
    yield
    subprocess.run([*pip, "uninstall", "-y", "townsquare-loudmouth"], check=True, capture_output=True)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True)


def test_listed_by_plugins_json(installed):
    rows = {row["name"]: row for row in json.loads(cli("plugins", "--json").stdout)}
    row = rows["loudmouth"]
    assert (row["source"], row["module"], row["version"], row["status"]) == ("entrypoint", "townsquare_loudmouth", "0.3.1", "loaded")
    assert {"slot": "policy", "name": "loudmouth", "priority": 0} in row["components"]
    assert row["hooks"] == ["townsquare_register_metrics", "townsquare_register_policies"]


def test_used_in_a_run(installed, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=2, policy="loudmouth", top='metrics = ["post_count"]', extra="[plugins.loudmouth.loudmouth]\nfeed_size = 3\n[plugins.loudmouth.post_count]\nkinds = [\"post\", \"like\"]\n"))
    out = cli("run", str(scenario), "--out", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    posts = [row[4] for row in read_table(tmp_path / "r", "posts")]
    assert posts[0] == "I LOVE HIKING IN THE MOUNTAINS!"
    assert any(row[4] == "like" for row in read_table(tmp_path / "r", "actions"))
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["plugins"]["loudmouth"] == "0.3.1"
    metrics = read_table(tmp_path / "r", "metrics")
    likes = [sum(1 for row in read_table(tmp_path / "r", "actions") if row[1] == r and row[4] in ("post", "like")) for r in (0, 1)]
    # [plugins.loudmouth.post_count] reached the metric: it counts posts and likes
    assert [(0, "post_count.posts", float(likes[0])), (1, "post_count.posts", float(likes[1]))] == [m for m in metrics if m[1] == "post_count.posts"]
    assert likes[1] > 3


def test_disabled_with_p_no(installed, tmp_path):
    rows = {row["name"]: row for row in json.loads(cli("plugins", "--all", "--json", "-p", "no:loudmouth").stdout)}
    assert rows["loudmouth"]["status"] == "disabled" and rows["loudmouth"]["hooks"] == []
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text(rounds=1, policy="loudmouth"))
    out = cli("run", str(scenario), "--out", str(tmp_path / "r"), "-p", "no:loudmouth")
    assert out.returncode == 2
    assert "populations[0].slots.policy: unknown policy 'loudmouth'" in out.stderr
    assert "plugin 'loudmouth' is disabled" in out.stderr
