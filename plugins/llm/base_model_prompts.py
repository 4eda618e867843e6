"""Completion-style prompts for base (pretrained, not instruction-tuned) language models.

A base model continues text; it does not follow instructions. Asked "Like or skip?" after a
chat transcript, Gemma 3 270M writes " I love this" rather than a label. So the local
provider (``local``) never sends a chat: it renders the request as a document whose
natural continuation is the answer, Brown et al. (2020, §2) style few-shot prompting:

    <header: what kind of document this is>

    Context: <a persona>            \\
    Question: <a decision>           |  two or three solved examples (shots)
    Options: like, skip              |  in exactly the task's format
    Answer: like                    /

    Context: <the request's system messages>
    Question: <the request's user message>
    Options: <the request's labels>
    Answer:

The model's continuation after the last ``Answer:`` is the answer. The shots teach the format
(a label, a JSON object, one short paragraph ended by a blank line), not the right choice: the
local provider also constrains the continuation (label scoring, a JSON grammar, a stop
sequence), so the format holds whatever the model prefers.

The prompts are data (:data:`PROMPT_BOOKS`), in one place, so a study can swap them
(STYLE.md, convention 12). Everything here is pure: no model, no llama.cpp.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from townsquare.api import LLMRequest, Message
from townsquare.api import request_kind as api_request_kind

_BLANK_LINES = re.compile(r"\n[ \t]*\n\s*")

#: The continuation of an answer ends at the end of its line: every shot's answer is one
#: paragraph on one line, and a base model that goes on past it starts echoing the prompt's
#: fields ("Topic: ...", "Persona information: ...", the next "Context:").
TEXT_STOP: tuple[str, ...] = ("\n",)


@dataclass(frozen=True)
class Shot:
    """One solved example: ``context`` plays the system message, ``question`` the user's."""

    context: str
    question: str
    answer: str
    options: tuple[str, ...] = ()
    schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class PromptBook:
    """How one kind of request (choice, json, text) is written for a base model."""

    header: str
    shots: tuple[Shot, ...]
    context_tag: str = "Context"
    question_tag: str = "Question"
    answer_tag: str = "Answer"
    options_tag: str = "Options"
    format_tag: str = "Format"


PROMPT_BOOKS: dict[str, PromptBook] = {
    # Decisions with a fixed answer set. One "like" and one "skip" example keep the prior
    # between the two near even (with a single "like" example Gemma 270M says "like" 75% of the
    # time whatever the post); the third uses labels of its own, so the shots teach "the answer
    # is one of the Options" rather than favouring the task's first or last label.
    "choice": PromptBook(
        header=("Decisions made by people on a social network. People engage with what matches their interests"
                " and pass over everything else. Each answer is exactly one of the listed options."),
        shots=(
            Shot(
                context="You are Maria, 34, a nurse in Porto who grows tomatoes and reads gardening blogs.",
                question='A post in your feed: "My tomatoes finally ripened after weeks of rain!" Do you like it or skip it?',
                options=("like", "skip"),
                answer="like",
            ),
            Shot(
                context="You are Tom, 52, an accountant in Leeds who follows football and the stock market.",
                question='A post in your feed: "Free pattern for a chunky winter scarf, knitting tips inside." Do you like it or skip it?',
                options=("like", "skip"),
                answer="skip",
            ),
            Shot(
                context="You are Priya, 27, a software engineer who hikes every weekend.",
                question='Someone posted: "Ten photos from my climb up Ben Nevis." Follow them or ignore them?',
                options=("follow", "ignore"),
                answer="follow",
            ),
            # Options can be account ids (the follow reflection): the answer is then one of them.
            Shot(
                context="You are Ana, 41, a teacher in Lyon who bakes bread and reads food blogs.",
                question=("Post 1 was written by user u-031: a sourdough recipe. You liked it. "
                          "Post 2 was written by user u-007: last night's football scores. You did nothing. Which user do you follow?"),
                options=("u-031", "u-007", "do not follow"),
                answer="u-031",
            ),
        ),
    ),
    # JSON answers: the grammar makes any output parse; the shots make the values sensible.
    "json": PromptBook(
        header="Answers written by people using a social network. Each answer is one JSON object on one line.",
        shots=(
            Shot(
                context="You are Maria, 34, a nurse in Porto who grows tomatoes and reads gardening blogs.",
                question='Rate how interesting this post is to you from 1 to 10: "My tomatoes finally ripened after weeks of rain!"',
                schema={"type": "object", "properties": {"score": {"type": "integer"}, "reason": {"type": "string"}}},
                answer='{"score": 9, "reason": "I grow tomatoes too and this year was rainy for me as well"}',
            ),
            Shot(
                context="You are Tom, 52, an accountant in Leeds who follows football and the stock market.",
                question="Plan your afternoon on the platform.",
                schema={"type": "object", "properties": {"active": {"type": "boolean"}, "topics": {"type": "array", "items": {"type": "string"}}}},
                answer='{"active": true, "topics": ["Premier League results", "interest rates"]}',
            ),
        ),
    ),
    # Answers that start with one of a few fixed openings (``answer_prefixes``), such as the
    # comment decision (Zhou table 7): the provider scores the openings like labels, then writes
    # on after one that ends in ":". One example of each opening, so neither is the default.
    "prefixed": PromptBook(
        header=("Replies written by people on a social network. Each answer starts with one of the listed"
                " openings; after an opening that ends in a colon comes the person's own text."),
        shots=(
            Shot(
                context="You are Maria, 34, a nurse in Porto who grows tomatoes and reads gardening blogs.",
                question='A post in your feed: "Best budget laptops for gaming this year." Would you comment on it?',
                options=("no comment", "Comment content:"),
                answer="no comment",
            ),
            Shot(
                context="You are Priya, 27, a software engineer who hikes every weekend.",
                question='A post in your feed: "Our club walked 20 km along the coast path today." Would you comment on it?',
                options=("no comment", "Comment content:"),
                answer="Comment content: Lovely route! Which stretch of the coast path was it? I am looking for a long walk next weekend.",
            ),
        ),
    ),
    # Free text: one short paragraph, then a blank line (the stop sequence).
    "text": PromptBook(
        header="Posts and replies written by people on a social network. Each answer is one short paragraph.",
        shots=(
            Shot(
                context="You are Maria, 34, a nurse in Porto who grows tomatoes and reads gardening blogs.",
                question="Write a short post for your followers.",
                answer="Finally picked the first tomatoes of the season this morning. Weeks of rain and they still came out sweet. Anyone else growing San Marzano this year?",
            ),
            Shot(
                context="You are Tom, 52, an accountant in Leeds who follows football and the stock market.",
                question='Reply to this post: "Leeds were robbed last night, that penalty was never a foul."',
                answer="Watched it three times and I agree, he got the ball first. Still, we should have finished our chances in the first half.",
            ),
        ),
    ),
}


