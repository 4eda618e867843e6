"""The cacheable share of a run's prompt tokens and the money it would save at a provider's
cached-token price (``townsquare estimate``, the report, ``benchmarks/prompt_cache.py``). The
per-call prefix lengths come from the kernel's :mod:`townsquare.prompt_cache`
(``llm_calls.cached_prefix_tokens``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from townsquare.prompt_cache import BLOCK_TOKENS, CHARS_PER_TOKEN, PrefixIndex

#: the shortest prompt OpenAI's prompt caching serves (tokens)
OPENAI_MIN_CACHED_TOKENS = 1024
#: a cached prompt token's price over an uncached one where ``[llm] price_cached_prompt_per_1k``
#: is not set: OpenAI's discount for cached input when prompt caching was introduced (GPT-4o,
#: October 2024); later models bill cached input at 10-25 %, so set the price for those
DEFAULT_CACHED_PRICE_RATIO = 0.5


def prompt_tokens(prompt: str) -> int:
    """Approximate tokens of ``prompt`` (characters / :data:`CHARS_PER_TOKEN`, rounded up)."""
    return -(-len(prompt) // CHARS_PER_TOKEN)


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
