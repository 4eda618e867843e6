"""The runner's part of a run's manifest: what it writes once the world is built."""

from __future__ import annotations

import json

from helpers import ROOT
from townsquare.launch.runner import start_run

QUICKSTART = ROOT / "examples" / "quickstart.toml"


def test_the_manifest_says_how_each_purpose_is_held_to_its_format(tmp_path, make_plugins):
    """The provider's capabilities, the mode per kind of answer and, in the slot table, each
    declared purpose's mode (the oracle answers every kind by its rules)."""
    plugins = make_plugins(enable=["townsquare.testing.oracle"])
    run_dir, summary = start_run(QUICKSTART, overrides=['llm={ name = "oracle" }', "rounds=1"], out=tmp_path / "run", plugins=plugins)
    assert summary.stopped is None
    manifest = json.loads(run_dir.manifest_path.read_text())
    assert manifest["llm"]["provider"] == "oracle"
    assert manifest["llm"]["modes"] == {"labels": "rules", "json": "rules", "prefixes": "rules"}
    assert manifest["llm"]["capabilities"] == {kind: ["rules"] for kind in ("labels", "json", "prefixes")}
    answers = {(row["scope"], row["slot"]): row["answers"] for row in manifest["slot_table"] if "answers" in row}
    assert answers[("regular", "planner")] == "plan: rules"
    assert answers[("initial", "policy")] == "like: rules, reblog: rules, comment: rules, topics: rules"
