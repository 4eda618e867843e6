"""Costs before spending: a stand-in model that answers at once and counts, and the table of
calls, tokens and money it gives (``townsquare estimate`` and every ``eval ... --estimate``).

A dry run plays the real code path with :class:`StandInModel` in place of the provider and no
middleware (no cache, budget, retries or waits): every request is counted by purpose, and
nothing reaches a model. Prompt tokens are characters / 4; completion tokens are what a caller
expects for that kind of request (:data:`DEFAULT_COMPLETION_TOKENS`, or per purpose prefix),
never more than the request's ``max_tokens`` or the model's own cap (the local model's
``[llm] max_tokens``: it answers no longer). A repair request (purpose ``X.repair``) is
answered but not counted: an estimate prices the calls a well-formed answer needs.
The stand-in's answers are the simplest a request allows, not what a design reads well: where a
design's parser rejects one (a schedule time that is no clock time), the design falls back to its
default as it would for any model and the dry run follows that path, recording the fallback in
its ``llm_calls`` but warning about none (``StandInModel.stand_in``).
Money is tokens times the ``[llm]`` table's ``price_prompt_per_1k`` / ``price_completion_per_1k``
(the same prices a real call is charged in ``llm_calls``), shown only where they are set.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from typing import Any, Callable, Iterable, Sequence

from townsquare.llm import LLMRequest, LLMResponse

#: completion tokens expected per call, by kind of request, unless told per purpose
DEFAULT_COMPLETION_TOKENS = {"labels": 2, "json": 60, "text": 80}


class StandInModel:
    """Answers every request instantly and counts calls and tokens per purpose.

    Not a language model: a decision gets a label chosen by a hash of the prompt, JSON the
    simplest value of the requested schema (:func:`schema_example`), text a placeholder as
    long as the completion expected (a later prompt that quotes it, a judge's, is sized right).
    ``completion_tokens`` maps a purpose, or the start of one (``personagym.answer``), to the
    completion tokens expected per call; the longest matching key wins.
    """

    name = "estimate"
    model = "stand-in"
    #: its answers are no model's: a parser that rejects one (a schedule time that is no clock
    #: time, a chunk's actions that do not fill it) falls back as for any model, and the dry run
    #: follows that path, but warns about nothing (:meth:`townsquare.llm_journal.LLMJournal.record`)
    stand_in = True

    def __init__(self, completion_tokens: dict[str, int] | None = None, cap: int | None = None,
                 script: Callable[[LLMRequest], str | None] | None = None):
        self.completion_tokens = dict(completion_tokens or {})
        #: the most completion tokens the model stood in for gives (None: no cap of its own)
        self.cap = cap
        #: answers a caller scripts for some requests (an agent's tool calls), None for the rest
        self.script = script
        self.rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])

    def expected_completion(self, purpose: str, kind: str) -> int:
        matches = [key for key in self.completion_tokens if purpose == key or purpose.startswith(key + ".")]
        return self.completion_tokens[max(matches, key=len)] if matches else DEFAULT_COMPLETION_TOKENS[kind]

    async def complete(self, request: LLMRequest) -> LLMResponse:
        prompt = "".join(m.content for m in request.messages)
        kind = "labels" if request.labels else "json" if request.json_schema is not None else "text"
        prompt_tokens = math.ceil(len(prompt) / 4)
        completion = min(self.expected_completion(request.purpose, kind), request.max_tokens, self.cap or request.max_tokens)
        if not request.purpose.endswith(".repair"):
            row = self.rows[request.purpose]
            row[0] += 1
            row[1] += prompt_tokens
            row[2] += completion
        scripted = self.script(request) if self.script is not None else None
        text = scripted if scripted is not None else self.answer_text(request, prompt, completion)
        return LLMResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion, model=self.model, provider=self.name)

    def answer_text(self, request: LLMRequest, prompt: str, completion: int) -> str:
        """The answer to ``request`` (``prompt``: its messages' text; ``completion``: the tokens
        expected): a subclass answers otherwise (:class:`townsquare.commands.typical_answers.TypicalModel`)."""
        if request.labels:
            digest = int.from_bytes(hashlib.blake2b(prompt.encode(), digest_size=8).digest(), "big")
            text = request.labels[digest % len(request.labels)]
        elif request.json_schema is not None:  # its strings share the completion expected, so later prompts are sized right
            strings = _count_strings(schema_example(request.json_schema))
            text = json.dumps(schema_example(request.json_schema, string_chars=completion * 4 // max(1, strings)))
        else:  # as long as the answer expected (~4 characters a token), so prompts that quote it are sized right
            text = ("abc " * completion).strip() or "abc"
        return text


def schema_example(schema: dict[str, Any], string_chars: int = 1) -> Any:
    """The simplest value of a JSON schema: what the stand-in answers to a JSON request. It
    satisfies the schema's ``enum``/``const``, ``minItems``, ``minLength``/``maxLength`` and
    ``minimum``; of ``oneOf``/``anyOf`` alternatives it takes the first; a free string has
    ``string_chars`` characters."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("oneOf", "anyOf"):
        if schema.get(key):
            return schema_example(schema[key][0], string_chars)
    kind = schema.get("type", "object")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {name: schema_example(sub, string_chars) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [schema_example(schema.get("items", {"type": "string"}), string_chars) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        chars = max(1, int(schema.get("minLength", 1)), string_chars)
        return "x" * min(chars, int(schema.get("maxLength", chars)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1 if kind == "integer" else 0.5)
        return int(low) if kind == "integer" else float(low)
    return {"boolean": False}.get(kind)


def _count_strings(value: Any) -> int:
    if isinstance(value, str):
        return 1
    if isinstance(value, dict):
        return sum(_count_strings(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_strings(v) for v in value)
    return 0


def prices_of(llm_config: Any) -> tuple[float, float] | None:
    """(prompt, completion) price per 1k tokens from an ``[llm]`` config; None when unset."""
    prices = tuple(float(getattr(llm_config, f"price_{part}_per_1k", 0.0) or 0.0) for part in ("prompt", "completion"))
    return prices if any(prices) else None  # type: ignore[return-value]


def cost_of(prompt_tokens: int, completion_tokens: int, prices: tuple[float, float] | None) -> float | None:
    return None if prices is None else (prompt_tokens * prices[0] + completion_tokens * prices[1]) / 1000


def format_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """Aligned text columns: the first left-aligned, numbers with thousands separators, a cost
    (float) in dollars, None as ``-``."""
    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"${value:,.4f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    cells = [list(header)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