#: the LLM layer's kinds of request (:func:`townsquare.api.request_kind`) -> the prompt book for each
BOOK_OF_KIND = {"labels": "choice", "prefixes": "prefixed", "json": "json", "text": "text"}


def request_kind(request: LLMRequest) -> str:
    """``choice`` for a label decision, ``prefixed`` for an answer with fixed openings, ``json``
    for a JSON answer, else ``text`` (the name of its prompt book)."""
    return BOOK_OF_KIND[api_request_kind(request)]


def describe_schema(schema: dict[str, Any]) -> str:
    """A one-line reading of a JSON schema's top level, e.g. ``JSON with keys score (integer),
    reason (string)``: a base model follows a short hint better than the schema itself."""
    properties = schema.get("properties")
    if schema.get("type") == "object" and isinstance(properties, dict) and properties:
        keys = ", ".join(f"{name} ({_type_name(spec)})" for name, spec in properties.items())
        return f"JSON with keys {keys}"
    if schema.get("type") == "array":
        return f"a JSON array of {_type_name(schema.get('items', {}))}"
    return "JSON"


def _type_name(spec: Any) -> str:
    if not isinstance(spec, dict):
        return "value"
    kind = spec.get("type")
    if kind == "array":
        return f"list of {_type_name(spec.get('items', {}))}"
    if "enum" in spec:
        return " or ".join(json.dumps(v) for v in spec["enum"])
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return str(kind or "value")


def _block(book: PromptBook, messages: Sequence[Message], options: Sequence[str] = (),
           schema: dict[str, Any] | None = None, answer: str | None = None) -> str:
    """One example or the task: the transcript in tagged lines, then the answer tag. Blank
    lines inside a message are closed up: in this document a blank line ends an example."""
    lines = []
    for message in messages:
        content = _BLANK_LINES.sub("\n", message.content.strip())
        if message.role == "system":
            lines.append(f"{book.context_tag}: {content}")
        elif message.role == "assistant":
            lines.append(f"{book.answer_tag}: {content}")
        else:
            lines.append(f"{book.question_tag}: {content}")
    if options:
        lines.append(f"{book.options_tag}: {', '.join(options)}")
    if schema is not None:
        lines.append(f"{book.format_tag}: {describe_schema(schema)}")
    lines.append(f"{book.answer_tag}:" if answer is None else f"{book.answer_tag}: {answer}")
    return "\n".join(lines)


