"""Run progress (townsquare.llm_journal totals): the engine's totals match the ``llm_calls`` table on a
scripted run with retries, repairs and parse failures; the plain line per round, the JSON line
with ``--log-json``, the rich bar rendered to a recording console, ``--quiet`` silent."""

from __future__ import annotations

import io
import json
import re
import sqlite3

import pytest

from helpers import scenario_text
from townsquare.llm import LLMRequest, LLMResponse
from townsquare.cli.progress import AblateProgress, RunProgress, progress_mode
from townsquare.llm_journal import new_totals
from townsquare.launch.runner import resume_run, start_run
from townsquare.testing.scripted import ScriptedLLM

SCRIPTED = "townsquare.testing.scripted"
EXTRA = '[recommender]\nname = "random"\n[plugins.scripted]\npolicy_post_probability = 0.6\n[plugins.llm_retry]\nbase_delay_s = 0\nattempts = 3\n'
ROUNDS = 4


class Flaky(ScriptedLLM):
    """The scripted model with a price, timing out on the calls numbered in ``timeouts`` and
    answering nonsense to every like decision of Bo's (the repair too: a parse failure each)."""

    def __init__(self, timeouts=()):
        super().__init__()
        self.timeouts, self.started = set(timeouts), 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.started += 1
        if self.started in self.timeouts:
            raise TimeoutError("slow")
        response = await super().complete(request)
        if request.purpose.startswith("like") and "You are Bo" in request.messages[0].content:
            response.text = "hmm, hard to say"
        return response

    def cost(self, response: LLMResponse) -> float:
        return 0.001 * response.prompt_tokens + 0.002 * response.completion_tokens


class Clock:
    """A clock that moves only when told (no wall-clock in the tests)."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def scenario(write_scenario):
    return write_scenario(scenario_text(rounds=ROUNDS, count=3, policy="scripted_feed", llm=True, extra=EXTRA))


def table_totals(run_dir) -> dict[str, float]:
    db = sqlite3.connect(run_dir / "events.sqlite")
    try:
        one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
        return {
            "llm_calls": one("SELECT COUNT(*) FROM llm_calls WHERE status != 'parse_failure'"),
            "tokens": one("SELECT SUM(prompt_tokens + completion_tokens) FROM llm_calls WHERE status != 'parse_failure'"),
            "cost": one("SELECT SUM(cost) FROM llm_calls"),
            "parse_failures": one("SELECT COUNT(*) FROM llm_calls WHERE status = 'parse_failure'"),
            "llm_errors": one("SELECT COUNT(*) FROM llm_calls WHERE status = 'error'"),
            "repairs": one("SELECT COUNT(*) FROM llm_calls WHERE purpose LIKE '%.repair'"),
            "actions": one("SELECT COUNT(*) FROM actions"),
            "posts": one("SELECT COUNT(*) FROM posts"),
        }
    finally:
        db.close()


def fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split()[2:])


def test_plain_lines_count_calls_tokens_cost_failures_and_retries(scenario, make_plugins, tmp_path):
    out, clock = io.StringIO(), Clock()
    updates = []
    with RunProgress("plain", stream=out, clock=clock) as progress:
        def update(round, totals):
            updates.append((round, totals))
            clock.now += 10.0  # every round takes ten "seconds"
            progress.update(round, totals)

        run_dir, summary = start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "r",
                                     llm_provider=Flaky(timeouts={3, 9}), progress=update,
                                     on_ready=lambda s, _: progress.ready(s.model.rounds))
    assert summary.stopped is None
    # the starting point (-1), then every round once
    assert [r for r, _ in updates] == [-1, 0, 1, 2, 3]
    lines = out.getvalue().splitlines()
    assert [line.split("  ")[0] for line in lines] == [f"round {r}/{ROUNDS}" for r in range(1, ROUNDS + 1)]
    last = fields(lines[-1])
    expected = table_totals(run_dir.path)
    assert expected["parse_failures"] > 0 and expected["llm_errors"] == 2 and expected["repairs"] >= expected["parse_failures"]
    assert int(last["llm_calls"]) == expected["llm_calls"]
    assert int(last["tokens"]) == expected["tokens"]
    assert last["cost"] == f"${expected['cost']:.4f}" and expected["cost"] > 0
    for key in ("parse_failures", "llm_errors", "repairs", "actions", "posts"):
        assert int(last[key]) == expected[key], key
    # rates and the ETA from the (fake) clock: ten seconds a round; after one round the ETA is
    # unsure, then it is the rounds after the first (ten seconds each) times the rounds left
    assert fields(lines[0])["eta"] == "unsure" and fields(lines[1])["eta"] == "0:00:20"
    assert last["eta"] == "0:00:00" and last["elapsed"] == "0:00:40"
    assert float(last["calls_per_s"]) == round(expected["llm_calls"] / 40, 2)
    # each line's counts never go down
    calls = [int(fields(line)["llm_calls"]) for line in lines]
    assert calls == sorted(calls) and calls[-1] > 0


def test_a_resume_counts_from_its_checkpoint(scenario, make_plugins, tmp_path):
    """The stopped run's totals come back from the checkpoint; rates count this session only."""
    run_dir, stopped = start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "r",
                                 llm_provider=Flaky(), overrides=["plugins.llm_budget.max_calls=12"])
    assert stopped.stopped and stopped.rounds_completed < ROUNDS
    out, clock = io.StringIO(), Clock()
    seen = []

    def update(round, totals):
        seen.append(round)
        clock.now += 5.0
        progress.update(round, totals)

    progress = RunProgress("plain", stream=out, clock=clock)
    progress.ready(ROUNDS)
    resume_run(run_dir.path, plugins=make_plugins(enable=[SCRIPTED]), llm_provider=Flaky(), progress=update,
               overrides=["plugins.llm_budget.max_calls=1000"])
    assert seen[0] == stopped.rounds_completed - 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"round {stopped.rounds_completed + 1}/{ROUNDS}  ")
    assert fields(lines[-1])["elapsed"] == f"0:00:{5 * (ROUNDS - stopped.rounds_completed):02d}"
    expected = table_totals(run_dir.path)
    assert int(fields(lines[-1])["llm_calls"]) == expected["llm_calls"]
    assert int(fields(lines[-1])["parse_failures"]) == expected["parse_failures"]


