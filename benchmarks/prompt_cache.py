"""Cacheable share of prompt tokens on the quickstart and valentines.toml (scripted model).

Logs every prompt the scripted model receives, in the order the run issues them, and prints
:func:`townsquare.lib.cache_share.measure` of them: the share of prompt tokens in whole 16-token
blocks that repeat a prefix of an earlier prompt of the run (vLLM's automatic prefix caching),
and the share of prompts of 1,024+ tokens (OpenAI's prompt caching). A second line leaves out the
repair requests (purposes ``*.repair``): the scripted model answers every JSON request with
strings where the schema wants numbers and lists, so every JSON answer gets one repair request
(its prompt, the answer and the schema again); a model held to the schema by constrained
decoding sends none.

    python benchmarks/prompt_cache.py [--rounds-valentines 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from townsquare.cli import main as cli
from townsquare.lib.cache_share import OPENAI_MIN_CACHED_TOKENS, CacheShare, measure, prompt_tokens
from townsquare.prompt_cache import PrefixIndex
from townsquare.testing.scripted import ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent


def prompts_of(config: str, *extra: str) -> list[tuple[str, str]]:
    """Every (purpose, prompt) (all messages joined, as a provider sees them) of a scripted run of ``config``."""
    seen: list[str] = []
    original = ScriptedLLM.complete

    async def logged(self, request):
        seen.append((request.purpose, "\n".join(m.content for m in request.messages)))
        return await original(self, request)

    ScriptedLLM.complete = logged
    try:
        with tempfile.TemporaryDirectory() as out:
            try:
                cli(["run", str(ROOT / config), "--llm", "scripted", "--out", out, "--quiet", *extra])
            except SystemExit as exit:
                if exit.code:
                    raise SystemExit(f"{config}: run failed (exit {exit.code})") from None
    finally:
        ScriptedLLM.complete = original
    return seen


def by_purpose(prompts: list[tuple[str, str]]):
    """Per purpose, the :class:`CacheShare` its prompts add (measured in the run's order), most uncached first."""
    index, parts = PrefixIndex(), {}
    for purpose, prompt in prompts:
        n, total, cached, long = parts.get(purpose, (0, 0, 0, 0))
        tokens = prompt_tokens(prompt)
        parts[purpose] = (n + 1, total + tokens, cached + index.add(prompt), long + (tokens >= OPENAI_MIN_CACHED_TOKENS))
    shares = {purpose: CacheShare(*counts) for purpose, counts in parts.items()}
    return sorted(shares.items(), key=lambda item: item[1].cached_prefix_tokens - item[1].prompt_tokens)


def ceiling(prompts: list[str]) -> float:
    """The most any order of the prompts' lines could cache: the share of prompt characters in
    lines that an earlier prompt of the run (or this one) already had. A prefix cache serves only
    text it has seen, so lines new to the run (a persona first used, a new memory, a feed post)
    stay uncached whatever the template order; the real share is lower still, as a cached prefix
    must also repeat everything before it."""
    seen: set[str] = set()
    total = repeated = 0
    for prompt in prompts:
        for line in prompt.splitlines(keepends=True):
            total += len(line)
            if line in seen:
                repeated += len(line)
            seen.add(line)
    return repeated / total if total else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds-valentines", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = {"quickstart": ("examples/quickstart.toml",),
            f"valentines[{args.rounds_valentines} rounds]": ("examples/valentines.toml", "--set", f"rounds={args.rounds_valentines}")}
    logged = {name: prompts_of(*run) for name, run in runs.items()}
    results = {name: measure(prompt for _, prompt in prompts) for name, prompts in logged.items()}
    first_answers = {name: measure(prompt for purpose, prompt in prompts if not purpose.endswith(".repair"))
                     for name, prompts in logged.items()}
    if args.json:
        print(json.dumps({k: {"prompts": v.prompts, "prompt_tokens": v.prompt_tokens, "cached_prefix_tokens": v.cached_prefix_tokens,
                              "share": round(v.share, 4), "long_share": round(v.long_share, 4),
                              "share_without_repairs": round(first_answers[k].share, 4),
                              "ceiling": round(ceiling([p for _, p in logged[k]]), 4)} for k, v in results.items()}))
    else:
        for name, share in results.items():
            print(f"{name}: {share.line()}")
            print(f"{name} without repair requests: {first_answers[name].line()}")
            print(f"{name}: at most {ceiling([prompt for _, prompt in logged[name]]):.1%} in any order (lines repeating earlier text)")
            for purpose, part in by_purpose(logged[name]):
                print(f"  {purpose:<24} {part.prompts:>5} prompts {part.prompt_tokens - part.cached_prefix_tokens:>8} uncached tokens")


if __name__ == "__main__":
    main()
