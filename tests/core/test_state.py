"""Checkpoint encoding and the run directory's crash-safety primitives."""

from __future__ import annotations

import numpy as np

from townsquare import state
from townsquare.launch.run_lock import create
from townsquare.rundir import RunDir
from townsquare.store import EventStore


def test_numpy_and_rng_state_round_trip():
    rng = np.random.default_rng(3)
    rng.random(5)
    original = {"v": np.arange(6, dtype=np.float32).reshape(2, 3), "rng": rng.bit_generator.state, "s": {"b", "a"}, "t": (1, 2)}
    back = state.loads(state.dumps(original))
    assert back["v"].dtype == np.float32 and np.array_equal(back["v"], original["v"])
    assert back["s"] == ["a", "b"] and back["t"] == [1, 2]
    other = np.random.default_rng(0)
    other.bit_generator.state = back["rng"]
    assert other.random() == rng.random()


def test_checkpoints_are_pruned_and_damage_falls_back(tmp_path):
    run = create(tmp_path / "r", "r")
    for r in range(5):
        run.write_checkpoint(r, {"round": r}, keep=2)
    assert [r for r, _ in run.checkpoints()] == [3, 4]
    (tmp_path / "r" / "checkpoints" / "round-000004.json.gz").write_bytes(b"\x1f\x8bgarbage")
    assert run.latest_checkpoint() == (3, {"round": 3})


def test_truncate_after_removes_uncheckpointed_rounds(tmp_path):
    store = EventStore(tmp_path / "e.sqlite")
    for r in range(3):
        store.buffer("actions", (r, "t", "a", "like", None, None, None, None, 1, None, None, None))
        store.commit_round((r, "t", 1, 1, 0, 0.0))
    assert store.truncate_after(0) == 4  # two actions rows and two rounds rows
    assert store.count("actions") == 1 and store.last_round() == 0


def test_manifest_redacts_secret_values_but_keeps_references():
    from townsquare.launch.runner import redact

    data = {"llm": {"name": "openai", "api_key": "sk-123", "api_key_env": "OPENAI_API_KEY", "api_key_file": "keys.txt"},
            "platform": {"tokens": "tokens.txt", "token": "abc"}, "populations": [{"password": "pw"}]}
    assert redact(data) == {"llm": {"name": "openai", "api_key": "***", "api_key_env": "OPENAI_API_KEY", "api_key_file": "keys.txt"},
                            "platform": {"tokens": "tokens.txt", "token": "***"}, "populations": [{"password": "***"}]}


def test_logs_redact_secret_fields_only():
    from townsquare.lib.logs import redact_secrets

    out = redact_secrets(None, None, {"event": "x", "api_key": "sk-1", "prompt_tokens": 12, "token": "t", "tokens_file": "f"})
    assert out == {"event": "x", "api_key": "***", "prompt_tokens": 12, "token": "***", "tokens_file": "f"}
