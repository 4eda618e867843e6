"""The prefix-cache measure: shared prefixes counted in whole 16-token (64-character) blocks."""

import json
import sqlite3

from helpers import ROOT
from townsquare.lib.cache_share import DEFAULT_CACHED_PRICE_RATIO, cache_line, cached_prompt_price, measure
from townsquare.prompt_cache import KEY_BYTES, PrefixIndex, cached_tokens, prompt_blocks


def test_shared_prefix_counted_in_whole_blocks():
    stable = "S" * 200  # 3 whole blocks of 64 characters (192) and 8 characters more
    index = PrefixIndex()
    assert index.add(stable + "a" * 100) == 0
    # shares 200 characters: 3 whole blocks = 48 tokens (the partial 4th block does not count)
    assert index.add(stable + "b" * 100) == 48
    # the identical prompt is served in its whole blocks: 300 chars -> 4 blocks = 64 tokens
    assert index.add(stable + "b" * 100) == 64
    # a change in the first block breaks the chain even where later blocks match
    assert index.add("X" + stable[1:] + "b" * 100) == 0


def test_measure_share_and_long_prompts():
    prompts = ["P" * 4096 + "q" * 64, "P" * 4096 + "r" * 64, "short"]
    share = measure(prompts)
    assert (share.prompts, share.long_prompts) == (3, 2)
    assert share.prompt_tokens == 1040 + 1040 + 2
    assert share.cached_prefix_tokens == 1024
    assert round(share.share, 4) == round(1024 / 2082, 4)
    assert share.saving(10.0, 0.5) == 10.0 * (1024 / 2082) * 0.5
    assert share.saving(10.0, 0.1) == 10.0 * (1024 / 2082) * 0.9
    assert "49.2% of 2082 prompt tokens" in share.line()


def test_same_prompts_same_numbers():
    prompts = [f"You are agent {i % 3}. " * 20 + f"feed {i}" for i in range(50)]
    assert measure(prompts) == measure(list(prompts))


def test_blocks_key_prefixes_and_the_index_survives_a_checkpoint():
    a, b = "S" * 130 + "a", "S" * 130 + "b"
    assert len(prompt_blocks(a)) == 2 * KEY_BYTES and prompt_blocks(a) == prompt_blocks(b)
    assert prompt_blocks("T" + a[1:])[:KEY_BYTES] != prompt_blocks(a)[:KEY_BYTES]
    index = PrefixIndex()
    index.add(a)
    restored = PrefixIndex()
    restored.set_state(json.loads(json.dumps(index.get_state())))
    assert restored.add(b) == index.add(b) == 32
    assert restored.get_state() == index.get_state()


def test_cached_tokens_in_the_providers_tokens():
    # 64 of 200 characters shared: 16 tokens at 4 characters; the provider counted 40 tokens
    assert cached_tokens(16, 200, 40) == round(40 * 64 / 200)
    assert cached_tokens(16, 200, 0) == 16  # the provider counted none: the estimate's tokens
    assert cached_tokens(64, 256, 50) == 50  # never more than the prompt


def test_cached_price_is_a_setting_with_a_default_ratio():
    assert cached_prompt_price({"price_prompt_per_1k": 0.4}) == 0.4 * DEFAULT_CACHED_PRICE_RATIO
    assert cached_prompt_price({"price_prompt_per_1k": 0.4, "price_cached_prompt_per_1k": 0.04}) == 0.04
    assert cached_prompt_price({"name": "scripted"}) is None and cached_prompt_price(None) is None
    line = cache_line(2000, 1500, {"price_prompt_per_1k": 1.0, "price_cached_prompt_per_1k": 0.1})
    assert "1,500 of 2,000 prompt tokens (75.0%" in line
    assert line.endswith(f"saves ${1500 * 0.9 / 1000:,.4f} of ${2.0:,.4f} prompt cost.")
    assert "no price: set llm.price_prompt_per_1k" in cache_line(2000, 1500, {"name": "scripted"})


def test_a_run_records_each_answers_cached_prefix_in_issue_order(run_scenario):
    result, _ = run_scenario(ROOT / "examples" / "quickstart.toml", overrides=['llm.name="scripted"', "rounds=3"])
    db = sqlite3.connect(result.path / "events.sqlite")
    rows = db.execute("SELECT status, prompt_tokens, cached_prefix_tokens FROM llm_calls ORDER BY seq").fetchall()
    answered = [(tokens, cached) for status, tokens, cached in rows if status in ("ok", "cached")]
    assert answered[0][1] == 0  # the run's first prompt has nothing before it
    assert all(0 <= cached <= tokens for tokens, cached in answered)
    assert sum(cached for _, cached in answered) > 0  # the agents' prompts share their instructions
    assert all(cached is None for status, _, cached in rows if status not in ("ok", "cached"))
