"""The LLM path's shortcuts change no output.

The hot path keys a request by hashing its shape once (:func:`townsquare.llm._key_frame`),
encodes JSON with kept C encoders (:func:`townsquare.state.json_encoder`), builds an answer's
record positionally and hashes no prompt shorter than a cache block. Each is checked against
the plain computation, and whole offline runs of the examples against digests of their tables
made with the code before these shortcuts (97d712e): the event log, ``llm_calls``
(``latency_ms`` aside) and the response journal must be byte for byte what they were. A
change that means to alter what runs write updates :data:`DIGESTS` (the failure prints the
new ones).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sqlite3
from dataclasses import fields

import pytest

from helpers import ROOT
from townsquare.llm import _KEY_JSON, Accounting, LLMCallRecord, LLMRequest, LLMResponse, Message
from townsquare.prompt_cache import BLOCK_TOKENS, CHARS_PER_TOKEN, prompt_blocks
from townsquare.state import json_encoder

EXAMPLES = ROOT / "examples"
#: sha256 of each table's rows (``latency_ms`` and ``wall_seconds`` left out), written by 97d712e
#: (the code without these shortcuts)
DIGESTS = {
    "quickstart-scripted": {
        "actions": "ef34c6beba68a42a", "agents": "f2d7e7bf22853ac9", "follows": "4f53cda18c2baa0c", "llm_calls": "664a82360900c61d",
        "metrics": "aba2242f9c107245", "posts": "4ca9cf45052fecca", "reflections": "4f53cda18c2baa0c", "rounds": "9a872d1a407757e9",
        "journal.meta": "4a24050f5617adbe", "journal.responses": "e7fa913485b65b6a",
    },
    "quickstart-oracle": {
        "actions": "e7cc22dd22a0858d", "agents": "f2d7e7bf22853ac9", "follows": "4f53cda18c2baa0c", "llm_calls": "42c6ba89a3b18755",
        "metrics": "80cfb6d5b9073f7d", "posts": "0cdfc21ddf9b164b", "reflections": "4f53cda18c2baa0c", "rounds": "3c44deae2bb0b81b",
        "journal.meta": "3c33de929ac6dfca", "journal.responses": "47dfeaae26cac6f7",
    },
    "conformity-oracle": {
        "actions": "ba6022f471ad3cad", "agents": "0822bfcd68cd740a", "follows": "4f53cda18c2baa0c", "llm_calls": "ef2b0ecae8a20be6",
        "metrics": "14517e07c15c8499", "posts": "4f53cda18c2baa0c", "reflections": "4f53cda18c2baa0c", "rounds": "c96129e06260e45d",
        "journal.meta": "3c33de929ac6dfca", "journal.responses": "920f38c4941d523a",
    },
    "generative_agents_social-oracle": {
        "actions": "4c6839b5d44434b1", "agents": "a30000168657a09c", "follows": "4f53cda18c2baa0c", "llm_calls": "b44377d1a49cdfed",
        "metrics": "3d725fdfe6b1d91d", "posts": "47b4658fc56f3766", "reflections": "4f53cda18c2baa0c", "rounds": "f7beb8b8ee9308fe",
        "journal.meta": "3c33de929ac6dfca", "journal.responses": "b653258df59e22e8",
    },
    "quickstart-openai": {
        "actions": "2405a9f5c6a38989", "agents": "f2d7e7bf22853ac9", "follows": "4f53cda18c2baa0c", "llm_calls": "31c21da8183e8c5f",
        "metrics": "ed0eaed54ffbed14", "posts": "4b65db51a4f13b0c", "reflections": "4f53cda18c2baa0c", "rounds": "45aa8a18f22601dc",
        "journal.meta": "3a09b2c19d7be392", "journal.responses": "978d527458cf9622",
    },
}
RUNS = {
    "quickstart-scripted": ("quickstart.toml", "scripted"),
    "quickstart-oracle": ("quickstart.toml", "oracle"),
    "conformity-oracle": ("conformity.toml", "oracle"),
    "generative_agents_social-oracle": ("generative_agents_social.toml", "oracle"),
}
VOLATILE = {"latency_ms", "wall_seconds"}


def table_digests(run_dir, journal_as_set: bool = False) -> dict[str, str]:
    """sha256 of every table of the run's event log and response journal, volatile columns aside
    (``journal_as_set``: the journal's rows in sorted order)."""
    digests = {}
    for path, prefix in ((run_dir / "events.sqlite", ""), (run_dir / "llm_cache.sqlite", "journal.")):
        db = sqlite3.connect(path)
        try:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
                columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})") if row[1] not in VOLATILE]
                rows = db.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid").fetchall()
                if journal_as_set and prefix:
                    rows.sort(key=repr)
                digests[prefix + table] = hashlib.sha256(repr(rows).encode()).hexdigest()[:16]
        finally:
            db.close()
    return digests


