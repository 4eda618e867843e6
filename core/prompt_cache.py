"""How much of a run's prompt text a provider's prefix cache could serve.

vLLM's automatic prefix caching keeps the key/value blocks of earlier prompts, 16 tokens a block,
and serves a new prompt's leading blocks from them when every token up to the end of the block is
the same; OpenAI's prompt caching serves prefixes of prompts of 1,024 tokens or more.
:class:`PrefixIndex` measures, for each prompt in the order the run issues them, the longest
prefix (whole 16-token blocks) it shares with an earlier prompt of the run.

Tokens: with no tokenizer at hand a token is counted as 4 characters, the same approximation
:mod:`townsquare.dry_run` estimates prompt tokens with, so a block is 64 characters. A prompt's
blocks are keyed by a hash of the prompt up to the end of the block (:func:`prompt_blocks`, 8
bytes a block), so a lookup costs one hash per block of the prompt, whatever the number of
earlier prompts, and the result depends only on the prompts and their order (a replay measures
the same numbers). The LLM layer keys each answered call's prompt this way and the engine adds
them to the run's index in the order the calls were issued (``llm_calls.cached_prefix_tokens``);
the index is part of a checkpoint, so a resumed run counts as an uninterrupted one.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

#: characters per token where no tokenizer is at hand (as :mod:`townsquare.dry_run`)
CHARS_PER_TOKEN = 4
#: tokens per cache block (vLLM's default ``block_size``)
BLOCK_TOKENS = 16
#: the shortest prompt OpenAI's prompt caching serves (tokens)
OPENAI_MIN_CACHED_TOKENS = 1024
#: bytes of one block's key
KEY_BYTES = 8
#: a cached prompt token's price over an uncached one where ``[llm] price_cached_prompt_per_1k``
#: is not set: OpenAI's discount for cached input when prompt caching was introduced (GPT-4o,
#: October 2024); later models bill cached input at 10-25 %, so set the price for those
DEFAULT_CACHED_PRICE_RATIO = 0.5


def prompt_tokens(prompt: str) -> int:
    """Approximate tokens of ``prompt`` (characters / :data:`CHARS_PER_TOKEN`, rounded up)."""
    return -(-len(prompt) // CHARS_PER_TOKEN)


def prompt_blocks(prompt: str, block_chars: int = BLOCK_TOKENS * CHARS_PER_TOKEN) -> bytes:
    """The keys of ``prompt``'s whole blocks, :data:`KEY_BYTES` each: block *k*'s key hashes the
    prompt's text up to the end of block *k* (so equal keys mean equal prefixes)."""
    digest = hashlib.blake2b(digest_size=KEY_BYTES)
    keys = []
    for start in range(0, len(prompt) - block_chars + 1, block_chars):
        digest.update(prompt[start:start + block_chars].encode())
        keys.append(digest.digest())
    return b"".join(keys)


class PrefixIndex:
    """Every whole-block prefix of the prompts seen so far, by its key (:func:`prompt_blocks`)."""

    def __init__(self, block_tokens: int = BLOCK_TOKENS, chars_per_token: int = CHARS_PER_TOKEN):
        self.block_chars = block_tokens * chars_per_token
        self.block_tokens = block_tokens
        self._seen: set[bytes] = set()

    def add(self, prompt: str) -> int:
        """Tokens of ``prompt``'s longest whole-block prefix seen in an earlier prompt; then remember it."""
        return self.add_blocks(prompt_blocks(prompt, self.block_chars))

    def add_blocks(self, blocks: bytes) -> int:
        """:meth:`add` of a prompt given by its :func:`prompt_blocks`."""
        shared, matching = 0, True
        for start in range(0, len(blocks), KEY_BYTES):
            key = blocks[start:start + KEY_BYTES]
            if matching and key in self._seen:
                shared += self.block_tokens
            else:
                matching = False
                self._seen.add(key)
        return shared

    def get_state(self) -> str:
        """The keys seen, sorted (the same index, the same text), base64 (a checkpoint's JSON)."""
        return base64.b64encode(b"".join(sorted(self._seen))).decode("ascii")

    def set_state(self, state: str) -> None:
        raw = base64.b64decode(state)
        self._seen = {raw[i:i + KEY_BYTES] for i in range(0, len(raw), KEY_BYTES)}


def cached_tokens(shared_tokens: int, prompt_chars: int, prompt_tokens: int) -> int:
    """A cached prefix of ``shared_tokens`` (at :data:`CHARS_PER_TOKEN` characters a token) in the
    provider's tokens: its share of the prompt's ``prompt_chars`` characters times the
    ``prompt_tokens`` the provider counted (``shared_tokens`` itself where it counted none)."""
    if not prompt_tokens or not prompt_chars:
        return shared_tokens
    return min(prompt_tokens, round(prompt_tokens * shared_tokens * CHARS_PER_TOKEN / prompt_chars))


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

    def saving(self, prompt_cost: float, cached_price_ratio: float) -> float:
        """Money saved on ``prompt_cost`` (what the prompt tokens cost uncached) where a cached
        prompt token costs ``cached_price_ratio`` of an uncached one."""
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


def _setting(llm: Any, name: str) -> Any:
    return llm.get(name) if isinstance(llm, dict) else getattr(llm, name, None)


def cached_prompt_price(llm: Any) -> float | None:
    """The price per 1k cached prompt tokens of an ``[llm]`` table (its config, or the dict a
    manifest keeps): ``price_cached_prompt_per_1k``, else :data:`DEFAULT_CACHED_PRICE_RATIO` of
    ``price_prompt_per_1k``; None where prompts are not priced."""
    prompt = float(_setting(llm, "price_prompt_per_1k") or 0.0) if llm is not None else 0.0
    if not prompt:
        return None
    cached = _setting(llm, "price_cached_prompt_per_1k")
    return prompt * DEFAULT_CACHED_PRICE_RATIO if cached is None else float(cached)


def cache_line(prompt_tokens: int, cached_tokens: int, llm: Any) -> str:
    """One line: the cacheable share of ``prompt_tokens`` and, where the ``[llm]`` table prices
    prompts, what serving ``cached_tokens`` at the cached price would save."""
    share = cached_tokens / prompt_tokens if prompt_tokens else 0.0
    line = (f"cacheable prompt prefix: {cached_tokens:,} of {prompt_tokens:,} prompt tokens ({share:.1%}; "
            f"whole {BLOCK_TOKENS}-token blocks repeating an earlier prompt's prefix, as vLLM's prefix cache serves them)")
    cached_price = cached_prompt_price(llm)
    if cached_price is None:
        return line + "; no price: set llm.price_prompt_per_1k (and llm.price_cached_prompt_per_1k) for the money it saves."
    prompt_price = float(_setting(llm, "price_prompt_per_1k"))
    cost = prompt_tokens * prompt_price / 1000
    saved = cached_tokens * (prompt_price - cached_price) / 1000
    return line + (f"; at {cached_price:g} per 1k cached prompt tokens (against {prompt_price:g}) it saves "
                   f"${saved:,.4f} of ${cost:,.4f} prompt cost.")