def totals(**values) -> dict[str, float]:
    return {**new_totals(), **values}


def test_rich_bar_shows_every_field_and_logs_print_above_it():
    from rich.console import Console

    import structlog

    console = Console(file=io.StringIO(), force_terminal=True, width=200, record=True, color_system=None)
    clock = Clock()
    with RunProgress("bar", console=console, clock=clock) as progress:
        progress.ready(4)
        progress.update(-1, totals())
        clock.now += 20.0
        structlog.get_logger("test").warning("something.noted", detail="above the bar")
        progress.update(0, totals(llm_calls=40, prompt_tokens=9000, completion_tokens=3500, cost=0.0125, parse_failures=3,
                                  llm_errors=2, repairs=5, cached=4, actions=17, posts=6))
        after_one = console.export_text(clear=False)
        clock.now += 20.0
        progress.update(1, totals(llm_calls=80, prompt_tokens=9000, completion_tokens=3500, cost=0.0125, parse_failures=3,
                                  llm_errors=2, repairs=5, cached=4, actions=17, posts=6))
    assert re.search(r"rounds .*1/4 .*ETA unsure", after_one[after_one.rindex("rounds"):])
    text = console.export_text()
    final = text[text.rindex("rounds"):]
    assert re.search(r"rounds .*2/4 .*ETA 0:00:40", final), final
    assert "LLM 80 calls (2.0/s), 4 cached" in final and "12.5k tokens" in final and "$0.0125" in final
    assert "parse failures 3" in final and "retries 7 (2 errors, 5 repairs)" in final
    assert "actions 17" in final and "posts 6" in final
    assert text.index("something.noted") < text.rindex("rounds")


def test_quiet_writes_nothing_and_modes_follow_the_terminal():
    out = io.StringIO()
    with RunProgress("quiet", stream=out) as progress:
        progress.ready(3)
        for r in range(-1, 3):
            progress.update(r, totals(llm_calls=r + 1))
    assert out.getvalue() == ""

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert progress_mode(stream=Tty()) == "bar"
    assert progress_mode(stream=io.StringIO()) == "plain"
    assert progress_mode(log_json=True, stream=Tty()) == "json"
    assert progress_mode(quiet=True, log_json=True, stream=Tty()) == "quiet"
    with pytest.raises(ValueError, match="choose one of"):
        RunProgress("fancy")


def test_cli_off_a_terminal_prints_a_line_per_round_json_with_log_json_none_quiet(scenario, tmp_path, capsys):
    from townsquare.cli import main

    main(["run", str(scenario), "--out", str(tmp_path / "plain"), "-p", SCRIPTED])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("round ")]
    assert [line.split("  ")[0] for line in lines] == [f"round {r}/{ROUNDS}" for r in range(1, ROUNDS + 1)]
    assert int(fields(lines[-1])["llm_calls"]) == table_totals(tmp_path / "plain")["llm_calls"]

    main(["--log-json", "run", str(scenario), "--out", str(tmp_path / "json"), "-p", SCRIPTED])
    err = capsys.readouterr().err
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    progress = [e for e in events if e["event"] == "run.progress"]
    assert [e["round"] for e in progress] == list(range(1, ROUNDS + 1))
    assert progress[-1]["llm_calls"] == table_totals(tmp_path / "json")["llm_calls"] and progress[-1]["rounds"] == ROUNDS
    assert not any(line.startswith("round ") for line in err.splitlines())

    main(["run", str(scenario), "--out", str(tmp_path / "quiet"), "-p", SCRIPTED, "--quiet"])
    err = capsys.readouterr().err
    assert "run directory:" in err and "finished:" in err  # the start-up and summary lines stay
    assert not any(line.startswith(("round ", '{"event": "run.progress"')) for line in err.splitlines())