@pytest.mark.parametrize("name", list(RUNS))
def test_offline_runs_write_what_they_wrote_before_the_shortcuts(name, run_scenario, make_plugins):
    example, model = RUNS[name]
    plugins = make_plugins(enable=["townsquare.testing.scripted", "townsquare.testing.oracle"])
    run_dir, summary = run_scenario(EXAMPLES / example, plugins=plugins, overrides=[f'llm.name="{model}"', "rounds=3"])
    assert not summary.stopped
    got = table_digests(run_dir.path)
    assert got == DIGESTS[name], f"{name}: new digests {json.dumps(got, indent=1)}"


def test_a_run_against_an_endpoint_sends_and_writes_what_it_did_before_the_shortcuts(run_scenario, make_plugins, monkeypatch):
    """The ``openai`` provider's request bodies decide the test server's answers and faults (a
    hash of each body): the same tables mean the same bytes were sent. The journal's rows are
    compared as a set (their order is the order answers arrived in)."""
    from townsquare.testing.fault_server import FaultServer

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FaultServer(seed=5, rate_500=0.03, rate_garbage=0.03) as server:
        run_dir, summary = run_scenario(EXAMPLES / "quickstart.toml", plugins=make_plugins(), overrides=[
            'llm.name="openai"', 'llm.model="test-model"', f'llm.base_url="{server.base_url}"', 'llm.transport="http"',
            "plugins.llm_retry.base_delay_s=0.01", "rounds=3"])
    assert not summary.stopped
    got = table_digests(run_dir.path, journal_as_set=True)
    assert got == DIGESTS["quickstart-openai"], f"new digests {json.dumps(got, indent=1)}"


# --------------------------------------------------------------------------- the pieces


