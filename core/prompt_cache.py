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
the index is part of a checkpoint, so a resumed run counts as an uninterrupted one. What the
share is worth, for ``townsquare estimate``, the report and the benchmark, is
:mod:`townsquare.lib.cache_share`.
"""

from __future__ import annotations

import base64
import hashlib

#: characters per token where no tokenizer is at hand (as :mod:`townsquare.dry_run`)
CHARS_PER_TOKEN = 4
#: tokens per cache block (vLLM's default ``block_size``)
BLOCK_TOKENS = 16
#: bytes of one block's key
KEY_BYTES = 8


def prompt_blocks(prompt: str, block_chars: int = BLOCK_TOKENS * CHARS_PER_TOKEN) -> bytes:
    """The keys of ``prompt``'s whole blocks, :data:`KEY_BYTES` each: block *k*'s key hashes the
    prompt's text up to the end of block *k* (so equal keys mean equal prefixes). A prompt
    shorter than a block has none: nothing of it could be served from a cache."""
    if len(prompt) < block_chars:
        return b""
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
        if len(blocks) == KEY_BYTES:  # one block (most prompts of a round of short decisions)
            if blocks in self._seen:
                return self.block_tokens
            self._seen.add(blocks)
            return 0
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
