"""End to end, through the CLI, against the fault server:

a) a run with 20 % faults completes, every fault is counted in ``llm_calls`` and no action
   falls outside the policy's action set;
b) ``townsquare replay`` of the finished run, with the server gone, is identical: ``agents``,
   ``posts``, ``actions``, ``follows``, ``metrics`` row for row; ``llm_calls`` without the
   recording's ``error`` rows, ``ok`` read as ``cached``, cost 0 (``latency_ms`` and ``seq``
   ignored); a missing answer fails loudly;
c) a run stopped by its budget (exit 3, the message says what was spent) and resumed with a
   raised budget equals an unstopped run in every table, ``llm_calls`` status and cost
   included (only ``latency_ms`` differs), and pays no call twice.

The scenario's agents have distinct names, so every prompt is distinct per agent and the fault
server's seeded faults make each run deterministic.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
import sqlite3

import pytest

from test_resume import cli, exported
from townsquare.testing.fault_server import FaultServer

NAMES = ["Ada", "Bo", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal"]
TOPICS = ["hiking in the mountains", "jazz piano", "football", "vegan cooking", "birds", "chess", "sailing", "poetry"]
#: 20 % faults. Runs are deterministic; with this seed two decisions get garbage twice in a row.
FAULTS = dict(seed=3, rate_429=0.03, rate_500=0.02, rate_hang=0.02, rate_garbage=0.09, rate_truncated=0.04, retry_after_s=0, hang_s=3)
KEY = {"OPENAI_API_KEY": "test-key"}
SCRIPTED = ["-p", "townsquare.testing.scripted"]


def scenario(base_url: str, timeout_s: float = 0.5) -> str:
    personas = ",\n".join(f'  {{ name = "{n}", sentences = ["I love {t}.", "I post about {t} every day."] }}' for n, t in zip(NAMES, TOPICS))
    return f"""name = "faults"
