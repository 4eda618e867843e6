"""How much of a run's prompt text a provider's prefix cache could serve.

vLLM's automatic prefix caching keeps the key/value blocks of earlier prompts, 16 tokens a block,
and serves a new prompt's leading blocks from them when every token up to the end of the block is
the same; OpenAI's prompt caching serves prefixes of prompts of 1,024 tokens or more.
:class:`PrefixIndex` measures, for each prompt in the order the run issues them, the longest
prefix (whole 16-token blocks) it shares with an earlier prompt of the run.

Tokens: with no tokenizer at hand a token is counted as 4 characters, the same approximation
:mod:`townsquare.dry_run` estimates prompt tokens with, so a block is 64 characters. The index is
a set of chained block hashes (block *k*'s key hashes block *k*'s text with block *k - 1*'s key),
so a lookup costs one hash per block of the prompt, whatever the number of earlier prompts, and
the result depends only on the prompts and their order (a replay measures the same numbers).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: characters per token where no tokenizer is at hand (as :mod:`townsquare.dry_run`)
CHARS_PER_TOKEN = 4
#: tokens per cache block (vLLM's default ``block_size``)
BLOCK_TOKENS = 16
#: the shortest prompt OpenAI's prompt caching serves (tokens)
OPENAI_MIN_CACHED_TOKENS = 1024
#: price of a cached prompt token over an uncached one; 0.5 is OpenAI's discount for cached input
#: when prompt caching was introduced (GPT-4o, October 2024); a setting where used
CACHED_PRICE_RATIO = 0.5


def prompt_tokens(prompt: str) -> int:
    """Approximate tokens of ``prompt`` (characters / :data:`CHARS_PER_TOKEN`, rounded up)."""
    return -(-len(prompt) // CHARS_PER_TOKEN)


class PrefixIndex:
    """Every whole block prefix of the prompts seen so far, as chained block hashes."""

    def __init__(self, block_tokens: int = BLOCK_TOKENS, chars_per_token: int = CHARS_PER_TOKEN):
        self.block_chars = block_tokens * chars_per_token
        self.block_tokens = block_tokens
        self._seen: set[bytes] = set()

    def _keys(self, prompt: str):
        key = b""
        for start in range(0, len(prompt) - self.block_chars + 1, self.block_chars):
            key = hashlib.blake2b(key + prompt[start:start + self.block_chars].encode(), digest_size=16).digest()
            yield key

    def add(self, prompt: str) -> int:
        """Tokens of ``prompt``'s longest whole-block prefix seen in an earlier prompt; then remember it."""
        shared, matching = 0, True
        for key in self._keys(prompt):
            if matching and key in self._seen:
                shared += self.block_tokens
            else:
                matching = False
                self._seen.add(key)
        return shared


@dataclass(frozen=True)
class CacheShare:
    """The cacheable share of a run's prompt tokens and what it would save."""

    prompts: int
    prompt_tokens: int
    cached_prefix_tokens: int
    long_prompts: int  # prompts of OPENAI_MIN_CACHED_TOKENS tokens or more

    @property
    def share(self) -> float:
        return self.cached_prefix_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def long_share(self) -> float:
        return self.long_prompts / self.prompts if self.prompts else 0.0

    def saving(self, prompt_cost: float, cached_price_ratio: float = CACHED_PRICE_RATIO) -> float:
        """Money saved on ``prompt_cost`` (what the prompt tokens cost uncached) at ``cached_price_ratio``."""
        return prompt_cost * self.share * (1.0 - cached_price_ratio)

    def line(self) -> str:
        return (f"cacheable prefix: {self.share:.1%} of {self.prompt_tokens} prompt tokens "
                f"(16-token blocks, ~{CHARS_PER_TOKEN} chars/token); "
                f"{self.long_share:.1%} of {self.prompts} prompts have >= {OPENAI_MIN_CACHED_TOKENS} tokens")


def measure(prompts) -> CacheShare:
    """:class:`CacheShare` of ``prompts`` in the order given."""
    index, n, total, cached, long = PrefixIndex(), 0, 0, 0, 0
    for prompt in prompts:
        tokens = prompt_tokens(prompt)
        n, total, cached = n + 1, total + tokens, cached + index.add(prompt)
        long += tokens >= OPENAI_MIN_CACHED_TOKENS
    return CacheShare(n, total, cached, long)
