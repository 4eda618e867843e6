"""What ran is what is recorded: ``-p`` options anywhere on the command line are recorded in
the manifest, and every command that reopens a run (resume, replay, branch, interview, eval,
serve's interview) rebuilds exactly the recorded plugin set, disabled plugins included; a ``-p`` that
contradicts it is refused with one line naming the plugin.

The runs are the quickstart cut to two regular agents and two or three rounds with the
scripted test model, in-process through ``townsquare.cli.main``: one run plus every reopening
command, for each placement of ``-p``, takes a few seconds on a busy machine (the price of
covering each placement with each command).
"""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import ROOT, read_table, run_cli
from townsquare.plugin_manager import Plugins

QUICKSTART = str(ROOT / "examples" / "quickstart.toml")
ABLATION = "no:dynamic_persona"
SMALL = ["--set", "populations.1.count=2", "--set", "rounds=3", "--quiet"]

#: where ``-p`` stands: before the command name, right after it, at the end
PLACEMENTS = {
    "before": lambda command, *rest: ["-p", ABLATION, command, *rest],
    "after": lambda command, *rest: [command, "-p", ABLATION, *rest],
    "end": lambda command, *rest: [command, *rest, "-p", ABLATION],
}




@pytest.fixture
def plugin_sets(monkeypatch):
    """Every plugin set built, in order (``Plugins`` is made for each)."""
    made: list[Plugins] = []
    init = Plugins.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Plugins, "__init__", record)
    return made


def as_recorded(plugins: Plugins) -> bool:
    """The quickstart's run as recorded: dynamic persona left out, the scripted model in."""
    return plugins.infos["dynamic_persona"].status == "disabled" and "scripted" in plugins.versions()


def reopened_as_recorded(made: list[Plugins], before: int) -> None:
    """The sets a reopening command built after the command line's own: at least one, each
    exactly the run's."""
    rebuilt = made[before + 1:]
    assert rebuilt and all(as_recorded(p) for p in rebuilt), [
        (p.infos["dynamic_persona"].status, "scripted" in p.versions()) for p in rebuilt]


@pytest.mark.parametrize("placement", list(PLACEMENTS))
def test_every_reopening_command_rebuilds_the_recorded_plugins(placement, tmp_path, plugin_sets, capsys):
    place = PLACEMENTS[placement]
    run = tmp_path / "run"
    # stopped by its budget after round 0, so resume has rounds to play
    assert run_cli(*place("run", QUICKSTART, "--llm", "scripted", "--out", str(run), *SMALL,
                     "--set", "plugins.llm_budget.max_calls=20")) == 3
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["plugin_options"] == [ABLATION, "townsquare.testing.scripted"]
    assert manifest["disabled_plugins"] == ["dynamic_persona"] and manifest["status"] == "stopped"
    assert as_recorded(plugin_sets[-1])

    for given in (lambda command, *rest: [command, *rest], place):  # bare, and with -p given again
        before = len(plugin_sets)
        assert run_cli(*given("resume", str(run), "--quiet", "--set", "plugins.llm_budget.max_calls=100000")) == 0
        reopened_as_recorded(plugin_sets, before)
    assert json.loads((run / "manifest.json").read_text())["status"] == "finished"

    commands = {
        "replay": lambda n: ["replay", str(run), "--out", str(tmp_path / f"replay{n}")],
        "branch": lambda n: ["branch", str(run), "--at", "1", "--out", str(tmp_path / f"branch{n}"), "--quiet"],
        "interview": lambda n: ["interview", str(run), "regular-0001", "What do you like?"],
        "eval": lambda n: ["eval", "zhou", str(run), "--similarity", "embedder", "--nli", "none", "--no-quality",
                           "--pairs", "5", "--out", str(tmp_path / f"zhou{n}.json")],
    }
    for name, args in commands.items():
        for n, given in enumerate((lambda command, *rest: [command, *rest], place)):
            before = len(plugin_sets)
            assert run_cli(*given(*args(n))) == 0, (name, capsys.readouterr().err)
            reopened_as_recorded(plugin_sets, before)
    # serve: the dashboard's interview, as `townsquare serve RUN` and `townsquare -p ... serve RUN` run it
    pytest.importorskip("starlette")
    from test_dashboard import local
    from townsquare.plugin_manager import COMMAND_LINE_PLUGINS
    from townsquare.plugins.dashboard.app import make_app

    for given in ((), ("-p", ABLATION)):
        token = COMMAND_LINE_PLUGINS.set(tuple(option for option in given if option != "-p"))
        try:
            before = len(plugin_sets)
            response = local(make_app(run)).post("/api/interview", json={"agent": "regular-0002", "question": f"And now{given}?"})
        finally:
            COMMAND_LINE_PLUGINS.reset(token)
        assert response.status_code == 200, response.text
        reopened_as_recorded(plugin_sets, before - 1)
    for n in range(2):
        branch = json.loads((tmp_path / f"branch{n}" / "manifest.json").read_text())
        assert "dynamic_persona" in branch["disabled_plugins"] and branch["branch"]["interventions"] == []
        assert {row["component"] for row in branch["slot_table"] if row["slot"] == "persona.context"} == {"full_persona"}