seed = 5
rounds = 6
[activity]
model = "always"
[recommender]
name = "random"
[llm]
name = "openai"
model = "test-model"
base_url = "{base_url}"
timeout_s = {timeout_s}
price_prompt_per_1k = 0.5
price_completion_per_1k = 1.5
[plugins.scripted]
policy_post_probability = 0.6
[plugins.llm_retry]
base_delay_s = 0.01
attempts = 10
[[populations]]
name = "users"
count = {len(NAMES)}
slots = {{ policy = "scripted_feed" }}
[populations.personas]
name = "inline"
items = [
{personas}
]
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A finished run against a server serving 20 % faults, and what the server served."""
    tmp = tmp_path_factory.mktemp("faults")
    with FaultServer(latency_ms=2, **FAULTS) as server:
        (tmp / "s.toml").write_text(scenario(server.base_url))
        result = cli("run", str(tmp / "s.toml"), "--out", str(tmp / "run"), "--quiet", *SCRIPTED, env=KEY)
        counts = dict(server.counts)
    assert result.returncode == 0, result.stderr
    return tmp, counts


@pytest.mark.slow
def test_a_run_with_20_percent_faults_completes_and_counts_every_fault(recorded):
    tmp, counts = recorded
    tables = exported(tmp / "run", tmp / "export")
    calls = tables["llm_calls"]
    errors = [c["error"].split(":")[0] for c in calls if c["status"] == "error"]
    served = {kind: counts.get(kind, 0) for kind in ("429", "500", "hang", "garbage", "truncated")}
    assert 0.1 < sum(served.values()) / counts["requests"] < 0.3 and all(served.values()), served
    kinds = Counter(c["error_kind"] for c in calls if c["status"] == "error")
    # a cut-off like/skip is a retried fault; a cut-off post is a long post (an ok row)
    assert 0 < kinds.pop("length") <= served["truncated"]
    # a loaded machine may let a normal answer pass the 0.5 s timeout too: more timeouts are fine
    assert kinds.pop("timeout") >= served["hang"] and errors.count("APITimeoutError") >= served["hang"]
    assert kinds == {"rate_limit": served["429"], "server": served["500"]}
    assert (errors.count("RateLimitError"), errors.count("InternalServerError")) == (served["429"], served["500"])
    assert sum(c["status"] in ("ok", "error") for c in calls) == counts["requests"]  # one row per request served
    assert any(c["status"] == "parse_failure" for c in calls)  # garbage twice in a row: the default was used
    assert any(c["purpose"] == "like.repair" for c in calls)
    post_ids = {p["post_id"] for p in tables["posts"]}
    assert {a["kind"] for a in tables["actions"]} == {"browse", "like", "post"}
    assert all(a["target_post"] in post_ids for a in tables["actions"] if a["kind"] == "like")


@pytest.mark.slow
def test_replay_without_the_server_is_identical(recorded):
    tmp, _ = recorded  # the fixture has stopped the server
    result = cli("replay", str(tmp / "run"), "--out", str(tmp / "replay"), env={"OPENAI_API_KEY": ""})
    assert result.returncode == 0, result.stderr
    assert "replay identical" in result.stderr
    original = exported(tmp / "run", tmp / "export_original")
    replayed = exported(tmp / "replay", tmp / "export_replay")
    for table in ("agents", "posts", "actions", "follows", "metrics"):
        assert original[table] == replayed[table], table

    def as_replayed(rows):
        out = []
        for row in rows:
            if row["status"] == "error":
                continue
            row = {k: v for k, v in row.items() if k != "seq"}
            if row["status"] == "ok":
                row.update(status="cached", cost="0.0")
            out.append(row)
        return out

    assert as_replayed(original["llm_calls"]) == [{k: v for k, v in r.items() if k != "seq"} for r in replayed["llm_calls"]]
    assert {r["status"] for r in replayed["llm_calls"]} == {"cached", "parse_failure"}


@pytest.mark.slow
def test_a_replay_missing_an_answer_fails_loudly(recorded):
    tmp, _ = recorded
    shutil.copytree(tmp / "run", tmp / "damaged")
    db = sqlite3.connect(tmp / "damaged" / "llm_cache.sqlite")
    db.execute("DELETE FROM responses WHERE rowid = (SELECT MAX(rowid) FROM responses WHERE purpose = 'like')")
    db.commit()
    db.close()
    result = cli("replay", str(tmp / "damaged"), "--out", str(tmp / "replay_damaged"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert re.fullmatch(r"error: cache miss in replay: like for users-\d{4} \(round \d+, the agent's call \d+ of the round; .*llm_cache\.sqlite\)",
                        result.stderr.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_budget_stop_then_resume_equals_an_unstopped_run(tmp_path):
    with FaultServer(latency_ms=2) as server:
        # no faults served: a timeout far above any answer, so a busy machine cannot make the two runs differ
        (tmp_path / "s.toml").write_text(scenario(server.base_url, timeout_s=30))
        whole = cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "whole"), "--quiet", *SCRIPTED, env=KEY)
        assert whole.returncode == 0, whole.stderr
        paid_once = server.counts["requests"]

        stopped = cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "stopped"), "--quiet", *SCRIPTED,
                      "--set", "plugins.llm_budget.max_calls=120", env=KEY)
        assert stopped.returncode == 3, stopped.stderr
        assert re.search(r"stopped: LLM budget reached: 120 calls \(limit 120\), [\d,]+ tokens, \$\d+\.\d\d; raise it with: "
                         rf"townsquare resume {re.escape(str(tmp_path / 'stopped'))} --set plugins.llm_budget.max_calls=240",
                         stopped.stderr), stopped.stderr
        not_finished = cli("replay", str(tmp_path / "stopped"), "--out", str(tmp_path / "nope"))
        assert not_finished.returncode == 2 and "replay needs a finished run" in not_finished.stderr

        resumed = cli("resume", str(tmp_path / "stopped"), "--quiet", "--set", "plugins.llm_budget.max_calls=100000", env=KEY)
        assert resumed.returncode == 0, resumed.stderr
        assert server.counts["requests"] == 2 * paid_once  # the discarded round's calls came from the cache

    a = exported(tmp_path / "whole", tmp_path / "export_whole")
    b = exported(tmp_path / "stopped", tmp_path / "export_stopped")
    assert a["llm_calls"] and a["posts"]
    for table in a:
        assert a[table] == b[table], f"table {table} differs after a budget stop and resume"


def test_a_missing_key_is_one_line(tmp_path):
    (tmp_path / "s.toml").write_text(scenario("http://127.0.0.1:9/v1"))
    result = cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "r"), *SCRIPTED, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: llm openai API key for http://127.0.0.1:9/v1: environment variable OPENAI_API_KEY is not set")


def test_estimate_forecasts_calls_tokens_and_cost_without_an_endpoint(tmp_path):
    (tmp_path / "s.toml").write_text(scenario("http://127.0.0.1:9/v1"))  # nothing listens there
    result = cli("estimate", str(tmp_path / "s.toml"), *SCRIPTED, "--completion-tokens", "post=40", "--no-range", env={"OPENAI_API_KEY": ""})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ESTIMATE for ") and "(not a language model)" in lines[0]
    rows = {line.split()[0]: line.split()[1:] for line in lines[3:] if line and line.split()[0] in ("like", "post", "total")}
    calls = {name: int(values[0].replace(",", "")) for name, values in rows.items()}
    assert calls["like"] > 0 and calls["post"] > 0 and calls["total"] == calls["like"] + calls["post"]
    prompt, completion = (int(v.replace(",", "")) for v in rows["post"][1:3])
    assert completion == 40 * calls["post"]
    assert rows["post"][3] == f"${(prompt * 0.5 + completion * 1.5) / 1000:,.4f}"
    # the cacheable prefix of the dry run's prompts, priced at half the prompt price (no cached price set)
    cache = next(line for line in lines if line.startswith("cacheable prompt prefix: "))
    cached, total = (int(v.replace(",", "")) for v in re.match(r"cacheable prompt prefix: ([\d,]+) of ([\d,]+) ", cache).groups())
    assert total == int(rows["total"][1].replace(",", "")) and 0 < cached < total
    assert cache.endswith(f"at 0.25 per 1k cached prompt tokens (against 0.5) it saves ${cached * 0.25 / 1000:,.4f} "
                          f"of ${total * 0.5 / 1000:,.4f} prompt cost.")