def render_parts(request: LLMRequest, *, shots: bool = True, books: dict[str, PromptBook] | None = None) -> tuple[str, str]:
    """The completion prompt for ``request`` in two parts: the preamble (header and examples,
    the same for every request of a kind) and the task; the answer continues the task.

    System messages become ``Context:`` lines, user messages ``Question:`` lines and assistant
    messages ``Answer:`` lines (a repair turn reads as an earlier answer and a follow-up
    question). ``shots=False`` leaves the examples out (to fit a small context window).
    """
    book = (books or PROMPT_BOOKS)[request_kind(request)]
    parts = [book.header]
    if shots:
        for shot in book.shots:
            example = [Message("system", shot.context), Message("user", shot.question)]
            parts.append(_block(book, example, shot.options, shot.schema, shot.answer))
    preamble = "\n\n".join(parts) + "\n\n"
    return preamble, _block(book, request.messages, request.labels or request.answer_prefixes or (), request.json_schema)


def render_prompt(request: LLMRequest, *, shots: bool = True, books: dict[str, PromptBook] | None = None) -> str:
    """The whole completion prompt (see :func:`render_parts`)."""
    return "".join(render_parts(request, shots=shots, books=books))


def clean_text(text: str) -> str:
    """A generated post or reply as it should appear: trimmed, and without the quotation marks
    a base model likes to wrap a whole answer in (quotes inside are kept)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"' and '"' not in text[1:-1]:
        text = text[1:-1].strip()
    return text


def label_continuations(labels: Sequence[str]) -> list[str]:
    """What each label looks like as the continuation of ``Answer:``: a space, then the label.
    Scoring ``" like"`` rather than ``"like"`` matters: after a colon the model's tokens carry
    the space (Gemma: ``" like"`` is one token, ``"like"`` another), and an unnatural
    tokenization gets a lower, distorted probability."""
    return [f" {label.strip()}" for label in labels]


def pick_label(logprobs: Sequence[float], temperature: float, draw: float) -> int:
    """Which label to answer, given each label's total log-probability.

    At temperature 0 the most likely label (the first on a tie). Above 0, a draw from the
    labels' distribution sharpened or flattened by the temperature, ``p_i ∝ exp(lp_i / T)``:
    the same distribution temperature sampling under a grammar would give over these labels
    (without the top-k/top-p cut) when each label is one token; for longer labels the
    temperature applies to the whole label's probability rather than token by token.
    ``draw`` is a uniform number in [0, 1) from the caller's seeded generator, so the choice is
    reproducible.
    """
    if not logprobs:
        raise ValueError("no labels to choose from")
    if temperature <= 0:
        return max(range(len(logprobs)), key=lambda i: (logprobs[i], -i))
    cumulative = 0.0
    for index, probability in enumerate(label_probabilities(logprobs, temperature)):
        cumulative += probability
        if draw < cumulative:
            return index
    return len(logprobs) - 1


def label_probabilities(logprobs: Sequence[float], temperature: float = 1.0) -> list[float]:
    """The labels' probabilities renormalised over the label set (for the response's meta)."""
    if not logprobs:
        return []
    t = temperature if temperature > 0 else 1.0
    top = max(lp / t for lp in logprobs)
    weights = [math.exp(lp / t - top) for lp in logprobs]
    total = sum(weights)
    return [w / total for w in weights]


@dataclass(frozen=True)
class FittedPrompt:
    """A prompt's tokens. ``boundary`` is where the shared preamble ends (0 when the prompt was
    cut): the local provider evaluates the two parts as separate batches, always, so a
    prompt's logits do not depend on what the model evaluated before it."""

    tokens: list[int]
    boundary: int
    shots: bool
    truncated: bool


def fit_prompt(request: LLMRequest, tokenize: Callable[[str, bool], list[int]], limit: int, *,
               shots: bool = True, books: dict[str, PromptBook] | None = None) -> FittedPrompt:
    """The prompt's tokens, at most ``limit`` of them. ``tokenize(text, bos)`` is the model's
    tokenizer (``bos``: put the begin-of-sequence token first).

    A prompt that does not fit loses its examples first; if it still does not fit, its
    beginning (header, then the oldest context) is cut, keeping the first token (BOS) and the
    end, where the question and the answer tag are.
    """
    if limit < 2:
        raise ValueError(f"no room for a prompt ({limit} tokens)")
    for with_shots in ((True, False) if shots else (False,)):
        preamble, task = render_parts(request, shots=with_shots, books=books)
        head = tokenize(preamble, True)
        tokens = head + tokenize(task, False)
        if len(tokens) <= limit:
            return FittedPrompt(tokens, len(head), with_shots, False)
    return FittedPrompt(tokens[:1] + tokens[len(tokens) - (limit - 1):], 0, False, True)


def required_everywhere(schema: Any) -> Any:
    """A copy of a JSON schema in which every object requires all of its properties.

    A grammar built from a schema leaves optional properties out at will, and a small base
    model happily answers ``{}``; requests ask for the keys they list.
    """
    if isinstance(schema, list):
        return [required_everywhere(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy = {key: required_everywhere(value) for key, value in schema.items()}
    properties = copy.get("properties")
    if isinstance(properties, dict) and properties and "required" not in copy:
        copy["required"] = list(properties)
    return copy