def test_ablate_progress_lines_and_bar():
    out = io.StringIO()
    with AblateProgress("plain", {"full": 2, "no_kb": 1}, stream=out) as progress:
        progress.done("full", 1, "finished")
        progress.done("no_kb", 1, "failed (1): boom")
        progress.done("full", 2, "skipped (finished)")
    assert out.getvalue().splitlines() == ["[1/3] full seed 1: finished", "[2/3] no_kb seed 1: failed (1): boom",
                                           "[3/3] full seed 2: skipped (finished)"]

    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, width=120, record=True, color_system=None)
    with AblateProgress("bar", {"full": 2, "no_kb": 1}, console=console) as progress:
        progress.done("full", 1, "finished")
        progress.done("no_kb", 1, "failed (1): boom")
    text = console.export_text()
    assert re.search(r"full .*1/2 runs", text) and re.search(r"no_kb .*1/1 runs  1 failed", text)
    assert "no_kb seed 1: failed (1): boom" in text


def test_live_events_count_round_0s_calls_before_the_round_ends(scenario, make_plugins, tmp_path):
    """The bar's LLM count is above 0 during round 0: every call is a ``llm_call`` event as it
    lands, before the round's end update (the order of the events, not the clock)."""
    events: list[tuple] = []
    start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "r", llm_provider=Flaky(),
              progress=lambda r, t: events.append(("round_end", r, t["llm_calls"])),
              live=lambda e: events.append((e["event"], e.get("round"), e.get("totals", {}).get("llm_calls"), e.get("text"))))
    kinds = [e[0] for e in events]
    assert kinds[0] == "phase" and any("personas of population" in (e[3] or "") for e in events if e[0] == "phase")
    round0_start = kinds.index("round_start")
    round0_end = next(i for i, e in enumerate(events) if e[:2] == ("round_end", 0))
    assert events[round0_start][1] == 0 and round0_start < round0_end
    during = [e for e in events[round0_start:round0_end] if e[0] == "llm_call"]
    assert during and during[0][1] == 0 and during[0][2] > 0
    assert [e[2] for e in during] == sorted(e[2] for e in during)  # counted as they land


def test_bar_shows_build_phases_and_each_call_as_it_lands():
    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, width=200, record=True, color_system=None)
    with RunProgress("bar", console=console, clock=Clock()) as progress:
        progress.live({"event": "phase", "text": "loading the model (local: m)", "rounds": 4})
        assert "building: loading the model (local: m)" in console.export_text(clear=False)
        progress.ready(4)  # the bar made for the build is kept
        progress.update(-1, totals())
        progress.live({"event": "round_start", "round": 0, "rounds": 4})
        progress.live({"event": "llm_call", "round": 0, "purpose": "plan", "totals": totals(llm_calls=3, prompt_tokens=300)})
    text = console.export_text()
    assert "round 1 playing · LLM 3 calls" in text and "ETA unsure" in text


def test_the_quickstarts_bar_counts_round_0s_calls_as_they_land(make_plugins, tmp_path):
    """examples/quickstart.toml (on the oracle: the offline model is a benchmark's,
    benchmarks/first_answer.py): the bar's count is above 0 before round 0 ends."""
    from helpers import ROOT

    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, width=300, record=True, color_system=None)
    shown: list[str] = []
    with RunProgress("bar", console=console, clock=Clock()) as progress:
        def live(event):
            progress.live(event)
            if event["event"] == "llm_call":
                shown.append(progress.shown)

        def update(round, totals):
            shown.append(f"round {round} done")
            progress.update(round, totals)

        start_run(ROOT / "examples" / "quickstart.toml", overrides=["rounds=1", "llm.name=oracle"], out=tmp_path / "q",
                  plugins=make_plugins(enable=["townsquare.testing.oracle"]), progress=update, live=live,
                  on_ready=lambda s, _: progress.ready(s.model.rounds))
    during = shown[shown.index("round -1 done") + 1:shown.index("round 0 done")]
    assert during and during[0].startswith("round 1 playing · LLM 1 calls")
