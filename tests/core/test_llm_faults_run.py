"""LLM faults inside a run, in process with a provider that fails
on cue: a fatal fault stops the run cleanly at its last checkpoint; the failed attempts of
the discarded round keep their rows; answers of calls in flight when the round was discarded
land in the cache, so the resumed run pays for none of them twice; every client and task is
closed on every exit (no "never awaited", no "unclosed" warnings); Ctrl-C stops cleanly."""

from __future__ import annotations

import asyncio
import gc
import json
import sqlite3
import warnings

import pytest

from helpers import scenario_text
from townsquare.llm import LLMRequest, LLMResponse
from townsquare.launch.runner import new_manifest, resume_run, start_run
from townsquare.testing.scripted import ScriptedLLM

SCRIPTED = "townsquare.testing.scripted"
EXTRA = '[recommender]\nname = "random"\n[plugins.scripted]\npolicy_post_probability = 0.6\n[plugins.llm_retry]\nbase_delay_s = 0\nattempts = 3\n'


class HTTPError(Exception):
    def __init__(self, status: int):
        super().__init__(f"HTTP {status} from the fake endpoint")
        self.status_code = status


class Outage(ScriptedLLM):
    """The scripted model, a little slow, failing the calls numbered in ``fail`` (1-based) with
    the errors given; ``answered`` counts the answers it handed out (each one paid)."""

    endpoint = "http://fake.test/v1/chat/completions"

    def __init__(self, fail: dict[int, BaseException] | None = None, delay: float = 0.005):
        super().__init__()
        self.fail = fail or {}
        self.delay = delay
        self.answered = 0
        self.started = 0
        self.closed = False

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.started += 1
        error = self.fail.get(self.started)
        if error is not None:
            raise error
        await asyncio.sleep(self.delay)
        response = await super().complete(request)
        self.answered += 1
        return response

    async def aclose(self) -> None:
        self.closed = True


def rows(run_dir, sql):
    db = sqlite3.connect(run_dir / "events.sqlite")
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


@pytest.fixture
def scenario(write_scenario):
    return write_scenario(scenario_text(rounds=4, count=6, policy="scripted_feed", llm=True, extra=EXTRA))


def test_a_fatal_fault_stops_cleanly_keeps_failed_rows_and_paid_answers(scenario, make_plugins, tmp_path):
    whole = Outage()
    start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "whole", llm_provider=whole)
    assert whole.closed

    # round 2's calls: two timeouts (retried), then a 401 that stops the run
    stopped_by = Outage({14: TimeoutError("slow"), 15: TimeoutError("slow"), 18: HTTPError(401)})
    run_dir, summary = start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "stopped",
                                 llm_provider=stopped_by)
    assert summary.stopped.startswith("LLM endpoint refused the request (")
    assert "not retried: http://fake.test/v1/chat/completions: HTTP 401 auth: HTTP 401 from the fake endpoint" in summary.stopped
    assert stopped_by.closed
    manifest = json.loads((run_dir.path / "manifest.json").read_text())
    assert manifest["status"] == "stopped" and manifest["rounds_completed"] == summary.rounds_completed
    discarded = summary.rounds_completed
    failed = rows(run_dir.path, "SELECT round, status, error_kind FROM llm_calls WHERE status = 'error' ORDER BY seq")
    assert failed == [(discarded, "error", "timeout"), (discarded, "error", "timeout"), (discarded, "error", "auth")]
    assert rows(run_dir.path, f"SELECT COUNT(*) FROM llm_calls WHERE round = {discarded} AND status != 'error'") == [(0,)]

    healed = Outage()
    _, resumed = resume_run(run_dir.path, plugins=make_plugins(enable=[SCRIPTED]), llm_provider=healed)
    assert resumed.stopped is None and resumed.rounds_completed == 4
    # every answer paid before the stop, those of the calls in flight included, came from the cache
    assert stopped_by.answered + healed.answered == whole.answered
    # the failed attempts stay, once; everything else equals the uninterrupted run
    assert rows(run_dir.path, "SELECT round, error_kind FROM llm_calls WHERE status = 'error'") == [
        (discarded, "timeout"), (discarded, "timeout"), (discarded, "auth")]
    for table in ("posts", "actions", "follows"):
        assert rows(run_dir.path, f"SELECT * FROM {table} ORDER BY rowid") == rows(tmp_path / "whole", f"SELECT * FROM {table} ORDER BY rowid")
    ok = "SELECT round, agent_id, purpose, status, prompt_tokens, completion_tokens FROM llm_calls WHERE status != 'error' ORDER BY seq"
    assert rows(run_dir.path, ok) == rows(tmp_path / "whole", ok)


def test_retries_exhausted_stop_cleanly_and_name_the_kind(scenario, make_plugins, tmp_path):
    provider = Outage({n: ConnectionResetError("reset by peer") for n in range(16, 200)})  # an outage
    _, summary = start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "r", llm_provider=provider)
    assert summary.stopped.startswith("LLM call failed 3 times (") and "connection: reset by peer" in summary.stopped


def test_a_bug_in_a_provider_still_raises_and_everything_is_closed(scenario, make_plugins, tmp_path):
    provider = Outage({5: KeyError("our bug")})
    with pytest.raises(KeyError, match="our bug"):
        start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "r", llm_provider=provider)
    assert provider.closed


def test_no_unclosed_or_never_awaited_warnings_on_any_exit(scenario, make_plugins, tmp_path):
    """Normal end, a budget stop, a fatal fault, and an interrupt (the main task cancelled,
    as asyncio.run does on Ctrl-C)."""
    from townsquare.engine import Simulation
    from townsquare.launch.run_lock import create
    from townsquare.rundir import RunDir
    from townsquare.launch.scenario_files import load_scenario

    def interrupted(out):
        plugins = make_plugins(enable=[SCRIPTED])
        loaded = load_scenario(scenario, [], plugins)
        run_dir = create(out, loaded.model.name)
        run_dir.write_manifest(new_manifest(loaded, plugins, [], []))

        def progress(round, totals):
            if round == 1:
                asyncio.current_task().cancel()  # what asyncio.run does on Ctrl-C

        simulation = Simulation(loaded, plugins, run_dir, progress=progress, llm_provider=Outage())
        return asyncio.run(simulation.run())

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "a", llm_provider=Outage())
        _, budget = start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "b", llm_provider=Outage(),
                              overrides=["plugins.llm_budget.max_calls=25"])
        _, fatal = start_run(scenario, plugins=make_plugins(enable=[SCRIPTED]), out=tmp_path / "c",
                             llm_provider=Outage({12: HTTPError(403)}))
        summary = interrupted(tmp_path / "d")
        gc.collect()
    assert budget.stopped.startswith("LLM budget reached") and "HTTP 403" in fatal.stopped
    assert summary.stopped == "interrupted" and summary.rounds_completed == 2
    bad = [str(w.message) for w in caught if issubclass(w.category, (ResourceWarning, RuntimeWarning))]
    assert bad == []
