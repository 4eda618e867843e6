"""Prompts for instruction-tuned (chat) models run in-process: the model's own chat template.

An instruction-tuned model such as SmolLM2-135M-Instruct was trained on conversations in one
format (SmolLM2: ChatML, ``<|im_start|>user ... <|im_end|>``). The local provider
(``llm_local``) renders a request's messages with the template stored in the GGUF file
(``tokenizer.chat_template``, rendered by llama-cpp-python's ``Jinja2ChatFormatter``, as its
``create_chat_completion`` does) and the answer is the assistant turn that follows: no
few-shot examples and no ``Answer:`` scaffolding (:mod:`.base_model_prompts` is for base
models).

Two things differ from rendering the whole prompt as one string and tokenizing it:

* the template's text is tokenized with special tokens on, the messages' contents with them
  off, so a post that contains ``<|im_start|>`` is text and cannot open a turn of its own;
* a prompt longer than the context loses tokens from the start of the earliest message
  contents (usually the persona), never the template's markers or the question at the end.

Everything here is pure: no model, no llama.cpp.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from townsquare.llm import LLMRequest
from townsquare.plugins.base_model_prompts import FittedPrompt

#: marks where a message's content goes in the rendered template (never in real text: a
#: control character, removed from contents before rendering)
_MARK = "\x1e"

#: A posted text answer ends at a blank line: the assistant turn otherwise ends at the model's
#: end-of-turn token. One paragraph, as the base-model prompts ask for.
CHAT_TEXT_STOP: tuple[str, ...] = ("\n\n",)

Render = Callable[[list[dict[str, str]]], str]
Tokenize = Callable[[str, bool, bool], list[int]]  # (text, add_bos, special) -> tokens


def chat_pieces(request: LLMRequest, render: Render) -> list[tuple[str, bool]]:
    """The rendered prompt as ``(text, is_content)`` pieces, in order: the template's own text
    (``is_content`` False) and each message's content (True)."""
    contents = [m.content.replace(_MARK, " ").strip() for m in request.messages]
    marked = [{"role": m.role, "content": f"{_MARK}{i}{_MARK}"} for i, m in enumerate(request.messages)]
    text = render(marked)
    pieces: list[tuple[str, bool]] = []
    parts = text.split(_MARK)
    # parts alternate: template, index, template, index, ..., template
    for position, part in enumerate(parts):
        if position % 2 == 0:
            if part:
                pieces.append((part, False))
        else:
            pieces.append((contents[int(part)], True))
    return pieces


def fit_chat_prompt(pieces: Sequence[tuple[str, bool]], tokenize: Tokenize, limit: int) -> FittedPrompt:
    """The prompt's tokens, at most ``limit``: template pieces with special tokens, contents
    without. Too long: tokens are cut from the start of the earliest contents first."""
    if limit < 2:
        raise ValueError(f"no room for a prompt ({limit} tokens)")
    token_lists = [tokenize(text, position == 0, not is_content) for position, (text, is_content) in enumerate(pieces)]
    over = sum(len(t) for t in token_lists) - limit
    truncated = over > 0
    for position, (_, is_content) in enumerate(pieces):
        if over <= 0:
            break
        if is_content:
            cut = min(over, len(token_lists[position]))
            token_lists[position] = token_lists[position][cut:]
            over -= cut
    tokens = [token for part in token_lists for token in part]
    if over > 0:  # the template alone does not fit
        raise ValueError(f"no room for the chat template ({len(tokens)} tokens, limit {limit})")
    return FittedPrompt(tokens, 0, False, truncated)


def chat_label_continuations(labels: Sequence[str]) -> list[str]:
    """What each label looks like as the start of the assistant's turn: the label itself (the
    turn starts on a fresh line, with no space before the first word)."""
    return [label.strip() for label in labels]