def test_request_keys_equal_the_digest_of_the_whole_payload():
    rng = random.Random(7)
    alphabet = 'ab"\\\n é\u2028\x00{}[]'
    checked = 0
    for _ in range(2000):
        messages = tuple(Message(rng.choice(["system", "user", "assistant"]),
                                 "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))))
                         for _ in range(rng.randint(0, 3)))
        request = LLMRequest(messages, labels=rng.choice([None, (), ("like", "skip"), ("a\x00messages\x00",), ("é",)]),
                             answer_prefixes=rng.choice([None, (), ("no comment", "Comment content:")]),
                             json_schema=rng.choice([None, {"type": "object"}]), max_tokens=rng.choice([8, 256, True]),
                             temperature=rng.choice([0.7, 0, 1, 1.0]), mode=rng.choice([None, "prompt", "logprob"]))
        model = rng.choice(["m", "é-model"])
        whole = hashlib.sha256(_KEY_JSON(request.key_payload(model)).encode()).hexdigest()
        assert request.cache_key(model) == whole, request
        checked += request.json_schema is None
    assert checked > 500  # the per-shape path, not only the whole-payload one, was checked
    # the text an answer must not copy is part of the request: keyed whole, each its own key
    plain = LLMRequest((Message("user", "Comment on this post"),), answer_prefixes=("no comment", "Comment content:"))
    keys = {plain.cache_key("m")}
    for post in ("The bridge is closed", "The bridge is open"):
        avoiding = LLMRequest(plain.messages, answer_prefixes=plain.answer_prefixes, avoid=post)
        assert avoiding.cache_key("m") == hashlib.sha256(_KEY_JSON(avoiding.key_payload("m")).encode()).hexdigest()
        keys.add(avoiding.cache_key("m"))
    assert len(keys) == 3


def test_request_keys_are_those_journals_were_written_with():
    """Keys recorded in response journals before the per-shape hashing (951897a)."""
    assert LLMRequest((Message("user", "x"),)).cache_key("m") == "2439a63c7cf181ba3aceb7aca1c7545bbab8a13438ea255e55ee81049122523f"
    labels = LLMRequest((Message("system", "Tu es é"), Message("user", 'x\n"y"')), labels=("like", "skip"), max_tokens=8,
                        mode="scripted")
    assert labels.cache_key("m") == "1ce9ae33b112c3a84d31ecccc8b390385756c5974c07a0a6911170f385c3b0bf"
    schema = LLMRequest((Message("user", "x"),), json_schema={"type": "object", "properties": {"a": {"type": "string"}}},
                        mode="grammar")
    assert schema.cache_key("m") == "97be4d556aab97fc0ce1d3ccd5ced93e26f8c4d20e4a6c6695b0ff8d12cfbce4"


def test_a_message_that_is_not_text_is_keyed_from_the_whole_payload():
    request = LLMRequest((Message("user", ["an", "image part"]),), labels=("like", "skip"))  # type: ignore[arg-type]
    assert request.cache_key("m") == hashlib.sha256(_KEY_JSON(request.key_payload("m")).encode()).hexdigest()


@pytest.mark.parametrize("options", [dict(sort_keys=True, ensure_ascii=False), dict(default=str), dict(sort_keys=True),
                                     dict(ensure_ascii=False, separators=(",", ":"), allow_nan=False)])
def test_kept_json_encoders_write_what_json_dumps_writes(options):
    encode = json_encoder(**options)
    values = [{"b": 1, "a": [1.5, 'é\n"', None, True, -0.0, 1e300]}, "text\u2028", 3, 2.5, [], {}, {"x": {"y": [{"z": []}]}},
              {"mode": "scripted", "label_probs": {"like": 0.25}}]
    for value in values:
        assert encode(value) == json.dumps(value, **options)
    if options.get("default") is str:
        assert encode({"a": object}) == json.dumps({"a": object}, default=str)
    elif options.get("allow_nan") is False:
        with pytest.raises(ValueError):
            encode([float("nan")])


def test_prompts_shorter_than_a_block_have_no_keys_and_longer_ones_keep_theirs():
    block = BLOCK_TOKENS * CHARS_PER_TOKEN
    assert prompt_blocks("x" * (block - 1)) == b""
    one = prompt_blocks("x" * block + "tail")
    assert len(one) == 8 and one == hashlib.blake2b(("x" * block).encode(), digest_size=8).digest()
    assert prompt_blocks("x" * (2 * block))[:8] == one


def test_an_answers_record_has_each_field_where_it_belongs():
    """The accounting builds an answer's record positionally (a call's hot path): every field
    lands in its own place."""
    records = []

    class Provider:
        name, model = "prov", "mod"

        async def complete(self, request):
            return LLMResponse(text="like", prompt_tokens=11, completion_tokens=3, model="answered-by", provider="served-by",
                               latency_ms=12.5, meta={"mode": "logprob"})

    accounting = Accounting(Provider(), records.append, lambda: 4, price=lambda response: 0.25)
    prompt = "p" * 70
    request = LLMRequest((Message("user", prompt),), labels=("like", "skip"), purpose="like", agent_id="a-1", mode="prompt")
    asyncio.run(accounting(request, Provider().complete))
    record, = records
    assert {f.name: getattr(record, f.name) for f in fields(LLMCallRecord)} == {
        "round": 4, "agent_id": "a-1", "purpose": "like", "provider": "served-by", "model": "answered-by", "status": "ok",
        "prompt_tokens": 11, "completion_tokens": 3, "latency_ms": 12.5, "cost": 0.25, "error": None, "kind": None,
        "mode": "logprob", "issue": None, "prompt_blocks": prompt_blocks(prompt), "prompt_chars": 70,
    }



def test_a_bare_label_is_read_as_the_whole_search_reads_it():
    """:func:`match_label` takes an answer that is exactly a label from a table before trying the
    labels' openings; it reads every answer as the search over the openings alone does."""
    import re

    from townsquare.llm_answers import ParseFailure, match_label

    def searched(text, labels):  # the reading without the table
        cleaned = text.strip().strip("\"'`*").strip().lower()
        whole = cleaned.rstrip(".!")
        for low, label in sorted(((label.lower(), label) for label in labels), key=lambda pair: -len(pair[0])):
            if whole == low or re.compile(rf"{re.escape(low)}\b(?![-'])").match(cleaned):
                return label
        return None

    rng = random.Random(3)
    words = ["like", "Like", "skip", "no operation", "no", "ok!", "ok", "like it", "u-12", "u-1", "do not follow"]
    for _ in range(3000):
        labels = tuple(rng.sample(words, rng.randint(1, 4)))
        text = rng.choice([rng.choice(words), rng.choice(words).upper(), rng.choice(words) + ".", f'"{rng.choice(words)}"',
                           rng.choice(words) + " " + rng.choice(words), "  " + rng.choice(words) + "! ", "nothing"])
        try:
            got = match_label(text, labels)
        except ParseFailure:
            got = None
        assert got == searched(text, labels), (text, labels)