def test_a_contradicting_plugin_option_is_refused_naming_it(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(*["-p", ABLATION, "run", QUICKSTART, "--llm", "scripted", "--out", str(run), *SMALL]) == 0
    capsys.readouterr()
    cases = [
        (["resume", str(run), "-p", "dynamic_persona"], "-p dynamic_persona given now, but the run was made with -p no:dynamic_persona"),
        (["-p", "no:scripted", "interview", str(run), "regular-0001", "Hi?"], "-p no:scripted given now, but the run used plugin 'scripted'"),
        (["replay", str(run), "--out", str(tmp_path / "r"), "-p", "townsquare.testing.oracle"],
         "-p townsquare.testing.oracle given now, but the run did not use it"),
    ]
    for args, message in cases:
        assert run_cli(*args) == 2, args
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and message in errors[0], errors
    # a plugin added for a command that only reads the run (an evaluation's judge, say) is fine
    assert run_cli(*["interview", str(run), "regular-0001", "Hi?", "-p", "townsquare.testing.oracle"]) == 0


def test_a_budget_stopped_ablation_resumed_equals_the_uninterrupted_run(tmp_path):
    """The command of the documentation, stopped by its budget, then resumed with more budget:
    table for table the same as the run made in one go, and the manifest names the ablation."""
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    command = ["-p", ABLATION, "run", QUICKSTART, "-p", "townsquare.testing.scripted", "--llm", "scripted", "--quiet"]
    assert run_cli(*[*command, "--out", str(whole)]) == 0
    calls = len(read_table(whole, "llm_calls"))
    assert run_cli(*[*command, "--out", str(parts), "--set", f"plugins.llm_budget.max_calls={calls // 2}"]) == 3
    stopped = json.loads((parts / "manifest.json").read_text())
    assert stopped["status"] == "stopped" and 0 < stopped["rounds_completed"] < 12
    assert run_cli(*["resume", str(parts), "--quiet", "--set", f"plugins.llm_budget.max_calls={calls * 2}"]) == 0
    manifest = json.loads((parts / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["plugin_options"][0] == ABLATION
    assert "dynamic_persona" in manifest["disabled_plugins"]
    assert all(row["component"] != "dynamic_persona" for row in manifest["slot_table"])
    for table in ("agents", "posts", "actions", "follows", "metrics"):
        assert read_table(parts, table) == read_table(whole, table), table
    without_latency = lambda rows: [row[:9] + row[10:] for row in rows]  # noqa: E731
    assert without_latency(read_table(parts, "llm_calls")) == without_latency(read_table(whole, "llm_calls"))


def test_a_run_killed_before_it_wrote_anything_can_be_started_again_in_its_directory(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / ".lock").write_text("")  # what a kill in the first milliseconds leaves
    assert run_cli(*["resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert "stopped before it wrote anything" in err and f"--out {run}" in err and err.count("\n") == 1
    assert run_cli(*["run", QUICKSTART, "--llm", "scripted", "--out", str(run), *SMALL]) == 0
    assert json.loads((run / "manifest.json").read_text())["status"] == "finished"
    shutil.rmtree(run / "checkpoints")
    (run / "checkpoints").mkdir()
    assert run_cli(*["run", QUICKSTART, "--llm", "scripted", "--out", str(run), *SMALL]) == 2  # a real run is never overwritten
