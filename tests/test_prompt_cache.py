"""The prefix-cache measure: shared prefixes counted in whole 16-token (64-character) blocks."""

from townsquare.prompt_cache import PrefixIndex, measure


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
    assert "49.2% of 2082 prompt tokens" in share.line()


def test_same_prompts_same_numbers():
    prompts = [f"You are agent {i % 3}. " * 20 + f"feed {i}" for i in range(50)]
    assert measure(prompts) == measure(list(prompts))
