"""Every constraint mode of the openai provider against the fault server at 20 % faults: Zhou et
al.'s agent (plans, like / reblog / comment decisions, topic lists, follows) finishes its run,
every answer row says the mode it ran in, and the structured answers are counted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from townsquare.testing.fault_server import FaultServer

#: 20 % faults, of the kinds a constrained answer can still meet (a proxy does not care what was asked)
FAULTS = dict(seed=11, rate_429=0.03, rate_500=0.03, rate_hang=0.02, rate_garbage=0.06, rate_truncated=0.03,
              rate_empty_choices=0.02, rate_200_html=0.01, retry_after_s=0, hang_s=2)

#: Zhou et al.'s agents with and without plans (a format string: braces doubled)
POPULATIONS = """
[[populations]]
name = "browsers"
count = 3
activity = {{ model = "always" }}
personas = {{ name = "synthetic" }}
slots = {{ policy = "social_agent", planner = "none", "persona.knowledge" = "none" }}
config = {{ social_agent = {{ post_probability_without_plan = 0.5 }} }}

[[populations]]
name = "planners"
count = 2
personas = {{ name = "synthetic" }}
slots = {{ policy = "social_agent", "persona.knowledge" = "none" }}
"""

SCENARIO = """
name = "structured-{structured}"
seed = 3
rounds = 6
[clock]
start = 2024-01-01T06:00:00
minutes_per_round = 360
[recommender]
name = "chronological"
[llm]
name = "openai"
model = "test-model"
base_url = "{base_url}"
api_key_env = ""
timeout_s = 0.5
structured = "{structured}"
[plugins.llm_retry]
base_delay_s = 0.01
attempts = 10
[plugins.social_agent]
feed_size = 3
[plugins.follow_reflection]
interval_hours = 12

""" + POPULATIONS

#: dialect -> the mode each kind of request must run in
EXPECTED = {
    "json_schema": {"like": "json_schema", "plan": "json_schema", "topics": "json_schema", "comment": "prompt"},
    "vllm": {"like": "guided_choice", "plan": "json_schema", "topics": "json_schema", "comment": "prompt"},
    "vllm_guided": {"like": "guided_choice", "plan": "json_schema", "topics": "json_schema", "comment": "prompt"},
    "json_object": {"like": "prompt", "plan": "json_object", "topics": "json_object", "comment": "prompt"},
    "off": {"like": "prompt", "plan": "prompt", "topics": "prompt", "comment": "prompt"},
}


@pytest.mark.parametrize("structured", list(EXPECTED))
def test_a_fault_run_finishes_in_every_mode(structured, write_scenario, run_scenario, tmp_path):
    with FaultServer(latency_ms=1, **FAULTS) as server:
        path = write_scenario(SCENARIO.format(structured=structured, base_url=server.base_url))
        run_dir, summary = run_scenario(path)
        faults = sum(n for kind, n in server.counts.items() if kind not in ("ok", "requests") and not kind.startswith("embeddings."))
    assert summary.stopped is None and summary.rounds_completed == 6
    db = sqlite3.connect(Path(run_dir.path) / "events.sqlite")
    assert faults > 0 and db.execute("SELECT COUNT(*) FROM llm_calls WHERE status = 'error'").fetchone()[0] > 0
    modes = dict(db.execute("SELECT purpose, GROUP_CONCAT(DISTINCT mode) FROM llm_calls WHERE status = 'ok' "
                            "AND purpose IN ('like', 'reblog', 'comment', 'plan', 'topics') GROUP BY purpose"))
    for purpose, mode in EXPECTED[structured].items():
        assert modes.get(purpose) == mode, (purpose, modes)
    assert modes["reblog"] == EXPECTED[structured]["like"]
    kinds = {k for (k,) in db.execute("SELECT DISTINCT kind FROM actions")}
    assert {"browse", "post"} <= kinds <= {"browse", "post", "like", "reblog", "comment", "follow"}
    answers = run_dir.read_manifest()["structured_answers"]
    assert set(answers) >= {"like", "reblog", "comment", "plan", "topics"}
    constrained = sum(answers[p]["constrained"] for p in ("like", "reblog"))
    assert (constrained > 0) == (EXPECTED[structured]["like"] != "prompt")
